"""Text from strangers (a published run's names and fields, a server's reply) reaches a terminal only
escaped: issue #44 case 8. `core.text.for_terminal` and its choke points: `pstbench`'s stdout and stderr,
the pytest terminal summary's lines, UserError messages."""

from __future__ import annotations

import json

import numpy as np
from helpers.paired_runs import scores_from, write_run

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.text import TerminalStream, for_terminal, md_code, md_escape, raw, redact, redact_words

EVIL = "evil\x1b]0;pwned\x07\x1b[2J\x1b[8m\u202ehidden\x9b31m\x7f\x00\r"
CONTROL = [chr(c) for c in (*range(0x20), *range(0x7F, 0xA0)) if chr(c) not in "\n\t"] + ["\u202e", "\u2066", "\u200f"]


def _shown(text: str) -> None:
    assert not any(c in text for c in CONTROL), repr(text)


def test_for_terminal_shows_every_control_character_escaped_and_leaves_text_alone():
    """issue #44 case 8: ESC, BEL, C1, DEL, NUL, CR and bidi overrides become visible escapes."""
    s = for_terminal(EVIL)
    _shown(s)
    assert s == "evil\\x1b]0;pwned\\x07\\x1b[2J\\x1b[8m\\u202ehidden\\x9b31m\\x7f\\x00\\x0d"
    assert for_terminal(s) == s  # twice is once
    plain = "track: demo   PSNR↑ 23.50 ± 0.10  ΔE00↓\n\tdone é 日本"
    assert for_terminal(plain) == plain
    assert for_terminal("half \udcff") == "half \\udcff"  # a lone surrogate (surrogateescape) prints


def test_terminal_stream_escapes_writes_and_keeps_the_raw_stream(capsys):
    import sys

    stream = TerminalStream(sys.stdout)
    print(EVIL, file=stream)
    print("\r[==]", end="", file=raw(stream))  # a progress bar's carriage return
    out = capsys.readouterr().out
    assert out.startswith("evil\\x1b]0;") and out.endswith("\r[==]")


def test_user_error_messages_are_shown_escaped():
    """A UserError quoting a file's field or a server's text (printed by both front doors, recorded in run.json)."""
    assert str(UserError(f"run.json: name {EVIL!s}: fix: x")) == f"run.json: name {for_terminal(EVIL)}: fix: x"


def _runs(tmp_path):
    n = 12
    a = write_run(tmp_path, "a", scores_from({"psnr": np.linspace(20, 21, n)}, n))
    b = write_run(tmp_path, "b", scores_from({"psnr": np.linspace(20.5, 22, n)}, n))
    for d in (a, b):  # a published run's names and fields with control sequences (folder names stay plain)
        for f in ("summary.json", "run.json"):
            data = json.loads((d / f).read_text())
            data["name"] = EVIL + d.name
            (d / f).write_text(json.dumps(data))
    return a, b


def test_compare_prints_a_runs_names_escaped(tmp_path, capsys):
    """issue #44 case 8: `pstbench compare` of runs whose names hold ESC sequences (title, clear, hidden)."""
    a, b = _runs(tmp_path)
    code = cli_main(["compare", str(a), str(b)])
    out, err = capsys.readouterr()
    _shown(out + err)
    assert code in (0, 1, 2), err
    assert "evil\\x1b]0;pwned" in out + err


def test_the_table_command_prints_names_escaped(tmp_path, capsys):
    a, b = _runs(tmp_path)
    cli_main(["table", str(a), str(b), "--format", "csv"])
    out, err = capsys.readouterr()
    _shown(out + err)


def test_markdown_escapes_what_it_did_not_write():
    """issue #44 case 10, the escapers: HTML, pipes, backticks, backslashes, math, entities, ESC."""
    s = md_escape("<img src=x onerror=alert(1)> | `x` \\ $a$ % & \x1b[2J\nnext")
    assert "<" not in s and ">" not in s and "\x1b" not in s and "\n" not in s
    assert "\\|" in s and "\\`x\\`" in s and "\\$a\\$" in s and "&amp;" in s
    assert md_escape("Identity") == "Identity"
    assert md_code("a `b` c") == "``a `b` c``" and md_code("`x") == "`` `x ``"
    assert md_code("demo") == "`demo`"


def test_redact_finds_a_secret_in_the_spellings_a_reply_carries():
    key = 'k-"42/é+x'
    for form in (key, json.dumps(key)[1:-1], json.dumps(key, ensure_ascii=False)[1:-1], "k-%2242%2F%C3%A9%2Bx"):
        assert redact(f"echo {form} end", [key]) == "echo <redacted> end"
    assert redact("nothing", ["", None]) == "nothing"


def test_recorded_command_lines_redact_every_spelling_of_a_header_value():
    words = [
        "--header",
        "A=1",
        "--head=B=2",
        "--hea",
        "C=3",
        "--name",
        "n",
        "-o",
        "pstbench_header=E=4",
        "--override-ini=pstbench_header=F=5",
        "-opstbench_header=G=6",
        "-o",
        "other=1",
        "--pstbench-header",
        "H=7",
        "--pstbench-header=I=8",
    ]
    assert redact_words(words, "--pstbench-header", "pstbench_header") == [
        "--header",
        "A=1",
        "--head=B=2",
        "--hea",
        "C=3",
        "--name",
        "n",
        "-o",
        "pstbench_header=E=<redacted>",
        "--override-ini=pstbench_header=F=<redacted>",
        "-opstbench_header=G=<redacted>",
        "-o",
        "other=1",
        "--pstbench-header",
        "H=<redacted>",
        "--pstbench-header=I=<redacted>",
    ]
    assert redact_words(words[:5]) == [
        "--header",
        "A=<redacted>",
        "--head=B=<redacted>",
        "--hea",
        "C=<redacted>",
    ]
