"""The remote selection track `vab` (Hugging Face BakeLab/Visual-Aesthetic-Benchmark) against a local
stand-in for the Hub (tests/helpers/hub_server.py), with generated parquet shards in the dataset card's schema.

The shipped manifest protocols/tracks/vab.yaml is used as it is, except that its `tasks.count` (400,
the card's number of tasks) is set to the generated count through $PSTBENCH_REMOTE_MANIFESTS; one
test checks that the shipped count refuses a repo of another size.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import random
import re
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from helpers.hub_server import FakeHub
from PIL import Image, ImageFilter

from pytest_pstbench.cli import main
from pytest_pstbench.core.errors import UserError

VAB = "BakeLab/Visual-Aesthetic-Benchmark"
VAB_SHA = "d14fcdb" + hashlib.sha1(b"vab").hexdigest()[:33]  # the pinned short revision d14fcdb
OTHER_SHA = hashlib.sha1(b"vab other").hexdigest()
JUDGES = Path(__file__).resolve().parents[2] / "examples" / "judges" / "no_reference.py"
SHARD0, SHARD1 = "data/test-00000-of-00002.parquet", "data/test-00001-of-00002.parquet"

_IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
SCHEMA = pa.schema(
    [
        ("task_id", pa.string()),
        ("domain", pa.string()),
        ("substyle", pa.string()),
        ("n_images", pa.int32()),
        ("images", pa.list_(_IMAGE)),
        ("labels", pa.list_(pa.string())),
        ("ground_truth_best", pa.string()),
        ("ground_truth_worst", pa.string()),
    ]
)


def _image(seed: int, blur: float, fmt: str) -> bytes:
    """A small textured image; `blur` (Gaussian radius) lowers its sharpness."""
    rng = np.random.default_rng(seed)
    arr = rng.integers(0, 256, size=(18, 24, 3), dtype=np.uint8)
    im = Image.fromarray(arr, "RGB").filter(ImageFilter.GaussianBlur(blur)) if blur else Image.fromarray(arr, "RGB")
    buf = io.BytesIO()
    im.save(buf, format=fmt, **({"quality": 90} if fmt == "JPEG" else {}))
    return buf.getvalue()


# (task_id, domain, substyle, blur per candidate, best label, worst label): labels follow the blur
# (sharpest best, blurriest worst) in some tasks and not in others.
TASKS = [
    ("photograph_landscape_1", "photograph", "landscape", [1.5, 0.0], "B", "A"),
    ("fine-art_portrait_2", "fine-art", "portrait", [0.0, 2.0, 1.0], "A", "B"),
    ("42", "illustration", "pixel-art", [1.0, 0.0, 3.0, 2.0], "A", "C"),
    ("photograph_portrait_4", "photograph", "portrait", [2.0, 1.0, 0.0, 3.0, 4.0], "C", "E"),
    ("illustration_anime_5", "illustration", "anime", [0.5, 2.5, 1.5, 0.0, 3.5, 1.0], "B", "A"),
    ("fine-art_landscape_6", "fine-art", "landscape", [1.0, 0.0], "A", None),  # k = 2, worst left empty
]


def _rows(tasks=TASKS) -> list[dict]:
    rows = []
    for n, (tid, dom, sub, blurs, best, worst) in enumerate(tasks):
        fmt = "PNG" if n % 2 else "JPEG"
        images = [
            {"bytes": _image(100 * n + i, b, fmt), "path": f"{tid}_{i}.{fmt.lower()}"} for i, b in enumerate(blurs)
        ]
        labels = [chr(65 + i) for i in range(len(blurs))]
        rows.append(
            {
                "task_id": tid,
                "domain": dom,
                "substyle": sub,
                "n_images": len(blurs),
                "images": images,
                "labels": labels,
                "ground_truth_best": best,
                "ground_truth_worst": worst,
            }
        )
    return rows


def _parquet(rows: list[dict]) -> bytes:
    buf = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), buf, row_group_size=2)
    return buf.getvalue().to_pybytes()


def _repo(rows: list[dict]) -> dict[str, bytes]:
    half = 3
    return {
        "README.md": b"# Visual Aesthetic Benchmark (fake)\n",
        SHARD0: _parquet(rows[:half]),
        SHARD1: _parquet(rows[half:]),
        "data/train-00000-of-00001.parquet": _parquet(rows[:1]),  # another split: not fetched
    }


def _broken(rule: str) -> list[dict]:
    rows = _rows()
    victim = rows[4]  # in the second shard, row 1
    if rule == "n_images":
        victim["n_images"] = 5
    elif rule == "label":
        victim["ground_truth_best"] = "G"
    elif rule == "k":
        victim["images"] = victim["images"] + [victim["images"][0]]
        victim["labels"] = victim["labels"] + ["G"]
        victim["n_images"] = 7
    elif rule == "duplicate":
        victim["task_id"] = "fine-art_portrait_2"
    return rows


BROKEN = {  # rule -> (commit, expected message part)
    "n_images": (hashlib.sha1(b"broken n").hexdigest(), r"n_images is 5 but images has 6 entries"),
    "label": (
        hashlib.sha1(b"broken label").hexdigest(),
        r"ground_truth_best 'G' is not one of the row's labels \(A, B, C, D, E, F\)",
    ),
    "k": (hashlib.sha1(b"broken k").hexdigest(), r"n_images 7 is outside 2\.\.6 \(tasks\.n_images\)"),
    "duplicate": (
        hashlib.sha1(b"broken dup").hexdigest(),
        r"task_id fine-art_portrait_2 appears twice \(first at test-00000-of-00002\.parquet row 1\)",
    ),
}


@pytest.fixture(scope="module")
def repo_files():
    return {"pinned": _repo(_rows()), "other": _repo(_rows()[::-1])}


@pytest.fixture(scope="module")
def hub(repo_files):
    hub = FakeHub().start()
    hub.add_commit(VAB, VAB_SHA, repo_files["pinned"], refs=["main"])
    hub.add_commit(VAB, OTHER_SHA, repo_files["other"], refs=["v2"])
    for rule, (sha, _msg) in BROKEN.items():
        hub.add_commit(VAB, sha, _repo(_broken(rule)))
    yield hub
    hub.stop()


@pytest.fixture(scope="module")
def manifests(tmp_path_factory):
    """The shipped vab.yaml with tasks.count set to the generated number of tasks."""
    from pytest_pstbench.core.protocol import protocols_dir

    data = yaml.safe_load((protocols_dir() / "tracks" / "vab.yaml").read_text())
    data["tasks"]["count"] = len(TASKS)
    d = tmp_path_factory.mktemp("manifests")
    (d / "vab.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return d


def _env(mp, hub, root: Path, manifests: Path | None) -> None:
    mp.setenv("HF_ENDPOINT", hub.url)
    mp.setenv("PSTBENCH_DATA", str(root / "data"))
    mp.setenv("HF_HOME", str(root / "hf"))
    mp.delenv("HF_HUB_OFFLINE", raising=False)
    if manifests is None:
        mp.delenv("PSTBENCH_REMOTE_MANIFESTS", raising=False)
    else:
        mp.setenv("PSTBENCH_REMOTE_MANIFESTS", str(manifests))


@pytest.fixture(scope="module")
def fetched(hub, manifests, tmp_path_factory):
    """A data folder with vab fetched and extracted once at the pinned revision (copied per test)."""
    root = tmp_path_factory.mktemp("fetched")
    with pytest.MonkeyPatch.context() as mp:
        _env(mp, hub, root, manifests)
        assert main(["data", "fetch", "vab"]) == 0
    return root / "data"


@pytest.fixture
def env(hub, manifests, tmp_path, monkeypatch):
    _env(monkeypatch, hub, tmp_path, manifests)
    hub.log.clear()
    hub.corrupt.clear()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _root(env) -> Path:
    return env / "data" / "vab"


def _extracted(env) -> Path:
    return _root(env) / "pstbench-tracks" / "vab"


def _lock(env) -> dict:
    return json.loads((_root(env) / "pstbench-lock.json").read_text())


def _resolve(spec="vab"):
    from pytest_pstbench.selection.tracks import resolve_selection_track

    return resolve_selection_track(spec)


def _last_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    return lines[-1]


# ---- fetch, extraction, scoring ----------------------------------------------------------------
def test_fetch_extract_score_and_export_end_to_end(env, hub, repo_files, capsys):
    assert main(["data", "fetch", "vab"]) == 0
    out = capsys.readouterr().out
    assert f"revision {VAB_SHA}; verified" in out and "track vab: 6 tasks ready" in out
    assert sorted(hub.downloads()) == [SHARD0, SHARD1]  # not the README, not the train split
    lock = _lock(env)
    assert lock["revision"] == VAB_SHA and lock["pinned_revision"] == "d14fcdb" and lock["revision_override"] is None
    assert list(lock["pairs"]["test"].values()) == [SHARD0, SHARD1]
    for path in (SHARD0, SHARD1):
        assert lock["files"][path]["sha256"] == hashlib.sha256(repo_files["pinned"][path]).hexdigest()

    # the extracted track: tasks in dataset order, the image bytes exactly as stored, labels as indices
    track = _resolve()
    assert track.id == "vab" and track.source == "remote" and track.dataset_id == VAB and track.revision == VAB_SHA
    assert track.task_ids == [t[0] for t in TASKS]
    rows = _rows()
    for task, row in zip(track.tasks, rows):
        assert isinstance(task.seed, str) and task.seed == row["task_id"]  # "42" stays a string: the toolkit's seed
        assert (task.domain, task.topic, task.k) == (row["domain"], row["substyle"], row["n_images"])
        assert [c.read_bytes() for c in task.candidates] == [im["bytes"] for im in row["images"]]
        assert {c.suffix for c in task.candidates} == (
            {".jpg"} if row["images"][0]["path"].endswith("jpeg") else {".png"}
        )
        assert task.best == "ABCDEF".index(row["ground_truth_best"])
        worst = row["ground_truth_worst"]
        assert task.worst == ("ABCDEF".index(worst) if worst else 1 - task.best)

    # scoring with a real judge: every pick checked against the judge called directly on the images
    import importlib.util

    spec = importlib.util.spec_from_file_location("nr", JUDGES)
    nr = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nr)
    expect_best, expect_worst = {}, {}
    for row in rows:
        scores = [nr.sharpness(np.asarray(Image.open(io.BytesIO(im["bytes"])).convert("RGB"))) for im in row["images"]]
        assert len(set(scores)) == len(scores)  # no ties: the picks do not depend on the presentation order
        expect_best[row["task_id"]] = int(np.argmax(scores))
        expect_worst[row["task_id"]] = int(np.argmin(scores))
    capsys.readouterr()
    assert main(["vab", "score", "--track", "vab", "--judge", f"{JUDGES}:sharpness", "--results", "r"]) == 0
    stdout = capsys.readouterr().out
    assert f"dataset: {VAB}@{VAB_SHA}" in stdout
    run_dir = env / "r" / "vab" / "sharpness"
    per_task = list(csv.DictReader((run_dir / "per_task.csv").open()))
    assert [r["task_id"] for r in per_task] == [t[0] for t in TASKS]
    for r in per_task:
        for t in range(3):
            assert (
                int(r[f"best_t{t}"]) == expect_best[r["task_id"]]
                and int(r[f"worst_t{t}"]) == expect_worst[r["task_id"]]
            )
    top1 = np.mean([expect_best[t.id] == t.best for t in track.tasks])
    bot1 = np.mean([expect_worst[t.id] == t.worst for t in track.tasks])
    assert 0 < top1 < 1 and 0 < bot1 < 1  # the labels agree with the judge on some tasks only
    summary = json.loads((run_dir / "summary.json").read_text())
    overall = next(c for c in summary["cells"] if c["group"] == "overall")
    assert overall["metrics"]["top1"]["ap@1"]["mean"] == pytest.approx(top1)
    assert overall["metrics"]["bot1"]["ap@1"]["mean"] == pytest.approx(bot1)
    run = json.loads((run_dir / "run.json").read_text())
    assert run["complete"] is True and run["dataset"] == {"id": VAB, "revision": VAB_SHA, "source": "remote"}

    # export: the presentation orders of the string-seeded task follow random.Random("42"), as the toolkit's
    assert main(["vab", "export", "--track", "vab", "--out", "exp"]) == 0
    exported = json.loads((env / "exp" / "export.json").read_text())
    trials = next(t for t in exported["tasks"] if t["task_id"] == "42")["trials"]
    rng, orders = random.Random("42"), [list(range(4))]
    while len(orders) < 3:
        p = list(range(4))
        rng.shuffle(p)
        if p not in orders:
            orders.append(p)
    assert [t["order"] for t in trials] == orders


def test_pytest_plugin_scores_the_remote_track(env, fetched, pytester):
    shutil.copytree(fetched, env / "data", dirs_exist_ok=True)
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--pstbench-track=vab", f"--pstbench-judge={JUDGES}:sharpness", "-v"
    )
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=len(TASKS))
    result.stdout.fnmatch_lines(
        ["*pstbench-vab::42 PASSED*", f"*track: vab   protocol: vab   dataset: {VAB}@{VAB_SHA}*"]
    )


# ---- revisions ---------------------------------------------------------------------------------
def test_other_revision_refused_unless_overridden(env, hub, capsys):
    assert main(["data", "fetch", "vab", "--revision", OTHER_SHA]) == 2
    assert f"--revision {OTHER_SHA}: vab.yaml pins d14fcdb" in capsys.readouterr().err and hub.log == []
    assert main(["data", "fetch", "vab", "--revision", "main"]) == 2  # a branch is not the pin
    assert hub.log == []

    assert main(["data", "fetch", "vab", "--revision", "v2", "--allow-other-revision"]) == 0
    lock = _lock(env)
    assert lock["revision"] == OTHER_SHA
    detail = f"dataset revision: {OTHER_SHA} (resolved from v2; the kit pins d14fcdb)"
    assert lock["revision_override"] == {
        "pinned": "d14fcdb",
        "requested": "v2",
        "fetched": OTHER_SHA,
        "flag": "--allow-other-revision",
        "detail": detail,
    }
    track = _resolve()
    assert track.revision == OTHER_SHA and track.info["revision_override"]["fetched"] == OTHER_SHA
    assert track.task_ids == [t[0] for t in TASKS[::-1]]  # that commit's order
    # a run on the overridden data records it as a deviation in run.json
    assert main(["vab", "score", "--track", "vab", "--judge", f"{JUDGES}:sharpness", "--results", "r_override"]) == 0
    run = json.loads(next(Path("r_override").rglob("run.json")).read_text())
    assert {
        "kind": "revision_override",
        "pinned": "d14fcdb",
        "requested": "v2",
        "fetched": OTHER_SHA,
        "flag": "--allow-other-revision",
        "detail": detail,
    } in run["deviations"]

    # the pinned revision again: data, extraction and deviation replaced
    assert main(["data", "fetch", "vab"]) == 0
    track = _resolve()
    assert track.revision == VAB_SHA and "revision_override" not in track.info
    assert track.task_ids == [t[0] for t in TASKS]


def test_pinned_revision_resolving_to_another_commit_is_refused(env, hub, capsys):
    refs = hub.repos[VAB].refs
    refs["d14fcdb"] = OTHER_SHA  # e.g. a branch named like the pinned commit
    try:
        assert main(["data", "fetch", "vab"]) == 2
    finally:
        del refs["d14fcdb"]
    assert (
        f"resolved the pinned revision d14fcdb to commit {OTHER_SHA}, which is not that commit"
        in capsys.readouterr().err
    )
    assert hub.downloads() == [] and not _root(env).joinpath("pstbench-lock.json").exists()


# ---- damaged files -----------------------------------------------------------------------------
def test_corrupted_shard_and_extracted_images_are_caught(env, hub, fetched, capsys):
    shutil.copytree(fetched, env / "data", dirs_exist_ok=True)
    shard = _root(env) / SHARD1
    raw = bytearray(shard.read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # same size, one byte changed
    shard.write_bytes(bytes(raw))
    assert main(["data", "verify", "vab"]) == 1
    err = capsys.readouterr().err
    assert f"{SHARD1}: sha256" in err and "corrupted" in err and "1 of 2 files" in err
    with pytest.raises(UserError, match=rf"{SHARD1}: failed sha256 verification.*fix: run `pstbench data fetch vab`"):
        _resolve()
    hub.log.clear()
    assert main(["data", "fetch", "vab"]) == 0
    assert hub.downloads() == [SHARD1]
    assert main(["data", "verify", "vab"]) == 0

    # an extracted image changed in place: `verify` names it, `fetch` extracts again
    image = _extracted(env) / "42" / "1.jpg"
    good = image.read_bytes()
    image.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
    capsys.readouterr()
    assert main(["data", "verify", "vab"]) == 1
    err = capsys.readouterr().err
    assert "pstbench-tracks/vab/42/1.jpg: sha256 differs" in err and "fix: run `pstbench data fetch vab`" in err
    hub.log.clear()
    assert main(["data", "fetch", "vab"]) == 0
    assert hub.downloads() == [] and image.read_bytes() == good
    assert "1 extracted files damaged" in capsys.readouterr().err

    # a truncated or deleted image is noticed by the cheap check when the track loads: rebuilt from the shards
    image.write_bytes(good[:10])
    (_extracted(env) / "fine-art_portrait_2" / "0.png").unlink()
    track = _resolve()
    assert image.read_bytes() == good and all(c.is_file() for t in track.tasks for c in t.candidates)


# ---- schema violations -------------------------------------------------------------------------
@pytest.mark.parametrize("rule", sorted(BROKEN))
def test_schema_violation_is_a_one_line_error(env, hub, rule, capsys):
    sha, message = BROKEN[rule]
    assert main(["data", "fetch", "vab", "--revision", sha, "--allow-other-revision"]) == 2
    last = _last_line(capsys.readouterr().err)
    task = "fine-art_portrait_2" if rule == "duplicate" else "illustration_anime_5"
    assert last.startswith(f"pstbench: error: {_root(env) / SHARD1}: row 1 (0-based; task {task}): ")
    assert len(re.findall(message, last)) == 1 and "fix:" in last
    assert not _extracted(env).exists()  # nothing half-written
    assert main(["vab", "score", "--track", "vab", "--judge", f"{JUDGES}:sharpness"]) == 2  # the data stays refused
    assert re.search(message, _last_line(capsys.readouterr().err))


# ---- offline, --from, missing data -------------------------------------------------------------
def test_offline_without_data_gives_the_fetch_command(env, hub, fetched, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    assert main(["vab", "score", "--track", "vab", "--judge", f"{JUDGES}:sharpness"]) == 2
    last = _last_line(capsys.readouterr().err)
    assert "track vab: the data of BakeLab/Visual-Aesthetic-Benchmark@d14fcdb is not in" in last
    assert "fix: run `pstbench data fetch vab`" in last
    assert main(["data", "fetch", "vab"]) == 2
    assert "HF_HUB_OFFLINE=1" in capsys.readouterr().err

    # a copy that carries its lock file registers offline; the tasks are extracted from it
    assert main(["data", "fetch", "vab", "--from", str(fetched / "vab")]) == 0
    assert "track vab: 6 tasks ready" in capsys.readouterr().out
    assert main(["vab", "score", "--track", "vab", "--judge", f"{JUDGES}:sharpness", "--results", "r"]) == 0
    assert main(["data", "fetch", "vab"]) == 0  # offline: re-verifies what is there
    assert hub.log == []


# ---- manifest, dependencies --------------------------------------------------------------------
def test_shipped_manifest_and_task_count(env, hub, monkeypatch, capsys):
    from pytest_pstbench.data import manifest

    monkeypatch.delenv("PSTBENCH_REMOTE_MANIFESTS")
    m = manifest.load_manifests()["vab"]
    assert (m.kind, m.repo_id, m.revision, m.default_splits) == ("selection", VAB, "d14fcdb", ["test"])
    assert manifest.remote_track_ids("selection") == ["vab"] and "vab" not in manifest.remote_track_ids()
    assert main(["data", "fetch", "vab"]) == 2  # the shipped count is the card's 400
    last = _last_line(capsys.readouterr().err)
    assert (
        "vab.yaml: split test of BakeLab/Visual-Aesthetic-Benchmark@d14fcdb" in last
        and "has 6 tasks, expected 400" in last
    )
    assert not _extracted(env).exists()
    assert main(["data", "list"]) == 0
    assert "BakeLab/Visual-Aesthetic-Benchmark" in capsys.readouterr().out


def test_missing_pyarrow_is_a_one_line_user_error(env, fetched, monkeypatch):
    import sys

    shutil.copytree(fetched, env / "data", dirs_exist_ok=True)
    shutil.rmtree(_extracted(env))  # extraction needs to read the shards
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    source = Path(__import__("pytest_pstbench").__file__).resolve().parents[1]  # the tests run from a source tree
    with pytest.raises(
        UserError, match=rf"^dataset vab: its files are parquet.*fix: pip install -e '{re.escape(str(source))}\[vab\]'$"
    ):
        _resolve()


def test_gated_dataset_without_access_names_the_fix(env, hub, capsys, monkeypatch):
    """The real dataset is gated: without a token the Hub answers 403 GatedRepo; the fetch stops with one line."""
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
    hub.gated.add(VAB)
    try:
        assert main(["data", "fetch", "vab"]) == 2
    finally:
        hub.gated.discard(VAB)
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"pstbench: error: {VAB}: gated dataset; your account has no access")
    assert "accept its terms" in err[-1] and "hf auth login" in err[-1]
    # the lock lists what the fetch expected, nothing was downloaded: using the track says so
    assert main(["vab", "score", "--track", "vab", "--judge", f"{JUDGES}:sharpness"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pstbench data fetch vab" in err[0], err
