"""Parity with the OFFICIAL VAB toolkit: its own eval.py and summarize.py and `pstbench vab run` against the
same fake endpoint on the same synthetic tasks; every request body, every HTTP call count, every parsed answer
and every summary cell must agree.

Skipped unless $PSTBENCH_VAB_OFFICIAL names a checkout of github.com/BakeLab/Visual-Aesthetic-Benchmark
(eval.py, summarize.py) and a Python with the toolkit's locked dependencies is found: $PSTBENCH_VAB_OFFICIAL_PYTHON,
else the checkout's .venv/bin/python (`uv sync --frozen` in the checkout makes it; or
`uv export --frozen --no-hashes --no-emit-project > req.txt`, then `python -m venv V && V/bin/pip install -r req.txt`).
The official code is never copied into this repository. Run it alone:

    PSTBENCH_VAB_OFFICIAL=/path/to/Visual-Aesthetic-Benchmark python -m pytest tests/parity/test_vab_official_toolkit.py -s

What it does (everything stays on 127.0.0.1; the Hugging Face Hub is never contacted):

1. builds a synthetic VAB-shaped dataset (48 tasks, k = 2..6, three domains): candidate images of pairwise
   distinct sizes, some JPEGs carrying an EXIF Orientation tag, some PNGs with alpha; written (a) as a local
   `datasets` parquet dataset in the folder `BakeLab/Visual-Aesthetic-Benchmark/` under the official working
   folder, which the official eval.py / summarize.py load (their `load_dataset("BakeLab/Visual-Aesthetic-Benchmark")`
   resolves to a local folder of that name first), and (b) as a local pstbench selection manifest whose
   candidate files are the stored bytes (what `pstbench data fetch vab` extracts);
2. starts a fake OpenAI-compatible server on 127.0.0.1 whose behaviour per request (think blocks,
   `reasoning_content`, bold tags, lower case, two BEST lines, unshown letters, empty or null content, HTTP
   429 / 500 / 503, dropped connections, slow answers) is a deterministic function of (prompt type, candidates
   in presented order) and of how often that request was asked before in the same phase; the candidates are
   recognised by their image size (either orientation);
3. runs the official eval.py twice (phase 1, then phase 2: the official resume, "Re-run to retry failed
   trials"; in phase 2 the scripted persistent failures answer), then summarize.py -o;
4. runs `pstbench vab run` twice the same way (phase 1, phase 2: the kit's resume), under the shipped vab
   protocol as it is;
5. compares: request bodies per request (JSON equal), HTTP calls per request and phase, the parsed answer per
   (task, trial, prompt type) and every summary cell (model and random baseline).

Not scripted here: HTTP 400/401/403/404. The vab protocol does not retry them and stops the run at
401/403/404 (`answers.attempts`, a documented deviation from the official client's retries);
tests/selection/ask/test_model_client.py checks those counts against the measured official ones.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

DOMAINS = ["fine-art", "illustration", "photograph"]
PTYPES = ("pick_best", "pick_worst", "pick_best_and_worst")
LABELS = "ABCDEF"
MODEL = "fake-vlm"

# ---- scripted behaviours ------------------------------------------------------------------------
# Each scenario is a list of per-call behaviours within one phase (the last one repeats). A behaviour
# is ("text", template) with {b} {w} the answer and {x} {y} other shown labels, {u} a letter not shown;
# ("json", message dict template); ("status", code); ("slow", seconds) then the next behaviour.
# A "P1:" prefix: only in phase 1 (phase 2 answers "ok").
SCENARIOS = {
    "ok": [("text", "Looks fine.\nBEST: {b}\nWORST: {w}")],
    "think_answer": [("text", "<think>Maybe BEST: {x}\nWORST: {y}</think>\nFinal.\nBEST: {b}\nWORST: {w}")],
    "think_answer_2": [("text", "<think>\nI think BEST: {x} and WORST: {y}.\n</think>\n\nBEST: {b}\nWORST: {w}")],
    "thinking_tag": [("text", "<thinking>BEST: {x}\nWORST: {y}</thinking>BEST: {b}\nWORST: {w}")],
    "budget_thinking": [("text", "<budget:thinking>BEST: {x} WORST: {y}</budget:thinking>BEST: {b} WORST: {w}")],
    "mixed_tags": [("text", "<think>BEST: {x} WORST: {y}</thinking>\nBEST: {b}\nWORST: {w}")],
    "think_not_leading": [("text", "Sure. <think>BEST: {x} WORST: {y}</think> BEST: {b} WORST: {w}")],
    "think_leading_space": [("text", "\n<think>BEST: {x} WORST: {y}</think>\nBEST: {b}\nWORST: {w}")],
    "think_unclosed": [("text", "<think>BEST: {x}\nWORST: {y}\nstill thinking... BEST: {b} WORST: {w}")],
    "think_only": [("text", "<think>BEST: {b}\nWORST: {w}</think>")],
    "think_twice": [("text", "<think>BEST: {x}</think>mid <think>WORST: {y}</think>\nBEST: {b}\nWORST: {w}")],
    "think_upper": [("text", "<THINK>BEST: {x} WORST: {y}</THINK>BEST: {b} WORST: {w}")],
    "reasoning_content": [("json", {"content": "BEST: {b}\nWORST: {w}", "reasoning_content": "BEST: {x} WORST: {y}"})],
    "reasoning_field_keeps_think": [
        ("json", {"content": "<think>BEST: {x} WORST: {y}</think>BEST: {b}\nWORST: {w}", "reasoning": "thought"})
    ],
    "reasoning_content_null": [
        ("json", {"content": "<think>BEST: {x} WORST: {y}</think>BEST: {b}\nWORST: {w}", "reasoning_content": None})
    ],
    "bold": [("text", "**BEST: {b}**\n**WORST: {w}**")],
    "bold_colon": [("text", "**BEST:** {b}\n**WORST:** {w}"), ("text", "BEST: {b}\nWORST: {w}")],
    "lower": [("text", "best: {b}\nworst: {w}")],
    "two_best_lines": [("text", "BEST: {x}\nWORST: {y}\nOn reflection:\nBEST: {b}\nWORST: {w}")],
    "unshown_then_ok": [("text", "BEST: {u}\nWORST: {u}"), ("text", "BEST: {b}\nWORST: {w}")],
    "empty_then_ok": [("text", ""), ("text", "BEST: {b}\nWORST: {w}")],
    "null_then_ok": [("json", {"content": None}), ("text", "BEST: {b}\nWORST: {w}")],
    "unicode_separators": [("text", "Line\u2028sep\u2029para\x85nel\x1c\nBEST: {b}\nWORST: {w}")],
    "429_once": [("status", 429), ("text", "BEST: {b}\nWORST: {w}")],
    "500_then_unparseable": [("status", 500), ("text", "I cannot decide.")],
    "P1:429_always": [("status", 429)],
    "P1:500_always": [("status", 500)],
    "P1:503_always": [("status", 503)],
    "slow": [("slow", None), ("text", "BEST: {b}\nWORST: {w}")],
    "drop_once": [("drop", None), ("text", "BEST: {b}\nWORST: {w}")],
    "P1:drop_always": [("drop", None)],
    "badjson_once": [("raw", "<html>bad gateway</html>"), ("text", "BEST: {b}\nWORST: {w}")],
}


def scenario_for(key) -> str:
    names = sorted(SCENARIOS)
    h = int(hashlib.sha256(repr(key).encode()).hexdigest(), 16)
    return names[h % len(names)]


# ---- dataset ------------------------------------------------------------------------------------
def build_dataset(root: Path, n_tasks: int, seed: int):
    """Tasks with candidate images of pairwise distinct sizes (either orientation)."""
    from PIL import Image

    rng = random.Random(seed)
    used: set = set()
    tasks = []
    size_of = {}  # (w, h) or (h, w) -> (task_id, index)
    for i in range(n_tasks):
        k = 2 + i % 5
        domain = DOMAINS[i % 3]
        sub = ["portrait", "landscape", "still-life"][(i // 3) % 3]
        tid = f"{domain.replace('-', '')}_{sub.replace('-', '')}_{i}"
        labels = list(LABELS[:k])
        best = rng.randrange(k)
        worst = rng.choice([j for j in range(k) if j != best])
        cands = []
        for j in range(k):
            while True:
                w, h = rng.randrange(24, 96), rng.randrange(24, 96)
                if w != h and (w, h) not in used and (h, w) not in used:
                    used.update({(w, h), (h, w)})
                    break
            arr = Image.new("RGB", (w, h), tuple(rng.randrange(256) for _ in range(3)))
            for _ in range(6):  # some structure, so a rotation changes the pixels
                x0, y0 = rng.randrange(w), rng.randrange(h)
                arr.paste(tuple(rng.randrange(256) for _ in range(3)), (x0, y0, min(w, x0 + 9), min(h, y0 + 5)))
            buf = io.BytesIO()
            kind = (i * 7 + j) % 6
            if kind == 0:  # EXIF Orientation 6 (rotate 90 when displayed)
                exif = Image.Exif()
                exif[0x0112] = 6
                arr.save(buf, format="JPEG", quality=92, exif=exif.tobytes())
            elif kind == 1:
                exif = Image.Exif()
                exif[0x0112] = 3
                arr.save(buf, format="JPEG", quality=92, exif=exif.tobytes())
            elif kind == 2:
                exif = Image.Exif()
                exif[0x0112] = 1
                arr.save(buf, format="JPEG", quality=92, exif=exif.tobytes())
            elif kind == 3:
                rgba = arr.convert("RGBA")
                rgba.putalpha(128)
                rgba.save(buf, format="PNG")
            else:
                arr.save(buf, format="JPEG", quality=90)
            data = buf.getvalue()
            cands.append(data)
            size_of[(w, h)] = (tid, j)
            size_of[(h, w)] = (tid, j)
        tasks.append(
            {
                "task_id": tid,
                "domain": domain,
                "substyle": sub,
                "n_images": k,
                "labels": labels,
                "best": labels[best],
                "worst": labels[worst],
                "images": cands,
            }
        )
    return tasks, size_of


OFFICIAL_DATASET_SCRIPT = r"""
import json, sys
from datasets import Dataset, Features, Image, Sequence, Value
spec = json.load(open(sys.argv[1]))
rows = {"task_id": [], "domain": [], "substyle": [], "n_images": [], "images": [], "labels": [],
        "ground_truth_best": [], "ground_truth_worst": []}
for t in spec:
    rows["task_id"].append(t["task_id"]); rows["domain"].append(t["domain"]); rows["substyle"].append(t["substyle"])
    rows["n_images"].append(t["n_images"]); rows["labels"].append(t["labels"])
    rows["images"].append([{"bytes": open(p, "rb").read(), "path": None} for p in t["files"]])
    rows["ground_truth_best"].append(t["best"]); rows["ground_truth_worst"].append(t["worst"])
features = Features({"task_id": Value("string"), "domain": Value("string"), "substyle": Value("string"),
                     "n_images": Value("int32"), "images": Sequence(Image()), "labels": Sequence(Value("string")),
                     "ground_truth_best": Value("string"), "ground_truth_worst": Value("string")})
Dataset.from_dict(rows, features=features).to_parquet(sys.argv[2])
"""


def write_inputs(work: Path, tasks, official_python: str):
    files_dir = work / "kit-track"
    spec, manifest_tasks = [], []
    for t in tasks:
        from PIL import Image

        rels = []
        for j, data in enumerate(t["images"]):
            ext = {"JPEG": ".jpg", "PNG": ".png"}[Image.open(io.BytesIO(data)).format]
            rel = f"{t['task_id']}/{j}{ext}"
            (files_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            (files_dir / rel).write_bytes(data)
            rels.append(rel)
        spec.append({**{k: v for k, v in t.items() if k != "images"}, "files": [str(files_dir / r) for r in rels]})
        manifest_tasks.append(
            {
                "id": t["task_id"],
                "domain": t["domain"],
                "topic": t["substyle"],
                "candidates": rels,
                "best": t["labels"].index(t["best"]),
                "worst": t["labels"].index(t["worst"]),
            }
        )
    (files_dir / "track.yaml").write_text(
        json.dumps({"kind": "selection", "id": "vab-parity", "tasks": manifest_tasks}, indent=1), encoding="utf-8"
    )  # JSON is YAML
    (work / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    out = work / "official" / "BakeLab" / "Visual-Aesthetic-Benchmark" / "data" / "test-00000-of-00001.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)
    script = work / "make_dataset.py"
    script.write_text(OFFICIAL_DATASET_SCRIPT, encoding="utf-8")
    subprocess.run([official_python, str(script), str(work / "spec.json"), str(out)], check=True)
    return files_dir / "track.yaml"


# ---- fake server --------------------------------------------------------------------------------
class FakeServer:
    def __init__(self, size_of, slow_s: float):
        from PIL import Image

        self.size_of = size_of
        self.slow_s = slow_s
        self.lock = threading.Lock()
        self.side = None
        self.phase = 0
        self.calls = Counter()  # (side, phase, key) -> HTTP calls
        self.bodies = defaultdict(set)  # (side, key) -> canonical bodies
        self.body_examples = {}
        self.unknown = 0
        srv = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = json.loads(raw)
                content = body["messages"][0]["content"]
                header = content[0]["text"]
                ptype = (
                    "pick_best_and_worst"
                    if "and which has the worst" in header
                    else "pick_worst"
                    if "the worst overall" in header
                    else "pick_best"
                )
                cands = []
                for part in content:
                    if part.get("type") == "image_url":
                        url = part["image_url"]["url"]
                        im = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
                        cands.append(srv.size_of.get(im.size))
                if None in cands:
                    with srv.lock:
                        srv.unknown += 1
                    return self._send(418, b'{"error": "unknown image"}')
                key = (ptype, tuple(cands))
                canon = json.dumps(body, sort_keys=True)
                with srv.lock:
                    side, phase = srv.side, srv.phase
                    srv.calls[(side, phase, key)] += 1
                    n = srv.calls[(side, phase, key)]
                    srv.bodies[(side, key)].add(canon)
                    srv.body_examples[(side, key)] = body
                name = scenario_for(key)
                steps = SCENARIOS["ok"] if (name.startswith("P1:") and phase > 1) else SCENARIOS[name]
                step = steps[min(n, len(steps)) - 1]
                k = len(cands)
                rng = random.Random(repr(key))
                shown = list(LABELS[:k])
                b, w = rng.sample(shown, 2)
                x, y = rng.sample(shown, 2)
                u = LABELS[k] if k < len(LABELS) else "Z"
                fill = dict(b=b, w=w, x=x, y=y, u=u)
                if step[0] == "slow":  # slower than most answers, within both timeouts (the official one is 600 s)
                    time.sleep(srv.slow_s)
                    step = ("text", "BEST: {b}\nWORST: {w}")
                if step[0] == "drop":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if step[0] == "raw":
                    return self._send(200, step[1].encode())
                if step[0] == "status":
                    return self._send(step[1], json.dumps({"error": {"message": f"scripted {step[1]}"}}).encode())
                if step[0] == "text":
                    msg = {"role": "assistant", "content": step[1].format(**fill)}
                else:
                    msg = {"role": "assistant"}
                    for kk, v in step[1].items():
                        msg[kk] = v.format(**fill) if isinstance(v, str) else v
                out = {
                    "id": "cmpl-1",
                    "object": "chat.completion",
                    "created": 1700000000,
                    "model": body.get("model"),
                    "choices": [{"index": 0, "message": msg, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                }
                self._send(200, json.dumps(out).encode())

            def _send(self, code, data):
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


# ---- runs -----------------------------------------------------------------------------------------
def run_official(work: Path, src: Path, python: str, base: str, timeout_s: float, concurrency: int, server: FakeServer):
    wd = work / "official"
    for f in ("eval.py", "summarize.py"):
        shutil.copy(src / f, wd / f)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "API_", "HF_", "LITELLM"))}
    env.update(
        {
            "HF_HOME": str(wd / "hf-home"),
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "NO_PROXY": "127.0.0.1",
            "no_proxy": "127.0.0.1",
        }
    )
    logs = []
    for phase in (1, 2):
        server.side, server.phase = "official", phase
        t0 = time.time()
        p = subprocess.run(
            [
                python,
                "eval.py",
                "--model",
                f"openai/{MODEL}",
                "--api-base",
                base,
                "--api-key",
                "sk-parity",
                "--concurrency",
                str(concurrency),
                "--output-dir",
                "results",
            ],
            cwd=wd,
            env=env,
            capture_output=True,
            text=True,
        )
        logs.append(p.stdout[-3000:] + p.stderr[-3000:])
        print(f"  official eval.py phase {phase}: rc {p.returncode}, {time.time() - t0:.0f} s", flush=True)
        if p.returncode:
            pytest.fail(f"official eval.py failed (phase {phase}, exit {p.returncode}):\n{p.stderr[-4000:]}")
    p = subprocess.run(
        [python, "summarize.py", "--results-dir", "results", "-o", "summary.json"],
        cwd=wd,
        env=env,
        capture_output=True,
        text=True,
    )
    if p.returncode:
        pytest.fail(f"official summarize.py failed (exit {p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
    (wd / "eval-log.txt").write_text("\n".join(logs), encoding="utf-8")
    return json.loads((wd / "summary.json").read_text()), json.loads((wd / "results" / f"{MODEL}.json").read_text())


def run_kit(work: Path, manifest: Path, base: str, timeout_s: float, concurrency: int, server: FakeServer):
    answers = work / "kit" / "answers.jsonl"
    if answers.exists():
        answers.unlink()
    env = {**os.environ, "PARITY_KEY": "sk-parity"}
    for phase in (1, 2):
        server.side, server.phase = "kit", phase
        t0 = time.time()
        cmd = [
            sys.executable,
            "-m",
            "pytest_pstbench.cli",
            "vab",
            "run",
            "--track",
            str(manifest),
            "--model",
            MODEL,
            "--api-base",
            base,
            "--api-key-env",
            "PARITY_KEY",
            "--timeout",
            str(timeout_s),
            "--concurrency",
            str(concurrency),
            "--answers",
            str(answers),
            "--results",
            str(work / "kit" / "results"),
            "-q",
        ]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        print(f"  pstbench vab run phase {phase}: rc {p.returncode}, {time.time() - t0:.0f} s", flush=True)
        if (p.returncode not in (0, 1) and "was stopped" not in p.stderr) or "Traceback" in p.stderr:
            pytest.fail(
                f"pstbench vab run failed (phase {phase}, exit {p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-4000:]}"
            )
    return answers


# ---- comparison -----------------------------------------------------------------------------------
def kit_cells(manifest: Path, answers: Path):
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.selection import answers as ans
    from pytest_pstbench.selection.accuracy import aggregate, trial_outcomes
    from pytest_pstbench.selection.protocol import SelectionParams
    from pytest_pstbench.selection.tracks import load_selection_manifest

    p = SelectionParams.of(load_protocol("vab"))
    track = load_selection_manifest(manifest)
    aset = ans.read_answers(answers, track, p)
    outcomes = [trial_outcomes(t, ans.task_answers_from_file(t, aset, p), p) for t in track.tasks]
    cells = {(c["group"], c["value"]): c for c in aggregate(track.tasks, outcomes, p)}
    parsed = {}
    for t in track.tasks:
        per = ans.task_answers_from_file(t, aset, p)
        for ptype, recs in per.items():
            for trial, rec in enumerate(recs):
                parsed[(t.id, ptype, trial)] = rec
    return cells, parsed, track


def official_cells(summary: dict) -> dict:
    """{(group, value, metric, agg): value} from summarize.py's JSON for one entry."""
    out = {}
    key = {"top1": "pick_best", "bot1": "pick_worst", "tb1": "pick_best_and_worst_both"}
    for m, k in key.items():
        out[("overall", "all", m, "pass^3")] = (
            summary[k.replace("_both", "")]["accuracy_both"] if m == "tb1" else summary[k]["accuracy"]
        )
        if "avg_pass_at_1" in summary:
            out[("overall", "all", m, "ap@1")] = summary["avg_pass_at_1"][k]
        for d, v in summary.get("by_domain", {}).items():
            out[("domain", d, m, "pass^3")] = v[k]
        for n, v in summary.get("by_n_images", {}).items():
            out[("k", str(n), m, "pass^3")] = v[k]
        for d, v in summary.get("avg_pass_at_1_by_domain", {}).items():
            out[("domain", d, m, "ap@1")] = v[k]
        for n, v in summary.get("avg_pass_at_1_by_n_images", {}).items():
            out[("k", str(n), m, "ap@1")] = v[k]
    if "accuracy_best" in summary.get("pick_best_and_worst", {}):
        out[("overall", "all", "tb1-best", "pass^3")] = summary["pick_best_and_worst"]["accuracy_best"]
        out[("overall", "all", "tb1-worst", "pass^3")] = summary["pick_best_and_worst"]["accuracy_worst"]
    return out


def compare(server: FakeServer, official_summary: dict, official_results: dict, manifest: Path, answers: Path) -> int:
    """The number of disagreements; what was compared and each first disagreement are printed."""
    cells, parsed, track = kit_cells(manifest, answers)
    problems = 0
    # 1. requests: same logical requests, same bodies
    keys_o = {k for (s, k) in server.bodies if s == "official"}
    keys_k = {k for (s, k) in server.bodies if s == "kit"}
    body_diff = [k for k in keys_o & keys_k if server.bodies[("official", k)] != server.bodies[("kit", k)]]
    multi = [
        k
        for k in keys_o | keys_k
        if len(server.bodies.get(("official", k), ())) > 1 or len(server.bodies.get(("kit", k), ())) > 1
    ]
    print(
        f"requests: official {len(keys_o)}, kit {len(keys_k)}, only official {len(keys_o - keys_k)}, only kit "
        f"{len(keys_k - keys_o)}; request bodies differing: {len(body_diff)}; requests with more than one body on a side: {len(multi)}"
        f"; unrecognised images: {server.unknown}"
    )
    for k in body_diff[:3]:
        a, b = server.body_examples[("official", k)], server.body_examples[("kit", k)]
        print("  body differs:", k, describe_body_diff(a, b))
    problems += len(body_diff) + len(keys_o ^ keys_k) + len(multi) + server.unknown
    # 2. HTTP calls per request and phase
    diff_calls = []
    by_scn = defaultdict(lambda: [0, 0, 0])
    for phase in (1, 2):
        for k in keys_o | keys_k:
            a, b = server.calls[("official", phase, k)], server.calls[("kit", phase, k)]
            scn = scenario_for(k)
            e = by_scn[(scn, phase)]
            e[0] += 1
            e[1] += a
            e[2] += b
            if a != b:
                diff_calls.append((phase, k, scn, a, b))
    total_o = sum(v for (s, _p, _k), v in server.calls.items() if s == "official")
    total_k = sum(v for (s, _p, _k), v in server.calls.items() if s == "kit")
    print(f"HTTP calls: official {total_o}, kit {total_k}; requests whose call count differs: {len(diff_calls)}")
    print("  calls per scenario and phase (requests, official calls, kit calls):")
    for (scn, phase), (n, a, b) in sorted(by_scn.items()):
        if n:
            mark = "" if a == b else "   <-- differs"
            print(f"    {scn:30s} phase {phase}: {n:3d} requests, official {a:4d}, kit {b:4d}{mark}")
    for d in diff_calls[:5]:
        print("  calls differ:", d)
    problems += len(diff_calls)
    # 3. parsed answers per record
    rec_diff = 0
    n_rec = 0
    labels_of = {t.id: t for t in track.tasks}
    for r in official_results["results"]:
        if "derived_from" in r:
            continue
        n_rec += 1
        t = labels_of[r["task_id"]]
        kit = parsed[(r["task_id"], r["prompt_type"], r["trial"])]

        def lab(i):
            return None if i is None else LABELS[i]  # dataset labels are A.. in dataset order

        pa = r.get("parsed_answer") or {}
        want = {
            n: pa.get(n)
            for n in (
                ("best",)
                if r["prompt_type"] == "pick_best"
                else ("worst",)
                if r["prompt_type"] == "pick_worst"
                else ("best", "worst")
            )
        }
        got = {n: lab(kit[n]) for n in want}
        if "error" in r:
            ok = kit["status"] == "error"
        else:
            ok = got == want and (kit["status"] == "ok") == bool(r.get("parsed_answer"))
        if not ok:
            rec_diff += 1
            if rec_diff <= 5:
                print(
                    "  record differs:",
                    r["task_id"],
                    r["prompt_type"],
                    r["trial"],
                    "official",
                    want,
                    repr(r.get("model_response", r.get("error")))[:120],
                    "kit",
                    kit,
                )
        del t
    print(f"records: {n_rec} official records (not derived); parsed answers differing: {rec_diff}")
    problems += rec_diff
    # 4. cells
    off_model = official_cells(official_summary[MODEL])
    off_rand = official_cells(official_summary["Random Guess"])
    cell_diff = rand_diff = 0
    for (g, v, m, agg), val in off_model.items():
        c = cells.get((g, v))
        if m.startswith("tb1-"):
            kv = c["tb1_parts"][f"{m[4:]}_only"][agg]["mean"]
        else:
            kv = c["metrics"][m][agg]["mean"]
        kv = 0 if kv is None else kv  # the official summary prints 0 for an empty cell
        if kv != val:
            cell_diff += 1
            if cell_diff <= 8:
                print(f"  cell differs: {g}={v} {m} {agg}: official {val!r}, kit {kv!r}")
    for (g, v, m, agg), val in off_rand.items():
        if m.startswith("tb1-"):
            continue
        kv = cells[(g, v)]["metrics"][m][agg]["random"]
        rand_diff += kv != val
    n_rand = sum(1 for k in off_rand if not k[2].startswith("tb1-"))
    print(
        f"cells: {len(off_model)} model cells, differing: {cell_diff}; {n_rand} random-baseline cells, differing: {rand_diff}"
    )
    problems += cell_diff + rand_diff
    return problems


def describe_body_diff(a, b) -> str:
    from PIL import Image

    if a.keys() != b.keys():
        return f"keys {sorted(a)} vs {sorted(b)}"
    for k in a:
        if k != "messages" and a[k] != b[k]:
            return f"{k}: {a[k]!r} vs {b[k]!r}"
    ca, cb = a["messages"][0]["content"], b["messages"][0]["content"]
    for i, (pa, pb) in enumerate(zip(ca, cb)):
        if pa != pb:
            if pa.get("type") == "image_url" and pb.get("type") == "image_url":
                ia = Image.open(io.BytesIO(base64.b64decode(pa["image_url"]["url"].split(",", 1)[1])))
                ib = Image.open(io.BytesIO(base64.b64decode(pb["image_url"]["url"].split(",", 1)[1])))
                return f"part {i}: image {ia.size[0]}x{ia.size[1]} vs {ib.size[0]}x{ib.size[1]}"
            return f"part {i}: {json.dumps(pa)[:100]} vs {json.dumps(pb)[:100]}"
    return "messages differ"


OFFICIAL = os.environ.get("PSTBENCH_VAB_OFFICIAL")
TASKS, SEED = 48, 22
TIMEOUT_S = 600.0  # the kit's --timeout: the official call timeout is litellm's 600 s
SLOW_S = 1.5  # seconds the "slow" scenario waits before answering (within both timeouts)
CONCURRENCY = 16


def official_python(src: Path) -> str | None:
    """A Python with the official toolkit's locked dependencies: $PSTBENCH_VAB_OFFICIAL_PYTHON, else the
    checkout's .venv (what `uv sync` makes there)."""
    given = os.environ.get("PSTBENCH_VAB_OFFICIAL_PYTHON")
    if given:
        return given
    venv = src / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else None


@pytest.mark.skipif(
    not OFFICIAL,
    reason="the official VAB toolkit is absent: set PSTBENCH_VAB_OFFICIAL to a checkout of "
    "github.com/BakeLab/Visual-Aesthetic-Benchmark",
)
def test_the_kit_and_the_official_toolkit_agree(tmp_path, capsys):
    src = Path(OFFICIAL)
    if not (src / "eval.py").is_file() or not (src / "summarize.py").is_file():
        pytest.skip(
            f"PSTBENCH_VAB_OFFICIAL={OFFICIAL}: no eval.py and summarize.py there (not a checkout of the official toolkit)"
        )
    python = official_python(src)
    if python is None:
        pytest.skip(
            "no Python with the official toolkit's dependencies: set PSTBENCH_VAB_OFFICIAL_PYTHON or run "
            f"`uv sync --frozen` in {src}"
        )
    if subprocess.run([python, "-c", "import datasets, litellm"], capture_output=True).returncode:
        pytest.skip(f"{python} cannot import the official toolkit's dependencies (datasets, litellm)")
    work = tmp_path
    tasks, size_of = build_dataset(work, TASKS, SEED)
    manifest = write_inputs(work, tasks, python)
    server = FakeServer(size_of, slow_s=SLOW_S)
    print(f"official run ({TASKS} tasks) against {server.base} ...", flush=True)
    summary, results = run_official(work, src, python, server.base, TIMEOUT_S, CONCURRENCY, server)
    print("kit run (protocol vab) ...", flush=True)
    answers = run_kit(work, manifest, server.base, TIMEOUT_S, CONCURRENCY, server)
    scn = Counter(scenario_for(k) for (s, k) in server.bodies if s == "kit")
    print(f"scenarios used: {len(scn)} of {len(SCENARIOS)} ({', '.join(f'{k} {v}' for k, v in sorted(scn.items()))})")
    problems = compare(server, summary, results, manifest, answers)
    report = capsys.readouterr().out
    print(report)
    assert problems == 0, f"PARITY: {problems} differences\n{report}"
