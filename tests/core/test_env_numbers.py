"""Numbers read from environment variables (timeouts, the Hub's limits): one reader (core.envvars.env_number)
and one rule. Found by the duplicate scan of issue #39 (three readers of the same shape); a 5000-digit
PSTBENCH_HUB_MAX_FILE_BYTES was a traceback (int() refuses more than 4300 digits) before."""

from __future__ import annotations

import pytest

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.lock import lock_timeout
from pytest_pstbench.core.hub.client import network_timeout
from pytest_pstbench.core.hub.limits import deadline_seconds, max_file_bytes, max_listing

#: reader, variable, default, what it expects (as the message says it), example, whether 0 is allowed, whole numbers only
READERS = [
    (lock_timeout, "PSTBENCH_LOCK_TIMEOUT", 120.0, "seconds >= 0", "120", True, False),
    (network_timeout, "PSTBENCH_NETWORK_TIMEOUT", 30.0, "seconds > 0", "30", False, False),
    (deadline_seconds, "PSTBENCH_HUB_DEADLINE", 120.0, "seconds > 0", "120", False, False),
    (max_file_bytes, "PSTBENCH_HUB_MAX_FILE_BYTES", 64 * 1024 * 1024, "bytes > 0", "67108864", False, True),
    (max_listing, "PSTBENCH_HUB_MAX_LISTING", 200_000, "entries > 0", "200000", False, True),
]


@pytest.mark.parametrize("reader,name,default,expects,example,zero_ok,whole", READERS, ids=[r[1] for r in READERS])
def test_one_rule_for_every_number_in_the_environment(
    monkeypatch, reader, name, default, expects, example, zero_ok, whole
):
    monkeypatch.delenv(name, raising=False)
    assert reader() == default
    monkeypatch.setenv(name, "")
    assert reader() == default
    monkeypatch.setenv(name, "7")
    assert reader() == 7 and isinstance(reader(), int if whole else float)
    good = ["2.5"] if not whole else []
    bad = (
        ["-1", "nan", "inf", "-inf", "1e400", "x", "9" * 5000, " 7", "+7"]
        + (["2.5", "1e3"] if whole else [])
        + ([] if zero_ok else ["0"])
    )
    for value in good:
        monkeypatch.setenv(name, value)
        assert reader() == float(value)
    for value in bad:
        monkeypatch.setenv(name, value)
        if not whole and value in (" 7", "+7"):  # float() reads these as 7: a number of seconds all the same
            assert reader() == 7.0
            continue
        with pytest.raises(UserError) as exc:
            reader()
        assert (
            str(exc.value)
            == f"{name}={value!r}: expected a number of {expects}; fix: set it to e.g. {example} or unset it"
        )
    if zero_ok:
        monkeypatch.setenv(name, "0")
        assert reader() == 0
