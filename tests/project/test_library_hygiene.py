"""Library hygiene (issue #24): huggingface_hub only through its public client API, with timeouts per
request; the LPIPS weights download bounds its own request, not the process's sockets."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "pytest_pstbench"


def _code(path: Path) -> str:
    """The module without comments and docstrings' prose mentions (lines that are code)."""
    return "\n".join(line.split("#", 1)[0] for line in path.read_text().splitlines())


def test_no_private_huggingface_hub_module_and_no_global_socket_timeout():
    offenders = []
    for path in ROOT.rglob("*.py"):
        code = _code(path)
        if re.search(r"huggingface_hub\.utils\._|from huggingface_hub\.utils import _", code):
            offenders.append(f"{path.relative_to(ROOT)}: imports a private huggingface_hub module")
        if re.search(r"\bsetdefaulttimeout\s*\(", code):
            offenders.append(f"{path.relative_to(ROOT)}: calls socket.setdefaulttimeout")
    assert offenders == []


def test_hub_client_has_a_timeout_per_request_and_keeps_huggingface_hubs_hooks(monkeypatch):
    hf = pytest.importorskip("huggingface_hub")
    if not hasattr(hf, "set_client_factory"):
        pytest.skip("a requests-based huggingface_hub")
    from pytest_pstbench.core.hub import client as hub

    monkeypatch.setenv(hub.NETWORK_TIMEOUT_ENV, "7.5")
    hub.bounded_hub_client()
    try:
        client = hf.get_session()
        assert client.timeout.read == 7.5 and client.timeout.connect == 7.5
        request = client.build_request("GET", "http://127.0.0.1:9/x", timeout=None)  # huggingface_hub's "wait forever"
        assert request.extensions["timeout"]["read"] == 7.5
        request = client.build_request("GET", "http://127.0.0.1:9/x", timeout=2.0)  # an explicit timeout is kept
        assert request.extensions["timeout"]["read"] == 2.0
        hooks = [f.__name__ for f in client.event_hooks["request"]]
        assert hooks == ["hf_request_event_hook"]  # offline mode, request ids: huggingface_hub's own hook, kept
    finally:
        monkeypatch.setenv(hub.NETWORK_TIMEOUT_ENV, "30")
        hub.bounded_hub_client()


def test_hub_client_survives_a_second_copy_of_its_http_library(monkeypatch):
    """pytester's in-process runs restore sys.modules, so huggingface_hub and its HTTP library can be imported
    a second time in one process. The bounded client is then built from the library copy of the client it
    replaces: before, its Timeout came from whichever copy sys.modules held and huggingface_hub's client
    refused it (`Invalid timeout ... got <class 'httpx2.Timeout'>`) in every Hub call of later tests."""
    import sys

    hf = pytest.importorskip("huggingface_hub")
    if not hasattr(hf, "set_client_factory"):
        pytest.skip("a requests-based huggingface_hub")
    from pytest_pstbench.core.hub import client as hub

    monkeypatch.setenv(hub.NETWORK_TIMEOUT_ENV, "7.5")
    hub.bounded_hub_client()
    lib = next(
        c for c in type(hf.get_session()).__mro__ if not c.__module__.startswith("pytest_pstbench")
    ).__module__.split(".")[0]
    saved = {name: mod for name, mod in sys.modules.items() if name == lib or name.startswith(lib + ".")}
    try:
        for name in saved:  # a later import of the library gives a second copy, as after pytester's restore
            del sys.modules[name]
        __import__(lib)
        monkeypatch.setenv(hub.NETWORK_TIMEOUT_ENV, "6.5")  # a new timeout: the factory is built again
        hub.bounded_hub_client()
        assert hf.get_session().timeout.read == 6.5
    finally:
        sys.modules.update(saved)
        monkeypatch.setenv(hub.NETWORK_TIMEOUT_ENV, "30")
        hub.bounded_hub_client()
