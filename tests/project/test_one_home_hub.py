"""One home for each Hub job and for reading runs (issue #39), checked by reading the package's source with `ast`:

(a) only the Hub client (`core/hub/client.py`) imports or builds huggingface_hub's `HfApi`, and only it holds a
    retry loop (a loop that sleeps between attempts) in a module that talks to the Hub;
(b) only the client catches or classifies huggingface_hub's exception classes (imports from
    `huggingface_hub.errors` / `huggingface_hub.utils` of an error class, `huggingface_hub.errors` itself, or
    an error class named in a string): the one error map;
(c) only the listing module (`core/hub/listing.py`) lists a repository (`list_repo_tree`, `get_paths_info`,
    `list_repo_files`, `list_repo_refs`, `list_repo_commits`);
(d) run folders are read (`read_run_folder`) only inside the run store (`core/store/`) and by the kinds' run
    loaders, the functions the kind registry names as each kind's `RunKind.load` (the one validating reader,
    `core.store.reader.read_runs`, reads every folder through them);
(e) only the run store (`core/store/`) and the Hub client (`core/hub/`) read a run address's form
    (`is_hub_uri`): every other module asks the store (`core.store.backends`: `is_published`, `resolve_runs`,
    `pull`, `versions`);
(f) the Hub client (`core/hub/`) is the bounded client only: it imports no kind registry (`core.kinds`) and
    nothing of the run store (its Hub backend, pull, push, the pull cache and commits, lives in
    `core/store/published/`).

Each check is a function over {module: source}; the tests at the end plant a violation of each in a small
synthetic source and see it reported.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = "pytest_pstbench"
ROOT = Path(__file__).resolve().parents[2] / PACKAGE
CLIENT = f"{PACKAGE}.core.hub.client"
LISTING = f"{PACKAGE}.core.hub.listing"
STORE = f"{PACKAGE}.core.store"
HUB = f"{PACKAGE}.core.hub"
LISTING_CALLS = {"list_repo_tree", "get_paths_info", "list_repo_files", "list_repo_refs", "list_repo_commits"}
HF_ERRORS = {  # huggingface_hub's exception classes a module could branch on (huggingface_hub.errors)
    "HfHubHTTPError",
    "RepositoryNotFoundError",
    "GatedRepoError",
    "DisabledRepoError",
    "RevisionNotFoundError",
    "EntryNotFoundError",
    "RemoteEntryNotFoundError",
    "LocalEntryNotFoundError",
    "BadRequestError",
    "OfflineModeIsEnabled",
    "HFValidationError",
    "LocalTokenNotFoundError",
}


def package_sources() -> dict[str, str]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path.read_text(encoding="utf-8")
    return out


def _imports(tree) -> list[tuple[str, str | None]]:
    """(module, name) of every import: `import a.b` -> ("a.b", None); `from a import b` -> ("a", "b")."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((a.name, None) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            out.extend((node.module or "", a.name) for a in node.names)
    return out


def _names(node) -> set[str]:
    """Every plain name and attribute name used under `node`."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
    }


def _called(node) -> str | None:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def hfapi_and_retry_violations(sources: dict[str, str]) -> list[str]:
    """(a): `HfApi` imported or named, or a loop that sleeps in a module talking to the Hub, outside the client."""
    out = []
    for module, text in sources.items():
        if module == CLIENT:
            continue
        tree = ast.parse(text)
        imports = _imports(tree)
        if any(name == "HfApi" for _, name in imports) or "HfApi" in _names(tree):
            out.append(f"{module}: HfApi")
        talks_to_hub = any(
            m.split(".")[0] == "huggingface_hub" or m.startswith(f"{PACKAGE}.core.hub") for m, _ in imports
        )
        loops = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While, ast.AsyncFor))]
        if talks_to_hub and any(
            isinstance(c, ast.Call) and (_called(c) or "").endswith("sleep") for loop in loops for c in ast.walk(loop)
        ):
            out.append(f"{module}: a retry loop")
    return out


def error_map_violations(sources: dict[str, str]) -> list[str]:
    """(b): huggingface_hub's exception classes imported, named or spelled out in a string outside the client."""
    out = []
    for module, text in sources.items():
        if module == CLIENT:
            continue
        tree = ast.parse(text)
        found = set()
        for mod, name in _imports(tree):
            if mod.startswith("huggingface_hub.errors") or (mod == "huggingface_hub" and name == "errors"):
                found.add("huggingface_hub.errors")
            elif (
                mod.split(".")[0] == "huggingface_hub" and name and re.search(r"(Error|Exception)$|^OfflineMode", name)
            ):
                found.add(name)
        found |= _names(tree) & HF_ERRORS
        found |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in HF_ERRORS}
        out.extend(f"{module}: {name}" for name in sorted(found))
    return out


def listing_violations(sources: dict[str, str]) -> list[str]:
    """(c): a repository listed outside the listing module."""
    out = []
    for module, text in sources.items():
        if module == LISTING:
            continue
        used = _names(ast.parse(text)) & LISTING_CALLS
        out.extend(f"{module}: {name}" for name in sorted(used))
    return out


def run_reading_violations(sources: dict[str, str], loaders: set[tuple[str, str]]) -> list[str]:
    """(d): `read_run_folder` called outside core/store and the kinds' run loaders ((module, function) pairs)."""
    out = []
    for module, text in sources.items():
        if module == STORE or module.startswith(STORE + "."):
            continue
        tree = ast.parse(text)

        def visit(node, function: str | None) -> None:
            if isinstance(node, ast.Call) and _called(node) == "read_run_folder" and (module, function) not in loaders:
                out.append(f"{module}:{node.lineno}: read_run_folder in {function or 'the module body'}")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and function is None:
                function = node.name
            for child in ast.iter_child_nodes(node):
                visit(child, function)

        visit(tree, None)
    return out


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def address_form_violations(sources: dict[str, str]) -> list[str]:
    """(e): `is_hub_uri` imported or named outside the run store and the Hub client."""
    out = []
    for module, text in sources.items():
        if _inside(module, STORE) or _inside(module, HUB):
            continue
        tree = ast.parse(text)
        if "is_hub_uri" in _names(tree) | {name for _, name in _imports(tree)}:
            out.append(f"{module}: is_hub_uri")
    return out


def hub_client_violations(sources: dict[str, str]) -> list[str]:
    """(f): a module of the Hub client importing the kind registry or the run store."""
    out = []
    for module, text in sources.items():
        if not _inside(module, HUB):
            continue
        for mod, name in _imports(ast.parse(text)):
            full = f"{mod}.{name}" if name else mod
            for banned in (f"{PACKAGE}.core.kinds", STORE):
                if _inside(mod, banned) or _inside(full, banned):
                    out.append(f"{module}: imports {banned}")
    return sorted(set(out))


def kind_loaders() -> set[tuple[str, str]]:
    """(module, function) of each registered kind's run loader (`RunKind.load`)."""
    from pytest_pstbench.core import kinds

    return {(kinds.get(name).load.__module__, kinds.get(name).load.__qualname__) for name in kinds.names()}


# ---- the package --------------------------------------------------------------------------------------
def test_only_the_client_builds_hfapi_and_retries():
    assert hfapi_and_retry_violations(package_sources()) == []


def test_only_the_client_maps_huggingface_hubs_errors():
    assert error_map_violations(package_sources()) == []


def test_only_the_listing_module_lists_a_repository():
    assert listing_violations(package_sources()) == []


def test_run_folders_are_read_only_by_the_store_and_the_kinds_loaders():
    loaders = kind_loaders()
    assert len(loaders) == 2 and all(m.startswith(f"{PACKAGE}.") for m, _ in loaders)
    assert run_reading_violations(package_sources(), loaders) == []


def test_only_the_store_and_the_hub_client_read_a_run_addresss_form():
    assert address_form_violations(package_sources()) == []


def test_the_hub_client_names_no_kind_and_no_run_store():
    assert hub_client_violations(package_sources()) == []


# ---- the checks catch what they guard against ---------------------------------------------------------
def test_each_check_catches_a_planted_violation():
    p = PACKAGE
    planted = {
        f"{p}.data.hub2": (
            "import time\n"
            "from huggingface_hub import HfApi\n"
            "from huggingface_hub import errors as E\n"
            "def call(f):\n"
            "    for attempt in range(3):\n"
            "        try:\n"
            "            return f(HfApi())\n"
            "        except E.GatedRepoError:\n"
            "            time.sleep(1)\n"
            "def listing(api):\n"
            "    return api.list_repo_tree('o/n')\n"
        ),
        f"{p}.data.gated": "def gated(exc):\n    return type(exc).__name__ == 'GatedRepoError'\n",
        f"{p}.data.named": "from huggingface_hub.utils import RepositoryNotFoundError\n",
        f"{p}.cli.read": "from pytest_pstbench.core.store.folder import read_run_folder\n"
        "def show(d):\n    return read_run_folder(d, ('run.json',), 'run')\n",
        f"{p}.selection.client": "import time\nfor i in range(3):\n    time.sleep(1)\n",  # not a Hub module
        CLIENT: "from huggingface_hub import HfApi, errors as E\nimport time\nwhile True:\n    time.sleep(HfApi() and 1)\n"
        "E.RepositoryNotFoundError\n",
        LISTING: "def tree(api):\n    return api.list_repo_tree('o/n'), api.get_paths_info('o/n', [])\n",
        f"{STORE}.reader": "def read(d):\n    return read_run_folder(d, (), 'run')\n",
        f"{p}.paired.runs": "def load_run(d):\n    return read_run_folder(d, (), 'run')\n"
        "def other(d):\n    return read_run_folder(d, (), 'run')\n",
        f"{p}.cli.addr": "def f(a):\n    from pytest_pstbench.core.hub.uri import is_hub_uri\n    return is_hub_uri(a)\n",
        f"{STORE}.backends": "from pytest_pstbench.core.hub.uri import is_hub_uri\n",
        f"{HUB}.pull": "def names():\n    from pytest_pstbench.core.kinds import registered\n"
        "from pytest_pstbench.core import store\n",
    }
    assert hfapi_and_retry_violations(planted) == [f"{p}.data.hub2: HfApi", f"{p}.data.hub2: a retry loop"]
    assert error_map_violations(planted) == [
        f"{p}.data.hub2: GatedRepoError",
        f"{p}.data.hub2: huggingface_hub.errors",
        f"{p}.data.gated: GatedRepoError",
        f"{p}.data.named: RepositoryNotFoundError",
    ]
    assert listing_violations(planted) == [f"{p}.data.hub2: list_repo_tree"]
    assert address_form_violations(planted) == [f"{p}.cli.addr: is_hub_uri"]
    assert hub_client_violations(planted) == [f"{HUB}.pull: imports {p}.core.kinds", f"{HUB}.pull: imports {STORE}"]
    assert run_reading_violations(planted, {(f"{p}.paired.runs", "load_run")}) == [
        f"{p}.cli.read:3: read_run_folder in show",
        f"{p}.paired.runs:4: read_run_folder in other",
    ]
