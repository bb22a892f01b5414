"""Every command, option, pytest option, ini key and public API name, pinned (issue #51: the moves that give each
kind its own doors change where code lives, never what a user types). `surface.json` beside this file holds the
surface as it was; the test rebuilds it from the real parser, the plugin's `pytest_addoption` and the package's
public names, and any difference fails. A deliberate change rewrites the pin:
`python tests/project/test_public_surface.py --write` (then say so in the change)."""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path

PIN = Path(__file__).with_name("surface.json")


def _action(a: argparse.Action) -> dict:
    default = a.default if isinstance(a.default, (str, int, float, bool, type(None))) else repr(a.default)
    return {
        "options": list(a.option_strings) or [a.dest],
        "dest": a.dest,
        "action": type(a).__name__,
        "nargs": a.nargs if isinstance(a.nargs, (str, int, type(None))) else repr(a.nargs),
        "default": default if default is not argparse.SUPPRESS else "==SUPPRESS==",
        "required": bool(a.required),
        "choices": sorted(map(str, a.choices)) if a.choices is not None and not isinstance(a.choices, dict) else None,
        "metavar": a.metavar if isinstance(a.metavar, (str, type(None))) else list(a.metavar),
        "help": a.help,
    }


def _commands(parser: argparse.ArgumentParser, path: str) -> dict:
    out = {path or "pstbench": [_action(a) for a in parser._actions if not isinstance(a, argparse._SubParsersAction)]}
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                out.update(_commands(sub, f"{path} {name}".strip()))
    return out


class _Recorder:
    def __init__(self):
        self.options, self.ini = [], []

    def getgroup(self, *args, **kwargs):
        return self

    def addoption(self, *names, **kwargs):
        self.options.append({"names": list(names), **{k: repr(v) for k, v in sorted(kwargs.items())}})

    def addini(self, name, help, **kwargs):
        self.ini.append({"name": name, "help": help, **{k: repr(v) for k, v in sorted(kwargs.items())}})


def surface() -> dict:
    import pytest_pstbench
    import pytest_pstbench.plugin as plugin
    from pytest_pstbench import api
    from pytest_pstbench.cli import build_parser

    rec = _Recorder()
    plugin.pytest_addoption(rec)
    fixtures = sorted(
        n
        for n, v in vars(plugin).items()
        if hasattr(v, "_pytestfixturefunction") or type(v).__name__ == "FixtureFunctionDefinition"
    )
    return {
        "commands": _commands(build_parser(), ""),
        "pytest_options": rec.options,
        "pytest_ini": rec.ini,
        "pytest_fixtures": fixtures,
        "api": {
            name: str(inspect.signature(getattr(api, name))) if callable(getattr(api, name)) else None
            for name in sorted(pytest_pstbench.__all__)
            if name != "__version__"
        },
    }


def test_the_public_surface_is_unchanged():
    pinned = json.loads(PIN.read_text(encoding="utf-8"))
    now = json.loads(json.dumps(surface()))
    for key in pinned:
        if key == "commands":
            assert sorted(now[key]) == sorted(pinned[key]), "commands added or removed"
            for cmd in pinned[key]:
                assert now[key][cmd] == pinned[key][cmd], f"`{cmd}`'s options changed"
        else:
            assert now[key] == pinned[key], f"{key} changed"
    assert set(now) == set(pinned)


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    PIN.write_text(json.dumps(surface(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
