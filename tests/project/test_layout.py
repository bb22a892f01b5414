"""The package's layout: its import graph (read from the source with `ast`) follows the layering rules
(LAYERS below, module-level and function-level imports alike), has no cycle among module-level imports,
every cycle closed by a function-level import is listed below with its reason, core names no kind and
holds only what both kinds use (a core module one kind alone imports belongs in that kind), no module
outside the kind packages branches on a kind's name (the front doors, report and data dispatch through
the kind registry), no module uses another module's private (`_name`) name, no name is taken from a
module that only imports it (a re-export shim: one name, two import paths), and no function is longer than
MAX_FUNCTION_LINES or takes more than MAX_PARAMETERS parameters.

Edges: `import pytest_pstbench.x`, `from .x import y` (to `x.y` when that is a module, else to `x`),
and `__import__` / `importlib.import_module` with a literal name. An import is module-level when it
runs at import time (module body, class bodies, `try`/`if` blocks at top level; `if TYPE_CHECKING:`
blocks are skipped), function-level when it is inside a function. Run this file as a script to print
both graphs' cycles.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = "pytest_pstbench"
ROOT = Path(__file__).resolve().parents[2] / PACKAGE
MAX_FUNCTION_LINES = 80
MAX_PARAMETERS = 12

#: Function-level imports that close a cycle of the import graph: (importer, imported) -> why the
#: import is deferred rather than removed. A cycle that is not listed fails the test; a listed edge
#: that no longer closes a cycle fails it too, so the list only shrinks.
ALLOWED_FUNCTION_LEVEL_CYCLES: dict[tuple[str, str], str] = {}


#: The layers: package -> the packages of this one it may import (itself always). The root module
#: `pytest_pstbench` is imported by the front doors alone. Kinds (paired, selection) register into core through
#: entry points and never import each other; the frame below them is what both extend (it names no kind); the
#: front doors (cli, plugin, api, and the option table they share) sit on top.
KINDS = ("paired", "selection")
FRONT_DOORS = ("api", "cli", "plugin")
LAYERS: dict[str, set[str]] = {
    "core": set(),  # names no kind, no front door, no data or metrics
    "metrics": {"core"},  # pure: no downloads (data), no kind
    "data": {"core", "metrics"},  # fetching and verifying; no kind
    "board": {"core", "metrics", "data", "report", "options"},  # reaches a kind only through the registry
    "options": set(),  # standard library only: the plugin imports it at load
    "frame": {"core", "data", "options"},  # the kind-neutral base of the front doors, which the kinds extend
    "paired": {"core", "metrics", "data", "frame", "options"},
    "selection": {"core", "metrics", "data", "frame", "options"},
    "report": {"core", "metrics", "data", *KINDS},
    "api": {"core", "metrics", "data", "report", *KINDS},
    "cli": {"core", "metrics", "data", "report", "board", "options", "frame", "api", *KINDS},
    "plugin": {"core", "metrics", "data", "report", "options", "frame", "api", *KINDS},
}


# ---- the graph ---------------------------------------------------------------------------------
def module_files(root: Path = ROOT) -> dict[str, Path]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _targets(module: str, is_package: bool, node, modules) -> list[str]:
    """Modules of this package that `node` (an import statement or an __import__ call) names."""
    found: list[str] = []
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        names = []
        for a in node.names:
            sub = f"{prefix}.{a.name}"
            names.append(sub if sub in modules else prefix)
    else:  # a call with a literal module name
        names = [node.args[0].value]
    for name in names:
        while name and name not in modules:  # `import pytest_pstbench.x.y as z`, a name inside a module
            name = name.rpartition(".")[0]
        if name.startswith(PACKAGE) and name != module and name not in found:
            found.append(name)
    return found


def _dynamic_import(node) -> bool:
    if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Constant):
        return False
    f = node.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
    return name in ("__import__", "import_module") and isinstance(node.args[0].value, str)


def import_graph(root: Path = ROOT, type_checking: bool = False) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module-level edges, function-level edges): module -> modules of this package it imports. With
    `type_checking`, the imports of `if TYPE_CHECKING:` blocks count as function-level ones."""
    modules = module_files(root)
    top: dict[str, set[str]] = defaultdict(set)
    deferred: dict[str, set[str]] = defaultdict(set)
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))

        def visit(node, in_function: bool) -> None:
            if isinstance(node, ast.If) and _is_type_checking(node):
                for child in node.body if type_checking else ():
                    visit(child, True)
                for child in node.orelse:
                    visit(child, in_function)
                return
            if isinstance(node, (ast.Import, ast.ImportFrom)) or _dynamic_import(node):
                (deferred if in_function else top)[module].update(_targets(module, is_package, node, modules))
            inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            for child in ast.iter_child_nodes(node):
                visit(child, inner)

        visit(tree, False)
    return dict(top), dict(deferred)


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Components of more than one module (Tarjan), each sorted; sorted by their first module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    nodes = sorted(set(edges) | {t for ts in edges.values() for t in ts})

    def connect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in nodes:
        if v not in index:
            connect(v)
    return sorted(out)


def combined(top, deferred) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for graph in (top, deferred):
        for a, bs in graph.items():
            edges[a] |= bs
    return dict(edges)


def cycle_closing_edges(top, deferred) -> set[tuple[str, str]]:
    """Function-level edges inside a cycle of the combined graph (module-level ones fail on their own)."""
    out = set()
    for comp in strongly_connected(combined(top, deferred)):
        members = set(comp)
        for a in comp:
            for b in deferred.get(a, ()):
                if b in members and b not in top.get(a, ()):
                    out.add((a, b))
    return out


def short(module: str) -> str:
    return module.removeprefix(PACKAGE + ".")


# ---- the checks --------------------------------------------------------------------------------
def test_the_graph_is_read():
    top, deferred = import_graph()
    assert (
        "pytest_pstbench.report.build" in top["pytest_pstbench.cli.report"]
        or "pytest_pstbench.report.build" in deferred["pytest_pstbench.cli.report"]
    )
    assert "pytest_pstbench.data.manifest" in top["pytest_pstbench.data.fetch"]
    assert "pytest_pstbench.cli.discover" in deferred["pytest_pstbench.cli"]  # a function-level import


def test_no_cycle_among_module_level_imports():
    top, _ = import_graph()
    cycles = [" <-> ".join(map(short, c)) for c in strongly_connected(top)]
    assert not cycles, "module-level import cycles: " + "; ".join(cycles)


def test_no_cycle_closed_by_a_type_checking_import():
    """An import made for type annotations only still ties two modules together: the one it names may not
    import this one back (paired.sensitivity <-> sensitivity_analysis was such a circle)."""
    top, deferred = import_graph(type_checking=True)
    cycles = [
        " <-> ".join(map(short, c))
        for c in strongly_connected(combined(top, deferred))
        if not all((a, b) in ALLOWED_FUNCTION_LEVEL_CYCLES for a in c for b in deferred.get(a, ()) if b in c)
    ]
    assert not cycles, "import cycles (TYPE_CHECKING imports counted): " + "; ".join(cycles)


def test_the_cycle_check_counts_type_checking_imports(tmp_path):
    p = PACKAGE
    files = _plant(
        tmp_path,
        {
            "core/__init__.py": "",
            "core/a.py": f"from {p}.core.b import B\n",
            "core/b.py": f"from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from {p}.core.a import A\n"
            "class B: ...\n",
        },
    )
    top, deferred = import_graph(files[p].parent, type_checking=True)
    assert strongly_connected(combined(top, deferred)) == [[f"{p}.core.a", f"{p}.core.b"]]
    assert not strongly_connected(combined(*import_graph(files[p].parent)))


def test_function_level_cycles_are_listed_with_a_reason():
    top, deferred = import_graph()
    closing = cycle_closing_edges(top, deferred)
    unlisted = sorted(closing - set(ALLOWED_FUNCTION_LEVEL_CYCLES))
    stale = sorted(set(ALLOWED_FUNCTION_LEVEL_CYCLES) - closing)
    assert not unlisted, "function-level imports closing a cycle, not in ALLOWED_FUNCTION_LEVEL_CYCLES: " + ", ".join(
        f"{short(a)} -> {short(b)}" for a, b in unlisted
    )
    assert not stale, (
        "listed in ALLOWED_FUNCTION_LEVEL_CYCLES but no longer closing a cycle (remove them): "
        + ", ".join(f"{short(a)} -> {short(b)}" for a, b in stale)
    )
    assert all(reason.strip() for reason in ALLOWED_FUNCTION_LEVEL_CYCLES.values())


def layer(module: str) -> str:
    """The package (layer) of a module: `pytest_pstbench.paired.compare` -> `paired`; the root -> ''."""
    return short(module).split(".")[0] if module != PACKAGE else ""


def layering_violations(top, deferred) -> list[str]:
    out = []
    for graph, where in ((top, "module-level"), (deferred, "function-level")):
        for a, targets in graph.items():
            la = layer(a)
            for b in targets:
                lb = layer(b)
                if lb == la or la not in LAYERS:
                    continue
                if lb == "":  # the package root (its `__version__`, the API's names): the front doors only
                    if la not in FRONT_DOORS:
                        out.append(f"{short(a)} -> {PACKAGE} ({where}: only {', '.join(FRONT_DOORS)} import the root)")
                    continue
                if lb not in LAYERS[la]:
                    out.append(
                        f"{short(a)} -> {short(b)} ({where}: {la} may import {', '.join(sorted(LAYERS[la])) or 'nothing of the package'})"
                    )
    return sorted(out)


def test_every_package_has_a_layer():
    assert {layer(m) for m in module_files()} - {""} == set(LAYERS)


def test_imports_follow_the_layers():
    top, deferred = import_graph()
    bad = layering_violations(top, deferred)
    assert not bad, "imports breaking the layering rules:\n  " + "\n  ".join(bad)


def front_door_kind_imports(top, deferred) -> list[str]:
    """`front door -> kind module` for each import (module- or function-level) of a kind's module by a front door
    (cli, plugin, api) or the frame: they reach a kind through the registry (core/kinds.py), each kind's doors live
    in its package."""
    out = set()
    for graph in (top, deferred):
        for a, targets in graph.items():
            if layer(a) in (*FRONT_DOORS, "frame"):
                out.update(f"{short(a)} -> {short(b)}" for b in targets if layer(b) in KINDS)
    return sorted(out)


#: What the front doors still import of a kind (issue #51: 105 import lines in the front doors named a kind's
#: modules): the public API's paired facade (`score`, `load_pair`, `load_image`, `vab_study`) and discovery's listings.
#: A new one fails the test, and so does a listed one that is gone (the list only shrinks).
FRONT_DOOR_KIND_IMPORTS_LEFT: set[str] = {
    "api -> paired.engine",
    "api -> paired.imageio",
    "api -> paired.planner",
    "api -> paired.request",
    "api -> paired.tracks",
    "api -> selection.study",
    "cli.discover -> paired.scorecache",
    "cli.discover -> paired.variants",
    "cli.discover -> selection.ask.response_cache",
}


def test_front_doors_reach_the_kinds_through_the_registry():
    top, deferred = import_graph()
    found = set(front_door_kind_imports(top, deferred))
    bad, stale = sorted(found - FRONT_DOOR_KIND_IMPORTS_LEFT), sorted(FRONT_DOOR_KIND_IMPORTS_LEFT - found)
    assert not bad, (
        "front doors importing a kind's module (put the command or pytest face in the kind's package, named by its "
        "KindSpec, or reach it through core/kinds.py):\n  " + "\n  ".join(bad)
    )
    assert not stale, "gone: remove from FRONT_DOOR_KIND_IMPORTS_LEFT:\n  " + "\n  ".join(stale)


def test_the_front_door_check_catches_a_planted_import(tmp_path):
    """The check itself, on a planted package: a front door's function-level import of a kind's module, a plugin
    module's module-level one, and the frame's are reported; a kind importing the frame, a front door importing core
    or the registry, are not."""
    p = PACKAGE
    files = _plant(
        tmp_path,
        {
            "core/__init__.py": "",
            "core/kinds.py": "",
            "frame/__init__.py": "",
            "frame/run.py": f"from {p}.selection import pytest_run\n",
            "paired/__init__.py": "",
            "paired/commands.py": f"from {p}.frame import run\n",
            "selection/__init__.py": "",
            "selection/pytest_run.py": f"from {p}.frame.run import x\n",
            "cli/__init__.py": f"def f():\n    from {p}.paired.commands import add\n    from {p}.core import kinds\n",
            "plugin/__init__.py": f"import {p}.selection.pytest_run\nfrom {p}.core.kinds import spec\n",
        },
    )
    assert front_door_kind_imports(*import_graph(files[p].parent)) == [
        "cli -> paired.commands",
        "frame.run -> selection.pytest_run",
        "plugin -> selection.pytest_run",
    ]


def test_the_layering_check_catches_a_forbidden_import():
    """The check itself: an edge core -> a kind, a kind -> the other kind, metrics -> data, a kind -> a front
    door, each at function level, are reported; allowed edges are not."""
    p = PACKAGE
    deferred = {
        f"{p}.core.x": {f"{p}.paired.y"},
        f"{p}.paired.y": {f"{p}.selection.z", f"{p}.plugin", f"{p}.core.x"},
        f"{p}.metrics.m": {f"{p}.data.d"},
        f"{p}.data.d": {f"{p}.core.x"},
    }
    bad = layering_violations({}, deferred)
    assert [b.split(" (")[0] for b in bad] == [
        "core.x -> paired.y",
        "metrics.m -> data.d",
        "paired.y -> plugin",
        "paired.y -> selection.z",
    ]


def _string_constants(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


def test_core_names_no_kind():
    """core and the frame know kinds only through the registry: no string in their code names a kind or a kind's
    module (docstrings may explain)."""
    found = []
    for module, path in module_files().items():
        if layer(module) not in ("core", "frame"):
            continue
        for line, text in _string_constants(path):
            if any(text == k or f"{PACKAGE}.{k}" in text for k in KINDS):
                found.append(f"{path.relative_to(ROOT.parent)}:{line}: {text!r}")
    assert not found, "core names a kind: " + "; ".join(found)


# ---- core holds only what both kinds use; the front doors name no kind ----------------------------
def single_kind_core_modules(top, deferred) -> list[str]:
    """Core modules imported (module- or function-level) by modules of one kind package and by no other core
    module: a core module used by one kind alone belongs in that kind. A front door, report, data or metrics
    module that imports it too does not make it shared (they may serve that one kind: `pstbench cache prune`
    used the paired kind's score cache from cli/)."""
    importers: dict[str, set[str]] = defaultdict(set)
    for a, targets in combined(top, deferred).items():
        for b in targets:
            importers[b].add(a)
    out = []
    for module, users in sorted(importers.items()):
        if layer(module) != "core":
            continue
        layers = {layer(u) for u in users if u != module}
        if len(layers & set(KINDS)) == 1 and "core" not in layers:
            kind = (layers & set(KINDS)).pop()
            out.append(
                f"{short(module)} is used by the {kind} kind alone "
                f"({', '.join(sorted(short(u) for u in users if layer(u) == kind))})"
            )
    return out


def test_core_holds_only_what_both_kinds_use():
    top, deferred = import_graph()
    bad = single_kind_core_modules(top, deferred)
    assert not bad, "a core module used by one kind alone belongs in that kind:\n  " + "\n  ".join(bad)


def test_the_single_kind_check_catches_a_core_module_of_one_kind():
    """The check itself, on a synthetic graph: a core module only one kind imports (at function level too, and
    also imported by a front door or report) is reported; one that both kinds or another core module imports,
    or no kind, is not."""
    p = PACKAGE
    top = {
        f"{p}.paired.a": {f"{p}.core.only_paired", f"{p}.core.both", f"{p}.core.with_cli", f"{p}.core.with_core"},
        f"{p}.selection.b": {f"{p}.core.both"},
        f"{p}.cli.c": {f"{p}.core.with_cli", f"{p}.core.front_only"},
        f"{p}.core.other": {f"{p}.core.with_core"},
    }
    deferred = {f"{p}.selection.b": {f"{p}.core.lazy_selection"}, f"{p}.report.r": {f"{p}.core.only_paired"}}
    assert [b.split(" is")[0] for b in single_kind_core_modules(top, deferred)] == [
        "core.lazy_selection",
        "core.only_paired",
        "core.with_cli",
    ]


def _kind_name_operand(node, kinds) -> str | None:
    """The kind an operand of a comparison names: a string constant, or a tuple/list/set of them (`in`)."""
    if isinstance(node, ast.Constant) and node.value in kinds:
        return node.value
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return next((e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in kinds), None)
    return None


def kind_name_branches(sources: dict[str, str], kinds=KINDS) -> list[str]:
    """`module:line` of each comparison with a kind's name (`x == "selection"`, `kind in ("paired", ...)`) in
    a module outside the kind packages (the kinds and their registry declarations, paired/kind.py and
    selection/kind.py, live there): everywhere else a kind is reached through the registry (core/kinds.py)."""
    out = []
    for module, source in sorted(sources.items()):
        if layer(module) in kinds:
            continue
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Compare):
                named = [k for k in (_kind_name_operand(n, kinds) for n in (node.left, *node.comparators)) if k]
                if named:
                    out.append(
                        (
                            module,
                            node.lineno,
                            f"{short(module)}:{node.lineno}: compares with the kind name {named[0]!r}",
                        )
                    )
    return [line for _, _, line in sorted(out)]


def test_no_kind_name_branch_outside_the_kinds():
    sources = {m: p.read_text(encoding="utf-8") for m, p in module_files().items()}
    bad = kind_name_branches(sources)
    assert not bad, (
        "branches on a kind's name outside the kind packages (dispatch through the kind registry, "
        "core/kinds.py, instead):\n  " + "\n  ".join(bad)
    )


def test_the_kind_name_check_catches_a_branch():
    """The check itself, on synthetic sources: `==`/`!=` with a kind's name and `in` a tuple, list or set holding
    one are reported outside the kind packages; the same inside a kind package, a kind's name as a value, and a
    comparison with another string are not."""
    p = PACKAGE
    sources = {
        f"{p}.cli.x": 'if kind == "selection":\n    pass\nok = kind == "other"\nif "paired" != k:\n    pass\n',
        f"{p}.report.y": 'a = k in ("paired", "x")\nb = k not in {"selection"}\nc = [k] == ["paired"]\nd = {"kind": "paired"}\n',
        f"{p}.paired.z": 'if kind == "paired":\n    pass\n',
        f"{p}.data.w": 'kind = data.get("kind", "paired")\n',
    }
    assert [b.split(": compares")[0] for b in kind_name_branches(sources)] == [
        "cli.x:1",
        "cli.x:4",
        "report.y:1",
        "report.y:2",
        "report.y:3",
    ]


def test_the_registered_kinds_are_the_kind_packages():
    """Each kind package registers a KindSpec through the entry-point group, and each lazy reference of a
    spec names an object that exists."""
    from pytest_pstbench.core import kinds

    assert kinds.names() == sorted(KINDS)
    for name in KINDS:
        spec = kinds.spec(name)
        assert spec.load("validate_protocol") and spec.load("runs").name == name
        assert spec.load("pytest_run") is kinds.pytest_run_class(name)
    with pytest.raises(Exception, match="unknown kind nope; available: paired, selection"):
        kinds.spec("nope")


# ---- private names and re-export shims ---------------------------------------------------------
#: Modules that are declared public facades: a name listed in their `__all__` may be imported only to be
#: handed on (`pytest_pstbench.UserError` is `core.errors.UserError`).
PUBLIC_FACADES = (PACKAGE, f"{PACKAGE}.api")

#: None is left (issue #39); a new one fails the test.
PRIVATE_IMPORTS_LEFT: set[str] = set()
REEXPORTS_LEFT: set[str] = set()


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _from_prefix(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The module an `ImportFrom` names (relative imports resolved against `module`)."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


class _ModuleImports:
    """What one module imports of the package: `names` [(line, from module, name, local name, module-level)]
    for names that are not modules; `modules` local name -> the package module it is bound to; `dotted`
    `import pytest_pstbench.x.y` without `as` (reached as attributes of `pytest_pstbench`)."""

    def __init__(self, module: str, path: Path, modules: dict[str, Path]):
        self.module, self.path = module, path
        self.tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        is_package = path.name == "__init__.py"
        self.names: list[tuple[int, str, str, str, bool]] = []
        self.modules: dict[str, str] = {}
        self.dotted = False

        def visit(node, top: bool) -> None:
            if isinstance(node, ast.If) and _is_type_checking(node):
                for child in node.orelse:
                    visit(child, top)
                return
            if isinstance(node, ast.ImportFrom):
                prefix = _from_prefix(module, is_package, node)
                if prefix.startswith(PACKAGE):
                    for a in node.names:
                        local = a.asname or a.name
                        if f"{prefix}.{a.name}" in modules:
                            self.modules[local] = f"{prefix}.{a.name}"
                        elif prefix in modules and a.name != "*":
                            self.names.append((node.lineno, prefix, a.name, local, top))
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in modules:
                        if a.asname:
                            self.modules[a.asname] = a.name
                        else:
                            self.dotted = True
            inner = top and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef))
            for child in ast.iter_child_nodes(node):
                visit(child, inner)

        visit(self.tree, True)

    def attribute_uses(self, modules: dict[str, Path]):
        """(line, module, attribute) for each `m.attr` where `m` is a package module bound here (`import
        pytest_pstbench.x as m`, `from pytest_pstbench import x`, or the dotted `pytest_pstbench.x.attr`)."""
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.Attribute):
                continue
            target = None
            if isinstance(node.value, ast.Name):
                target = self.modules.get(node.value.id)
            elif self.dotted:
                parts, value = [], node.value
                while isinstance(value, ast.Attribute):
                    parts.append(value.attr)
                    value = value.value
                if isinstance(value, ast.Name) and value.id == PACKAGE:
                    name = ".".join([PACKAGE, *reversed(parts)])
                    target = name if name in modules else None
            if target is not None:
                yield node.lineno, target, node.attr

    def all_names(self) -> set[str]:
        for node in self.tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                return {
                    e.value for e in ast.walk(node.value) if isinstance(e, ast.Constant) and isinstance(e.value, str)
                }
        return set()


def module_imports(files: dict[str, Path]) -> dict[str, _ModuleImports]:
    return {module: _ModuleImports(module, path, files) for module, path in files.items()}


def private_name_imports(files: dict[str, Path]) -> list[str]:
    """Each use of another module's private (`_name`) name: `from m import _x` (at any level), `m._x` of a
    module `m` bound by an import, `pytest_pstbench.m._x`."""
    out = []
    for module, imports in module_imports(files).items():
        where = f"{short(module)}:"
        for line, source, name, _local, _top in imports.names:
            if _is_private(name) and source != module:
                out.append(f"{where}{line}: from {short(source)} import {name}")
        for line, source, attr in imports.attribute_uses(files):
            if _is_private(attr) and source != module:
                out.append(f"{where}{line}: {short(source)}.{attr}")
    return sorted(out)


def other_importers(root: Path = ROOT) -> dict[str, Path]:
    """The repository's Python files outside the package that import it (tests, benchmarks, tools, examples)."""
    out = {}
    for folder in ("tests", "benchmarks", "tools", "examples"):
        for path in sorted((root.parent / folder).rglob("*.py")):
            out[".".join(path.relative_to(root.parent).with_suffix("").parts)] = path
    return out


def reexport_shims(files: dict[str, Path], others: dict[str, Path] | None = None) -> list[str]:
    """Names a module imports at module level from the package (whether it uses them or not) that another
    module (of the package, or one of `others`: tests, tools) imports from it: a second import path for one
    name. The public facades may hand on what their `__all__` declares."""
    imports = module_imports(files)
    handed_on: dict[str, dict[str, str]] = {}  # module -> name it does not use -> where it comes from
    for module, imp in imports.items():
        declared = imp.all_names() if module in PUBLIC_FACADES else set()
        for _line, source, name, local, top in imp.names:
            if top and local not in declared:
                handed_on.setdefault(module, {})[local] = f"{short(source)}.{name}"
    out = []
    importers = {**imports, **{name: _ModuleImports(name, path, files) for name, path in (others or {}).items()}}
    for module, imp in importers.items():
        taken = [(line, source, name) for line, source, name, _local, _top in imp.names]
        taken += list(imp.attribute_uses(files))
        for line, source, name in taken:
            if name in handed_on.get(source, {}):
                out.append(
                    f"{short(source)} re-exports {handed_on[source][name]} as {name} "
                    f"(taken from there by {short(module)}:{line})"
                )
    return sorted(set(out))


def _without_lines(found: list[str]) -> set[str]:
    import re

    return {re.sub(r":\d+", "", f) for f in found}


def test_no_import_of_another_modules_private_name():
    found = _without_lines(private_name_imports(module_files()))
    bad, stale = sorted(found - PRIVATE_IMPORTS_LEFT), sorted(PRIVATE_IMPORTS_LEFT - found)
    assert not bad, (
        "private names used outside their module (make the name public where it is shared, "
        "or move it where it belongs):\n  " + "\n  ".join(bad)
    )
    assert not stale, "fixed: remove from PRIVATE_IMPORTS_LEFT:\n  " + "\n  ".join(stale)


def test_no_reexport_shim():
    found = _without_lines(reexport_shims(module_files(), other_importers()))
    bad, stale = sorted(found - REEXPORTS_LEFT), sorted(REEXPORTS_LEFT - found)
    assert not bad, (
        "names taken from a module that only imports them (import each from where it is "
        "defined):\n  " + "\n  ".join(bad)
    )
    assert not stale, "fixed: remove from REEXPORTS_LEFT:\n  " + "\n  ".join(stale)


def _plant(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    root = tmp_path / PACKAGE
    for rel, text in {"__init__.py": "", **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return module_files(root)


def test_the_private_name_check_catches_a_planted_import(tmp_path):
    """The check itself: `from m import _x` at module and function level, a relative one, `m._x` through
    `import ... as m`, `from package import m` and the dotted name are reported; a module's own private
    names, dunder names and public names are not."""
    p = PACKAGE
    files = _plant(
        tmp_path,
        {
            "core/__init__.py": "",
            "core/a.py": "_secret = 1\npublic = 2\n_own = _secret\n",
            "core/b.py": f"from {p}.core.a import _secret, public\n",
            "core/c.py": "def f():\n    from .a import _secret\n    return _secret\n",
            "core/d.py": f"import {p}.core.a as m\nfrom {p}.core import a\nimport {p}.core.a\n"
            f"x = m._secret + a._secret + {p}.core.a._secret + a.public + a.__name__.__len__()\n",
        },
    )
    bad = private_name_imports(files)
    assert [b.split(":")[0] + ":" + b.split(": ", 1)[1] for b in bad] == [
        "core.b:from core.a import _secret",
        "core.c:from core.a import _secret",
        "core.d:core.a._secret",
        "core.d:core.a._secret",
        "core.d:core.a._secret",
    ]


def test_the_reexport_check_catches_a_planted_shim(tmp_path):
    """The check itself: a name imported at module level, taken from the importing module by another
    (through `from` or an attribute), is reported, used where it is imported or not; a name imported inside a
    function, and the names of the public facade's `__all__`, are not."""
    p = PACKAGE
    files = _plant(
        tmp_path,
        {
            "__init__.py": f"from {p}.core.a import Thing\n__all__ = ['Thing']\n",
            "core/__init__.py": "",
            "core/a.py": "class Thing: ...\ndef helper(): ...\n",
            "core/shim.py": f"from {p}.core.a import Thing, helper\n",
            "core/user.py": f"from {p}.core.a import helper\nx = helper()\n",
            "core/lazy.py": f"def f():\n    from {p}.core.a import helper\n",
            "core/via_user.py": f"from {p}.core.user import helper\n",
            "core/via_lazy.py": f"from {p}.core.lazy import f\n",
            "core/reader.py": f"from {p}.core.shim import Thing\nfrom {p}.core import shim\ny = shim.helper\n"
            f"from {p} import Thing as T\n",
        },
    )
    assert reexport_shims(files) == [
        "core.shim re-exports core.a.Thing as Thing (taken from there by core.reader:1)",
        "core.shim re-exports core.a.helper as helper (taken from there by core.reader:3)",
        "core.user re-exports core.a.helper as helper (taken from there by core.via_user:1)",
    ]


#: Functions over a cap when the caps replaced the 400-line module cap (issue #51): each is split by job, then
#: leaves this list; the list only shrinks (a listed function within both caps fails the test too).
OVER_CAP: frozenset[str] = frozenset()


def function_sizes(root: Path = ROOT):
    """(module path relative to the package, qualified function name, lines, parameters) of every function and
    method; `self`/`cls` do not count as parameters, `*args` and `**kwargs` count one each."""
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        rel = path.relative_to(root).as_posix()

        def walk(node, prefix):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    a = child.args
                    params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]
                    if params and params[0].arg in ("self", "cls") and isinstance(node, ast.ClassDef):
                        params = params[1:]
                    yield rel, prefix + child.name, child.end_lineno - child.lineno + 1, len(params)
                    yield from walk(child, prefix + child.name + ".")
                elif isinstance(child, ast.ClassDef):
                    yield from walk(child, prefix + child.name + ".")
                else:
                    yield from walk(child, prefix)

        yield from walk(tree, "")


def over_cap(root: Path = ROOT) -> dict[str, str]:
    return {
        f"{rel}:{name.rpartition('.')[2]}": f"{lines} lines, {params} parameters"
        for rel, name, lines, params in function_sizes(root)
        if lines > MAX_FUNCTION_LINES or params > MAX_PARAMETERS
    }


def test_function_size():
    """No function longer than MAX_FUNCTION_LINES (as `ruff format` lays it out) or taking more than MAX_PARAMETERS
    parameters (rule 13 of docs/ARCHITECTURE: size limits are on functions, never on modules); the ones that were
    over when the caps came in are listed in OVER_CAP and may only leave it."""
    found = over_cap()
    new = {k: v for k, v in found.items() if k not in OVER_CAP}
    assert not new, "functions over the caps (split them by job): " + "; ".join(f"{k} ({v})" for k, v in new.items())
    stale = sorted(OVER_CAP - set(found))
    assert not stale, "within the caps now, remove from OVER_CAP: " + ", ".join(stale)


def test_the_function_size_check_catches_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    args = ", ".join(f"a{i}" for i in range(MAX_PARAMETERS + 1))
    (tmp_path / "m.py").write_text(
        f"def long():\n{body}\n\n\ndef short():\n    pass\n\n\nclass C:\n    def wide(self, {args}):\n        pass\n"
    )
    assert over_cap(tmp_path) == {
        "m.py:long": f"{MAX_FUNCTION_LINES + 1} lines, 0 parameters",
        "m.py:wide": f"2 lines, {MAX_PARAMETERS + 1} parameters",
    }


if __name__ == "__main__":  # python tests/project/test_layout.py: print the cycles
    top, deferred = import_graph()
    print("module-level cycles:", [list(map(short, c)) for c in strongly_connected(top)] or "none")
    for comp in strongly_connected(combined(top, deferred)):
        print("cycle with function-level imports:", " ".join(map(short, comp)))
    for a, b in sorted(cycle_closing_edges(top, deferred)):
        print(f"  function-level {short(a)} -> {short(b)}")


def test_every_package_is_in_the_wheel():
    """pyproject.toml lists the packages a wheel holds by name ([tool.setuptools] packages): a folder of the package
    that is missing there is missing from every installed copy (issue #51's moves added five; two were left out)."""
    tomllib = pytest.importorskip("tomllib")
    listed = set(
        tomllib.loads((ROOT.parent / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]
    )
    folders = {".".join(p.parent.relative_to(ROOT.parent).parts) for p in ROOT.rglob("__init__.py")}
    assert not folders - listed, "packages missing from pyproject.toml [tool.setuptools] packages: " + ", ".join(
        sorted(folders - listed)
    )
