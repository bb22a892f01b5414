"""Issue #32 items 22, 10 and 15: bad input that reached the kit as a traceback (or as numbers) is one
line naming what is wrong and the fix: a malformed HF_ENDPOINT, arrays too small for a metric, an output
PNG whose EXIF Orientation tag is malformed."""
from __future__ import annotations

import pytest

from pytest_pstbench.cli import main


# ---- item 22: HF_ENDPOINT -------------------------------------------------------------------------------
@pytest.mark.parametrize("endpoint, rule", [
    ("http://[::1", "Invalid IPv6 URL"),
    ("http://127.0.0.1:70000", "Port out of range"),
    ("http://127.0.0.1:port", "Port"),
    ("localhost:8080", "expected http(s)://HOST[:PORT]"),
])
def test_malformed_hf_endpoint_is_one_line(tmp_path, monkeypatch, capsys, endpoint, rule):
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("PSTBENCH_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert main(["data", "fetch", "pst50"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line or "Traceback" in line]
    assert len(err) == 1, err
    assert f"HF_ENDPOINT={endpoint!r}" in err[0] and rule in err[0] and "fix: set it to" in err[0]
    assert not (tmp_path / "data" / "pst50").exists()
