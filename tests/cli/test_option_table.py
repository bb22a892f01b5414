"""One option table (pytest_pstbench/options.py) serves both front doors, help written once."""

from __future__ import annotations

import argparse

from pytest_pstbench.cli import build_parser
from pytest_pstbench.options import PLUGIN, SCORING


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def test_score_takes_every_scoring_option_with_the_tables_help():
    actions = {s: a for a in _subparser("score")._actions for s in a.option_strings}
    for o in SCORING:
        action = actions[f"--{o.name}"]
        assert action.help == o.help + o.cli_note, o.name
        assert isinstance(action, argparse._StoreTrueAction) == (o.kind == "flag"), o.name
        assert isinstance(action, argparse._AppendAction) == (o.kind == "list"), o.name
    assert (
        actions["--track"].required
        and actions["--results"].default == "results"
        and actions["--device"].default == "cpu"
    )


def test_the_plugin_takes_every_option_of_the_table(pytester):
    result = pytester.runpytest_inprocess("--help")
    text = " ".join(result.stdout.str().split())
    for o in PLUGIN:
        assert f"--pstbench-{o.name}" in text, o.name
        assert " ".join((o.help + o.pytest_note).split())[:60] in text, o.name
        if o.ini:
            assert f"pstbench_{o.name.replace('-', '_')} (" in text, o.name  # the ini key, with its type
