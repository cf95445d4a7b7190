"""Issue 47's real-search acceptance: `ampbench bisect` over a made git repository of a small Paddle program.

    python scripts/bisect_accept.py --out DIR [--commits 30] [--searches 10] [--kind slowdown|accuracy]

Each search makes a fresh repository of `--commits` commits whose program trains a small Paddle model; one
commit, drawn at random (seeded), plants the change: every step 40% slower (`slowdown`, judged by
history-throughput) or the reported accuracy 5 points lower (`accuracy`, history-metric). It runs the real
CLI and tallies: the planted commit named, another commit named (the costly error), no commit named, and the
candidate evaluations against log2(N) + 4.  `--good-bad` plants the change before the good endpoint instead:
no commit may be named.  Results go to DIR/accept.json (atomically); a rerun skips searches already there.
Nothing here runs in CI (a search over 30 commits takes minutes); the rule code's simulation does
(tests/test_bisect.py).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

PROGRAM = '''
import argparse, json, os, time
import paddle
SLEEP, DROP = {sleep}, {drop}
ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int); ap.add_argument("--seed", type=int); ap.add_argument("--out")
a = ap.parse_args()
paddle.seed(a.seed)
model = paddle.nn.Sequential(paddle.nn.Linear(8, 32), paddle.nn.ReLU(), paddle.nn.Linear(32, 2))
opt = paddle.optimizer.Adam(parameters=model.parameters(), learning_rate=0.01)
w = paddle.randn([8, 1])
for i in range(a.steps):
    x = paddle.randn([16, 8])
    y = (x @ w > 0).astype("int64").squeeze(-1)
    loss = paddle.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    time.sleep(SLEEP)
    opt.step()
    opt.clear_grad()
x = paddle.randn([512, 8])
acc = float((model(x).argmax(-1) == (x @ w > 0).astype("int64").squeeze(-1)).astype("float32").mean()) - DROP
with open(os.path.join(a.out, "metrics.json"), "w") as f:
    json.dump({{"accuracy": acc}}, f)
'''

SUITE = '''
[suite]
name = "accept"
workload = "command"
metric = "accuracy"
seeds = [0, 1, 2]

[workload]
command = [{python}, "train.py", "--steps", "{{steps}}", "--seed", "{{seed}}", "--out", "{{out}}"]
cwd = {cwd}
metric = {{ preset = "json", json_file = "{{out}}/metrics.json" }}

[train]
batch_size = 16
steps = 60
warmup_steps = 5
timeout_s = 600

[[modes]]
name = "fp32"
'''


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@a", "GIT_COMMITTER_NAME": "a",
           "GIT_COMMITTER_EMAIL": "a@a"}
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
                          env=env).stdout.strip()


def make_repo(where: Path, commits: int, planted: int, kind: str) -> list[str]:
    where.mkdir(parents=True)
    _git(where, "init", "-q", "-b", "main")
    shas = []
    for k in range(commits):
        changed = k >= planted
        sleep = 0.014 if changed and kind == "slowdown" else 0.010
        drop = 0.05 if changed and kind == "accuracy" else 0.0
        (where / "train.py").write_text(PROGRAM.format(sleep=sleep, drop=drop))
        (where / "CHANGES").write_text(f"{k}\n")
        _git(where, "add", "-A")
        _git(where, "commit", "-q", "-m", f"change {k}")
        shas.append(_git(where, "rev-parse", "HEAD"))
    return shas


def one_search(out: Path, i: int, commits: int, kind: str, good_bad: bool, rng: random.Random) -> dict:
    planted = rng.randrange(1, commits)
    work = out / f"search-{i:02d}"
    repo = work / "repo"
    shas = make_repo(repo, commits, 0 if good_bad else planted, kind)
    suite = work / "suite.toml"
    suite.write_text(SUITE.format(python=json.dumps(sys.executable), cwd=json.dumps(str(repo))))
    rule = "history-throughput" if kind == "slowdown" else "history-metric"
    cmd = [sys.executable, "-m", "ampbench.cli", "bisect", str(suite), "--repo", str(repo), "--good", shas[0],
           "--bad", shas[-1], "--rule", rule, "--out", str(work / "runs")]
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    doc_path = next((work / "runs").glob("accept/bisect-*/bisect.json"), None)
    doc = json.loads(doc_path.read_text()) if doc_path else {}
    first = doc.get("first_bad") if not doc.get("stopped") else None
    named = doc["commits"][first] if first is not None and r.returncode == 1 else None
    looks = len({c["index"] for c in doc.get("candidates", []) if c["role"] in ("candidate", "recheck")})
    return {"search": i, "planted": None if good_bad else planted, "planted_sha": None if good_bad else shas[planted],
            "named": named, "right": named == (None if good_bad else shas[planted]), "exit": r.returncode,
            "evaluations": looks + 2, "bound": math.log2(commits) + 4, "stopped": doc.get("stopped", "")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--commits", type=int, default=30)
    ap.add_argument("--searches", type=int, default=10)
    ap.add_argument("--kind", choices=("slowdown", "accuracy"), default="slowdown")
    ap.add_argument("--good-bad", action="store_true", help="plant the change before --good: nothing may be named")
    ap.add_argument("--seed", type=int, default=47)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    path = a.out / "accept.json"
    done = json.loads(path.read_text()) if path.exists() else []
    rng = random.Random(a.seed)
    for i in range(a.searches):
        row = one_search(a.out, i, a.commits, a.kind, a.good_bad, rng) if i >= len(done) else None
        if row is None:
            rng.randrange(1, a.commits)   # the same draws on a rerun
            continue
        done.append(row)
        with tempfile.NamedTemporaryFile("w", dir=a.out, delete=False, suffix=".tmp") as f:
            json.dump(done, f, indent=1)
        os.replace(f.name, path)
        print(json.dumps(row), flush=True)
    right = sum(r["right"] for r in done)
    print(f"{right} of {len(done)} searches right; mean evaluations "
          f"{sum(r['evaluations'] for r in done) / max(1, len(done)):.1f} (log2(N) + 4 = {math.log2(a.commits) + 4:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
