"""Progress of `pstbench data fetch` / `verify` at scale: one display and a summary, per-file lines only with -v.

Against the local Hub stand-in (tests/helpers/hub_server.py). Output that is not a terminal (capsys, CI logs)
gets a line every 5% (by bytes); a terminal gets one huggingface_hub tqdm bar fed with the bytes of
every file while it downloads.
"""

from __future__ import annotations

import hashlib
import io
import re

import pytest
from helpers.hub_server import FakeHub, make_pst50_files, point_at

from pytest_pstbench.cli import main

PST50 = "zrgong/PST50"
PST50_SHA = "6ed86e3" + hashlib.sha1(b"pst50").hexdigest()[:33]
PCT = re.compile(
    r"^pst50: (downloading|verifying|checking present files): +(\d+)% \((\d+)/(\d+) files, .* of .*, .*/s, ETA \d+:\d\d\)$"
)


@pytest.fixture(scope="module")
def hub():
    hub = FakeHub().start()
    hub.add_commit(PST50, PST50_SHA, make_pst50_files(size=(32, 40)), refs=["main"])
    yield hub
    hub.stop()


@pytest.fixture
def env(hub, tmp_path, monkeypatch):
    point_at(hub, tmp_path, monkeypatch)
    return tmp_path


def _per_file(lines: list[str]) -> list[str]:
    return [x for x in lines if re.match(r"^\[\d+/\d+\] ", x) or re.match(r"^  \S+\.png: ", x)]


def test_not_a_terminal_gets_a_line_every_few_percent_and_a_summary(env, capsys):
    assert main(["data", "fetch", "pst50"]) == 0
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert _per_file(lines) == []  # 150 files, no line per file
    pct = [PCT.match(x) for x in lines if PCT.match(x)]
    assert 10 <= len(pct) <= 21 and all(m.group(1) == "downloading" for m in pct)
    values = [int(m.group(2)) for m in pct]
    assert values == sorted(values) and values[-1] == 100
    assert "pst50: downloading done: 150 downloaded and verified (150 files, " in err
    assert len(lines) <= 26, err  # asking, checking, downloading N files, ~20 progress lines, summary, result
    assert out.strip().startswith("pst50: 150 files, 150 downloaded; revision " + PST50_SHA)

    assert main(["data", "verify", "pst50"]) == 0
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert _per_file(lines) == []
    pct = [PCT.match(x) for x in lines if PCT.match(x)]
    assert 10 <= len(pct) <= 21 and all(m.group(1) == "verifying" for m in pct)
    assert "pst50: verifying done: 150 of 150 verified (150 files, " in err
    assert "all 150 files verified" in out


def test_verbose_prints_one_line_per_file(env, capsys):
    assert main(["data", "fetch", "pst50", "-v"]) == 0
    err = capsys.readouterr().err
    ok = [x for x in err.splitlines() if re.match(r"^\[\d+/150\] \S+\.png \(\d+ B\) ok$", x)]
    assert len(ok) == 150
    assert main(["data", "verify", "pst50", "--verbose"]) == 0
    err = capsys.readouterr().err
    assert len([x for x in err.splitlines() if re.match(r"^  \S+\.png: ok$", x)]) == 150
    # problems are printed without -v: a damaged file is named when fetch re-checks what is there
    victim = env / "data" / "pst50" / "paired_gt" / "gt3.png"
    victim.write_bytes(victim.read_bytes()[:-1] + b"\0")
    assert main(["data", "fetch", "pst50"]) == 0
    err = capsys.readouterr().err
    assert "paired_gt/gt3.png: sha256" in err and "fetching it again" in err
    assert "pst50: checking present files done: 149 of 150 verified, 1 bad" in err


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_terminal_gets_one_bar_fed_by_huggingface_hubs_download_chunks(env, monkeypatch):
    import huggingface_hub.constants as hf_constants

    from pytest_pstbench.core.progress import Progress, Reporter
    from pytest_pstbench.data.fetch import fetch_dataset

    monkeypatch.setattr(hf_constants, "DOWNLOAD_CHUNK_SIZE", 64)  # several chunks per file
    streamed = []
    real = Progress._streamed
    monkeypatch.setattr(Progress, "_streamed", lambda self, n: (streamed.append(n), real(self, n))[1])
    term = _Terminal()
    result = fetch_dataset("pst50", progress=Reporter(term))
    assert result.downloaded == 150
    text = term.getvalue()
    assert "pst50: downloading:" in text and "files]" in text and "B/s" in text  # tqdm's bar: bytes, files, rate
    assert not any(PCT.match(x) for x in text.replace("\r", "\n").splitlines()) and _per_file(text.splitlines()) == []
    assert "pst50: downloading done: 150 downloaded and verified (150 files" in text
    assert len(streamed) > 150 and sum(streamed) == sum(e["size"] for e in result_files(env).values())


def result_files(env) -> dict:
    import json

    return json.loads((env / "data" / "pst50" / "pstbench-lock.json").read_text())["files"]
