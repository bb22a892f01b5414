"""The documentation is checked against the code: README.md (the front page) and docs/*.md.

1. every relative link resolves to a file, and an anchor to a heading of that file (GitHub's rules);
2. every `pstbench ...` command in a fenced bash block or an inline code span names a real command
   and subcommand, and each of its options is in that command's `--help`; the option tables of
   docs/cli.md likewise;
3. every `--pstbench-...` option, and every ini key the docs name, is one the plugin registers;
4. nothing of the README before the split into docs/ was lost (tests/project/docs_inventory.txt: its option
   strings and commands);
5. the front page's "Scoring your method" commands run end to end on the demo track, and the CLI and
   pytest runs give byte-identical run files.
"""

from __future__ import annotations

import argparse
import functools
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_pstbench.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SEPARATORS = {";", "&&", "||", "|", "&"}


def _page_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _outside_fences(text: str):
    """(line, fence_language or None) for every line; the fence lines themselves are skipped."""
    fence = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = None if fence is not None else (stripped[3:].strip() or "text")
            continue
        yield line, fence


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped except '-' and '_', spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found, seen = set(), {}
    for line, fence in _outside_fences(path.read_text()):
        m = re.match(r"#{1,6} (.*)", line) if fence is None else None
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def _prose(path: Path) -> str:
    return "\n".join(line for line, fence in _outside_fences(path.read_text()) if fence is None)


def _links(path: Path):
    for m in re.finditer(r"\]\(([^)\s]+)\)", _prose(path)):
        yield m.group(1)


def _bash_lines(path: Path):
    """Logical lines of fenced bash blocks (continuations joined)."""
    pending = ""
    for line, fence in _outside_fences(path.read_text()):
        if fence != "bash":
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        yield pending + line
        pending = ""


def _code_spans(path: Path):
    for line in _prose(path).splitlines():
        yield from re.findall(r"`([^`]+)`", line)


def _segments(line: str):
    """The simple commands of a shell line, environment assignments and `do`/`then` dropped."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    lex.commenters = "#"
    segment: list[str] = []
    for token in list(lex) + [";"]:
        if token in SEPARATORS:
            while segment and (
                re.match(r"[A-Za-z_][A-Za-z0-9_]*=", segment[0]) or segment[0] in ("do", "then", "done")
            ):
                segment.pop(0)
            if segment:
                yield segment
            segment = []
        else:
            segment.append(token)


def pstbench_commands():
    """(page, argv after `pstbench`) for every pstbench command the docs show."""
    for path in PAGES:
        for line in _bash_lines(path):
            for seg in _segments(line):
                if seg[0] == "pstbench":
                    yield _page_id(path), line.strip(), seg[1:]
        for span in _code_spans(path):
            # Inline spans that are commands, not messages (`pstbench: error: ...`, `pstbench gate FAILED: ...`).
            if span.startswith("pstbench ") and "FAILED" not in span:
                yield _page_id(path), span, span.replace("\\|", "|").split()[1:]


# ---------------------------------------------------------------------------------------------
# 1. links


def test_every_relative_link_resolves_to_a_file_and_heading():
    problems = []
    checked = 0
    for page in PAGES:
        for target in _links(page):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
                continue
            file_part, _, anchor = target.partition("#")
            dest = (page.parent / file_part).resolve() if file_part else page
            checked += 1
            if not dest.exists():
                problems.append(f"{_page_id(page)}: link {target}: no such file {dest}")
            elif anchor and (dest.is_dir() or dest.suffix != ".md" or anchor not in anchors(dest)):
                problems.append(f"{_page_id(page)}: link {target}: no heading #{anchor} in {dest.name}")
    assert checked > 50
    assert not problems, "\n".join(problems)


def test_docs_index_lists_every_page():
    index = (ROOT / "docs" / "README.md").read_text()
    for page in (ROOT / "docs").glob("*.md"):
        if page.name != "README.md":
            assert f"]({page.name}" in index, f"docs/README.md does not link {page.name}"


def test_front_page_stays_short_and_keeps_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    # `.ci/run` and the project's CI run the README's test command as written.
    assert (
        "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' && python -m pytest -n 2\n" in text
    )
    assert "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' && pstbench demo\n" in text
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' && python -m pytest -n 2" in ci


# ---------------------------------------------------------------------------------------------
# 2. pstbench commands and options against `pstbench ... --help`

_HELP: dict[tuple, tuple[int, str]] = {}


def _help(path: tuple[str, ...], capsys) -> tuple[int, str]:
    if path not in _HELP:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            main([*path, "--help"])
        captured = capsys.readouterr()
        _HELP[path] = (exc.value.code or 0, captured.out + captured.err)
    return _HELP[path]


@functools.cache
def _parser():
    return build_parser()


def _subcommands(path: tuple[str, ...]) -> dict:
    """The subcommands of `pstbench <path>` (empty for a leaf command), from the parser itself."""
    parser = _parser()
    for word in path:
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[word]
    return next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})


def _command_path(argv: list[str], capsys) -> tuple[tuple[str, ...], str]:
    """The (sub)command path that argv starts with, and its `--help` text; fails when a word where a
    (sub)command belongs is not one. `a|b` (as in `vab export|score`) names alternatives, each checked."""
    path: tuple[str, ...] = ()
    # prose may name a group alone (`pstbench vab`); an option where a command belongs (`pstbench --version`)
    # is one of the group's own options, checked against its --help
    while _subcommands(path) and len(path) < len(argv) and not argv[len(path)].startswith("-"):
        word = argv[len(path)]
        for alternative in word.split("|"):
            if alternative not in _subcommands(path):
                raise AssertionError(f"`{' '.join(('pstbench', *path, alternative))}` is not a command")
        path = (*path, word.split("|")[0])
    code, text = _help(path, capsys)
    assert code == 0 and text.startswith(f"usage: pstbench {' '.join(path)}"), text[:200]
    return path, text


def _options(tokens) -> set[str]:
    out = set()
    for token in tokens:
        for m in re.finditer(r"(?<![\w-])(--?[A-Za-z][A-Za-z0-9-]*)", token):
            out.add(m.group(1))
    return out


def test_every_pstbench_command_in_the_docs_exists_with_its_options(capsys):
    problems, seen = [], 0
    for page, shown, argv in pstbench_commands():
        seen += 1
        try:
            path, text = _command_path(argv, capsys)
        except AssertionError as exc:
            problems.append(f"{page}: {shown!r}: {exc}")
            continue
        for option in sorted(_options(argv)):
            if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text):
                problems.append(f"{page}: {shown!r}: `pstbench {' '.join(path)} --help` has no option {option}")
    assert seen > 60
    assert not problems, "\n".join(problems)


def test_cli_option_tables_match_the_commands(capsys):
    """Each `## \\`pstbench X\\` options` table of docs/cli.md lists only options `pstbench X --help` has."""
    text = (ROOT / "docs" / "cli.md").read_text()
    sections = re.split(r"^## ", text, flags=re.M)
    problems, tables = [], 0
    for section in sections:
        m = re.match(r"`pstbench ([a-z ]+)` options", section)
        if not m:
            continue
        tables += 1
        help_text = _help(tuple(m.group(1).split()), capsys)[1]
        for row in re.findall(r"^\| `([^`]+)`", section, flags=re.M):
            for option in _options([row]):
                if option not in help_text.split() and not re.search(
                    rf"(?<![\w-]){re.escape(option)}(?![\w-])", help_text
                ):
                    problems.append(f"docs/cli.md: `pstbench {m.group(1)}` table lists {option}, not in its --help")
    assert tables >= 4
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------------------------
# 3. pytest options and ini keys against the plugin


@pytest.fixture(scope="module")
def pytest_help(tmp_path_factory) -> str:
    cwd = tmp_path_factory.mktemp("pytest-help")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--help"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_every_pstbench_pytest_option_in_the_docs_exists(pytest_help):
    registered = set(re.findall(r"(--pstbench-[a-z0-9-]+)", pytest_help))
    assert "--pstbench-track" in registered
    problems = []
    for page in PAGES:
        for option in sorted(set(re.findall(r"(--pstbench-[a-z0-9-]*[a-z0-9])", page.read_text()))):
            if option not in registered:
                problems.append(f"{_page_id(page)}: {option} is not an option of the plugin")
    assert not problems, "\n".join(problems)
    documented = set(re.findall(r"(--pstbench-[a-z0-9-]*[a-z0-9])", (ROOT / "docs" / "pytest.md").read_text()))
    assert registered <= documented, f"options missing from docs/pytest.md: {sorted(registered - documented)}"


def test_every_ini_key_the_docs_name_exists(pytest_help):
    ini_keys = set(re.findall(r"^\s+(pstbench_[a-z_]+) \(", pytest_help, flags=re.M))  # `  key (type):`
    fixtures = {
        "pstbench_protocol",
        "pstbench_track",
        "pstbench_pair",
        "pstbench_compare",
        "pstbench_score",
        "pstbench_judge",
    }
    assert "pstbench_track" in ini_keys
    problems = []
    for page in PAGES:
        for line in _prose(page).splitlines():
            if re.search(r"\bini\b", line):
                for key in re.findall(r"`(pstbench_[a-z_]+)`", line):
                    if key not in ini_keys | fixtures:
                        problems.append(f"{_page_id(page)}: ini key {key} is not one the plugin registers")
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------------------------
# 4. nothing of the old README was lost


def test_every_option_and_command_of_the_old_readme_is_still_documented():
    corpus = "\n".join(p.read_text() for p in PAGES)

    def words(text):  # brackets do not count: `[--net alex vgg]` may become `[--net alex vgg squeeze]`
        return [w for w in (w.strip("[]()") for w in text.split()) if w]

    shown = [
        words(s)
        for p in PAGES
        for s in (*_code_spans(p), *(line.strip() for line, f in _outside_fences(p.read_text()) if f))
    ]
    problems = []
    for entry in (ROOT / "tests" / "project" / "docs_inventory.txt").read_text().splitlines():
        if entry.startswith("#") or not entry.strip():
            continue
        kind, text = entry.split(" ", 1)
        if kind == "option":
            if not re.search(rf"(?<![\w-]){re.escape(text)}(?![\w-])", corpus):
                problems.append(f"option {text} is no longer documented")
            continue
        wanted = words(text)  # a command may gain options, not lose any: its words, in order, in one shown command

        def contains(candidate, wanted=wanted):
            it = iter(candidate)
            return all(w in it for w in wanted)

        if not any(contains(c) for c in shown):
            problems.append(f"command no longer shown: {text}")
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------------------------
# 5. the front page's "Scoring your method" commands, end to end on the demo track


def _front_page_scoring_commands() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Scoring your method", 1)[1].split("\n## ", 1)[0]
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", section, flags=re.S):
        for line in block.splitlines():
            if line.strip():
                commands.append(shlex.split(line, comments=True))
    return commands


def test_front_page_scoring_commands_run_on_the_demo_track(pytester, monkeypatch, capsys):
    from pytest_pstbench.paired.tracks import resolve_track

    commands = _front_page_scoring_commands()
    assert [c[0] for c in commands] == ["pstbench", "pytest"]
    cli, plugin = commands
    outputs = cli[cli.index("--outputs") + 1]
    options = [part for word in plugin for part in word.split("=", 1)]  # the README gives path options with `=`
    assert options[options.index("--pstbench-outputs") + 1] == outputs
    name = cli[cli.index("--name") + 1]
    track = resolve_track(cli[cli.index("--track") + 1])  # the demo track, in the session's PSTBENCH_CACHE
    # "Write one PNG per pair, named <pair_id>.png, into a folder": the content images (PNG) as outputs.
    out_dir = pytester.path / outputs
    out_dir.mkdir(parents=True)
    for pair in track.pairs:
        assert Path(pair.content).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        shutil.copyfile(pair.content, out_dir / f"{pair.id}.png")
    monkeypatch.chdir(pytester.path)

    assert main(cli[1:]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("track: demo   protocol: pstbench") and out[0].endswith(f"n={len(track.pairs)}")
    assert any(line.startswith(name) for line in out)
    run_dir = pytester.path / "results" / track.id / name
    cli_files = {f: (run_dir / f).read_bytes() for f in ("metrics.csv", "summary.json")}
    shutil.rmtree(run_dir)

    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *plugin[1:])
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=len(track.pairs))
    for f, data in cli_files.items():  # one engine, two front doors
        assert (run_dir / f).read_bytes() == data, f


def test_front_page_selection_command_runs_on_vab_demo(tmp_path, monkeypatch, capsys):
    """The front page's selection-track example, as written, in a folder holding the repository's examples/."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Selection tracks", 1)[1].split("\n## ", 1)[0]
    (line,) = [l for b in re.findall(r"```bash\n(.*?)```", section, flags=re.S) for l in b.splitlines() if l.strip()]
    argv = shlex.split(line, comments=True)
    assert argv[:3] == ["pstbench", "vab", "score"]
    shutil.copytree(ROOT / "examples" / "judges", tmp_path / "examples" / "judges")
    monkeypatch.chdir(tmp_path)
    assert main(argv[1:]) == 0
    out = capsys.readouterr().out
    assert "run files: results/vab-demo/" in out
