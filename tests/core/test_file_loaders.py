"""Issue #32 items 16 and 19: every YAML and JSON the kit reads goes through one bounded loader
(core/files/yamlfile.py, core/files/jsonfile.py): YAML aliases that multiply, deep nesting and huge integers are
one-line errors (a cache miss for a cache entry), never a multi-megabyte run.json or a RecursionError.
Found by the third audit (#32)."""

from __future__ import annotations

import ast
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from helpers.protocols import protocol_without_lpips
from helpers.tracks import make_outputs, make_track

from pytest_pstbench.cli import main
from pytest_pstbench.core.errors import UserError

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_pstbench"

# 6 lines of 9 aliases each: 249 bytes of YAML that expand to 9**6 strings once written out as JSON
LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, n in zip("abcde", "bcdef")
)
DEEP_YAML = "settings: " + "[" * 3000 + "]" * 3000 + "\n"


def _one_line_error(capsys, *words):
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


# ---- one loader each: nothing else in the package parses YAML or JSON --------------------------------

_YAML_LOADING = {
    "load",
    "safe_load",
    "full_load",
    "unsafe_load",
    "load_all",
    "safe_load_all",
    "full_load_all",
    "unsafe_load_all",
    "compose",
    "compose_all",
    "parse",
    "scan",
    "Loader",
    "SafeLoader",
    "FullLoader",
    "UnsafeLoader",
    "BaseLoader",
    "CLoader",
    "CSafeLoader",
    "CFullLoader",
    "CUnsafeLoader",
    "CBaseLoader",
}
_JSON_LOADING = {"load", "loads", "JSONDecoder", "decoder", "scanner"}
_CSV_LOADING = {"reader", "DictReader", "Sniffer"}
_LOADERS = {
    "yaml": ("core/files/yamlfile.py", _YAML_LOADING),
    "json": ("core/files/jsonfile.py", _JSON_LOADING),
    "csv": ("core/files/csvfile.py", _CSV_LOADING),
}


def direct_loading(tree: ast.AST, rel: str) -> list[str]:
    """`yaml.safe_load(...)`, `json.loads(...)`, `from json import loads`, ... in a module other than the loader."""
    found = []
    aliases = {}  # local name -> "yaml" / "json"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in _LOADERS:
                    aliases[a.asname or a.name] = a.name
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in _LOADERS:
            mod = node.module.split(".")[0]
            if rel != _LOADERS[mod][0] and (node.module != mod or any(a.name in _LOADERS[mod][1] for a in node.names)):
                found.append(f"{rel}:{node.lineno}: from {node.module} import ...")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            mod = aliases[node.value.id]
            if rel != _LOADERS[mod][0] and node.attr in _LOADERS[mod][1]:
                found.append(f"{rel}:{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_no_yaml_or_json_is_parsed_outside_the_one_loader():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        found += direct_loading(ast.parse(path.read_text(encoding="utf-8")), rel)
    assert found == [], (
        "parse YAML with core.files.yamlfile.read_yaml/parse_yaml, JSON with core.files.jsonfile.read_json/loads "
        "and CSV with core.files.csvfile.read_csv"
    )


def test_the_guard_sees_each_form_of_direct_loading():
    cases = [
        "import yaml\nyaml.safe_load('a')",
        "import json as j\nj.loads('1')",
        "from json import loads",
        "from yaml import CSafeLoader",
        "import json\njson.JSONDecoder().decode('1')",
        "import csv\ncsv.DictReader([])",
        "from csv import reader",
    ]
    for src in cases:
        assert direct_loading(ast.parse(src), "x.py"), src
    assert (
        direct_loading(
            ast.parse("import json\njson.dumps(1)\nimport yaml\nyaml.safe_dump(1)\nimport csv\ncsv.writer(None)"),
            "x.py",
        )
        == []
    )


# ---- YAML -----------------------------------------------------------------------------------------------


@pytest.fixture
def scored(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    manifest = make_track(tmp_path / "track")
    outputs = make_outputs(manifest, tmp_path / "method")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    return manifest, outputs, proto


def _score(manifest, outputs, proto, *extra):
    return main(["score", "--track", str(manifest), "--outputs", str(outputs), "--protocol", str(proto), *extra])


@pytest.mark.parametrize(
    "text, words",
    [
        (LAUGHS, ("method.yaml", "its aliases expand it by more than 10000 values", "fix:")),
        (DEEP_YAML, ("method.yaml", "nested deeper than 64 levels", "fix:")),
        ("seed: " + "7" * 5000 + "\n", ("method.yaml", "not a valid YAML method.yaml", "fix")),
        ("seed: 0x" + "f" * 100000 + "\n", ("method.yaml", "an integer of more than 64 digits (line 1)", "fix:")),
    ],
)
def test_method_yaml_aliases_depth_and_huge_numbers_are_one_line_errors(scored, tmp_path, capsys, text, words):
    manifest, outputs, proto = scored
    (outputs / "method.yaml").write_text(text)
    assert _score(manifest, outputs, proto) == 2
    _one_line_error(capsys, *words)
    assert not list(tmp_path.rglob("run.json"))


def test_track_revision_alias_is_refused(scored, tmp_path, capsys):
    manifest, outputs, proto = scored
    text = manifest.read_text()
    manifest.write_text(text + "revision:\n" + "".join("  " + line + "\n" for line in LAUGHS.splitlines()))
    assert _score(manifest, outputs, proto) == 2
    _one_line_error(capsys, "track.yaml", "its aliases expand it by more than 10000 values")
    assert not list(tmp_path.rglob("run.json"))


def test_protocol_alias_and_depth_are_refused(tmp_path):
    from pytest_pstbench.core.protocol import load_protocol

    base = protocol_without_lpips(tmp_path / "p.yaml").read_text()
    (tmp_path / "alias.yaml").write_text(
        base + "notes:\n" + "".join("  " + line + "\n" for line in LAUGHS.splitlines())
    )
    with pytest.raises(UserError, match=r"alias.yaml: not accepted as a YAML protocol: its aliases expand it by more"):
        load_protocol(tmp_path / "alias.yaml")
    (tmp_path / "deep.yaml").write_text(base + "notes: " + "{a: " * 200 + "1" + "}" * 200 + "\n")
    with pytest.raises(UserError, match="nested deeper than 64 levels"):
        load_protocol(tmp_path / "deep.yaml")


def test_a_recursive_alias_and_aliases_nesting_too_deep_are_refused(tmp_path):
    from pytest_pstbench.core.files.yamlfile import parse_yaml

    with pytest.raises(
        UserError, match=r"f.yaml: not accepted as a YAML file: the alias \*a \(line 1\) is inside the value"
    ):
        parse_yaml("a: &a [1, *a]\n", "f.yaml", "file")
    deep = "a: &a " + "[" * 40 + "1" + "]" * 40 + "\nb: " + "[" * 30 + "*a" + "]" * 30 + "\n"
    with pytest.raises(UserError, match="nested deeper than 64 levels once its aliases are expanded"):
        parse_yaml(deep, "f.yaml", "file")


def test_a_few_aliases_and_ordinary_files_read_as_before(tmp_path):
    import yaml

    from pytest_pstbench.core.files.yamlfile import read_yaml

    text = "a: &x {k: [1, 2]}\nb: [*x, *x, {c: 'd'}]\nwhen: 2024-01-02\nn: 1e3\n"
    (tmp_path / "f.yaml").write_text(text)
    assert read_yaml(tmp_path / "f.yaml", "file") == yaml.safe_load(text)
    for shipped in sorted((PACKAGE.parent / "protocols").rglob("*.yaml")):
        assert read_yaml(shipped, "file") == yaml.safe_load(shipped.read_text(encoding="utf-8")), shipped


# ---- JSON -----------------------------------------------------------------------------------------------


def test_json_loader_bounds():
    from pytest_pstbench.core.files.jsonfile import JSONLimitError, loads

    text = '{"a": [1, -2, 3.5, "[[[{{{", null, true, NaN], "b": {"c": "\\"]]"}}'
    assert repr(loads(text)) == repr(json.loads(text))
    assert loads(b"[1]") == [1]
    for bad, rule in [
        ("[" * 65 + "]" * 65, "nested deeper than 64 levels"),
        ("[" * 100000, "nested deeper"),
        ("1" * 65, "an integer of 65 digits"),
        ("[-" + "1" * 5000 + "]", "an integer of 5000 digits"),
    ]:
        with pytest.raises(JSONLimitError, match=rule):
            loads(bad)
    assert loads("[" * 64 + "]" * 64) is not None
    with pytest.raises(json.JSONDecodeError):
        loads("{not json")


def _nested(depth: int) -> str:
    return '{"key": ' * depth + "1" + "}" * depth


def test_deep_cache_entries_are_misses_for_score_and_prune(scored, tmp_path, capsys):
    manifest, outputs, proto = scored
    assert _score(manifest, outputs, proto) == 0
    first = (tmp_path / "results" / "small" / "method" / "metrics.csv").read_bytes()
    entries = sorted((Path(os.environ["PSTBENCH_CACHE"]) / "scores").rglob("*.json"))
    assert entries
    for e in entries:
        e.write_text(_nested(100000))
    capsys.readouterr()
    assert _score(manifest, outputs, proto) == 0
    assert (tmp_path / "results" / "small" / "method" / "metrics.csv").read_bytes() == first
    for e in entries:
        e.write_text(_nested(100000))
    capsys.readouterr()
    assert main(["cache", "prune", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"{len(entries)}: unreadable or damaged" in out


def test_deep_run_files_are_one_line_errors_for_compare(scored, tmp_path, capsys):
    manifest, outputs, proto = scored
    assert _score(manifest, outputs, proto) == 0
    run = tmp_path / "results" / "small" / "method"
    (run / "summary.json").write_text(_nested(100000))
    capsys.readouterr()
    assert main(["compare", str(run), str(run)]) == 2
    _one_line_error(capsys, str(run), "nested deeper than 64 levels")


def test_a_deep_reply_from_the_model_endpoint_is_an_api_error(tmp_path):
    from pytest_pstbench.selection.ask import chat_api

    body = ('{"choices": [{"message": {"content": "BEST: A", "x": ' + "[" * 100000 + "]" * 100000 + "}}]}").encode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(chat_api.ApiError, match="malformed response body"):
            chat_api.post(f"http://127.0.0.1:{server.server_address[1]}/v1/chat/completions", b"{}", {}, 10.0)
    finally:
        server.shutdown()
        server.server_close()


def test_a_huge_integer_in_an_answers_file_is_one_line_error(tmp_path, capsys):
    from pytest_pstbench.selection.demo import build_vab_demo

    manifest = build_vab_demo(tmp_path / "vab-demo", size=(32, 24))
    answers = tmp_path / "a.jsonl"
    answers.write_text(
        json.dumps({"task_id": "x", "prompt_type": "pick_best", "response": "BEST: A"})[:-1]
        + ', "trial": '
        + "1" * 5000
        + "}\n"
    )
    capsys.readouterr()
    assert (
        main(["vab", "score", "--track", str(manifest), "--answers", str(answers), "--results", str(tmp_path / "r")])
        == 2
    )
    _one_line_error(capsys, "a.jsonl:1", "an integer of 5000 digits")
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").rglob("run.json"))
