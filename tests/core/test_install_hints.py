"""Issue #45 item 6: a hint to install an optional extra names the source the installation came from
(pip's PEP 610 record, direct_url.json), and the package index only where it came from one: the
package is not on PyPI today, and `pip install 'pytest-pstbench[iqa]'` fails there."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_pstbench.core.install_hints import extra_install, install_command


@pytest.mark.parametrize(
    "direct_url, expected",
    [
        (None, "pip install 'pytest-pstbench[iqa]'"),  # from an index (no record): true once it is published
        (
            {"url": "file:///home/me/src/pytest-pstbench", "dir_info": {"editable": True}},
            "pip install -e '/home/me/src/pytest-pstbench[iqa]'",
        ),  # the README's install line
        (
            {"url": "file:///home/me/src/pytest-pstbench", "dir_info": {}},
            "pip install '/home/me/src/pytest-pstbench[iqa]'",
        ),
        (
            {"url": "file:///tmp/dist/pytest_pstbench-0.1.0-py3-none-any.whl", "archive_info": {"hash": "sha256=00"}},
            "pip install '/tmp/dist/pytest_pstbench-0.1.0-py3-none-any.whl[iqa]'",
        ),
        (
            {"url": "https://github.com/o/pytest-pstbench", "vcs_info": {"vcs": "git", "commit_id": "abc123"}},
            "pip install 'pytest-pstbench[iqa] @ git+https://github.com/o/pytest-pstbench@abc123'",
        ),
        (
            {"url": "https://example.org/pytest_pstbench-0.1.0.tar.gz", "archive_info": {}},
            "pip install 'pytest-pstbench[iqa] @ https://example.org/pytest_pstbench-0.1.0.tar.gz'",
        ),
        (
            {"url": "file:///home/me/it's/src", "dir_info": {"editable": True}},
            "pip install -e '/home/me/it'\"'\"'s/src[iqa]'",
        ),
        ({"url": "file:///home/me/my%20src", "dir_info": {"editable": True}}, "pip install -e '/home/me/my src[iqa]'"),
    ],
)
def test_the_command_names_where_the_installation_came_from(direct_url, expected):
    assert install_command("iqa", direct_url) == expected


def test_a_source_tree_that_is_not_installed_is_named_by_its_folder(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'pytest-pstbench'\n")
    assert (
        install_command("report", None, installed=False, source_root=tmp_path) == f"pip install -e '{tmp_path}[report]'"
    )
    assert install_command("report", None, installed=False, source_root=None) == "pip install 'pytest-pstbench[report]'"


def test_this_test_run_gets_its_own_source_tree():
    """The suite runs from a source tree (the README installs it editable): the hint adds the extra there."""
    source = Path(__import__("pytest_pstbench").__file__).resolve().parents[1]
    assert extra_install("iqa") == f"pip install -e '{source}[iqa]'"
