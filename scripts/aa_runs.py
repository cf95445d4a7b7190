#!/usr/bin/env python
"""Real A/A test of the checker: identical-code runs compared with `ampbench check B --baseline A`.

Nothing changes between the runs, so every FAIL is a false alarm.  Half of the comparisons put a
busy-loop process per core beside the current run, each started in its own session (`setsid`):
on Linux, autogroup scheduling only lets a competitor take a fair share from another session.
The checker must then say "measurement disturbed" (INCONCLUSIVE), not FAIL.

    # make the runs (quiet Q0..Qk and busy B0..Bk-1), then judge them
    python scripts/aa_runs.py run   --suite tests/fixtures/aa_toy.toml --quiet 4 --busy 3 --out /tmp/aa/toy
    python scripts/aa_runs.py check --out /tmp/aa/toy
    # the resnet cpu profile, shortened to fit an afternoon:
    python scripts/aa_runs.py run --suite resnet --profile cpu --set train.steps=30 --quiet 3 --busy 2 --out /tmp/aa/resnet

Comparisons: Q(i+1) vs Qi (quiet A/A) and Bi vs Qi (busy current run vs quiet baseline).
`check` prints one line per comparison and writes OUT/aa.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "ampbench.cli", *args]


def start_load(cores: int) -> list[subprocess.Popen]:
    """One busy loop per core, each in its own session (so it competes fairly with the worker)."""
    return [subprocess.Popen(["setsid", sys.executable, "-c", "while True: pass"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(cores)]


def stop_load(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()


def one_run(args: argparse.Namespace, label: str, busy: bool) -> dict:
    out = Path(args.out) / label
    cmd = _cli("run", args.suite, "--out", str(out), "--no-report")
    if args.profile:
        cmd += ["--profile", args.profile]
    for s in args.set or []:
        cmd += ["--set", s]
    if args.seeds:
        cmd += ["--seeds", args.seeds]
    load = start_load(os.cpu_count() or 1) if busy else []
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    finally:
        stop_load(load)
    runs = sorted(p.parent for p in out.rglob("run.json"))
    if not runs:
        raise SystemExit(f"{label}: no run folder made (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return {"label": label, "busy": busy, "dir": str(runs[-1]), "wall_s": round(time.time() - t0, 1),
            "run_exit": proc.returncode}


def do_run(args: argparse.Namespace) -> None:
    manifest = Path(args.out) / "runs.json"
    done = json.loads(manifest.read_text()) if manifest.is_file() else []
    have = {r["label"] for r in done}
    # Interleave quiet and busy runs so slow drift of the shared machine hits both kinds.
    order = []
    for i in range(max(args.quiet, args.busy)):
        if i < args.quiet:
            order.append((f"Q{i}", False))
        if i < args.busy:
            order.append((f"B{i}", True))
    for label, busy in order:
        if label in have:
            continue
        rec = one_run(args, label, busy)
        done.append(rec)
        manifest.parent.mkdir(parents=True, exist_ok=True)
        manifest.write_text(json.dumps(done, indent=1))
        print(json.dumps(rec), flush=True)


def _rules(run_dir: str) -> list[dict]:
    data = json.loads((Path(run_dir) / "check.json").read_text())
    return [r for v in data["verdicts"] for r in v["rules"]]


def do_check(args: argparse.Namespace) -> None:
    runs = {r["label"]: r for r in json.loads((Path(args.out) / "runs.json").read_text())}
    pairs = [(f"Q{i + 1}", f"Q{i}") for i in range(len(runs)) if f"Q{i + 1}" in runs] + \
            [(f"B{i}", f"Q{i}") for i in range(len(runs)) if f"B{i}" in runs and f"Q{i}" in runs]
    results = []
    for cur, base in pairs:
        proc = subprocess.run(_cli("check", runs[cur]["dir"], "--baseline", runs[base]["dir"]),
                              capture_output=True, text=True, check=False, env={**os.environ, "COLUMNS": "200"})
        rules = _rules(runs[cur]["dir"])
        hist = [r for r in rules if r["rule"].startswith("history-throughput")]
        fails = [f"{r['mode']}:{r['rule']}" for r in rules if r["status"] == "FAIL"]
        res = {"current": cur, "baseline": base, "busy": runs[cur]["busy"], "exit": proc.returncode,
               "fails": fails,
               "history_throughput": [{"mode": r["mode"], "status": r["status"], "observed": r.get("observed"),
                                       "message": r["message"]} for r in hist]}
        results.append(res)
        obs = ", ".join(f"{h['mode']} {h['status']}" for h in res["history_throughput"])
        print(f"{cur} vs {base} ({'busy' if res['busy'] else 'quiet'}): exit {proc.returncode}; FAILs {fails or 0}; "
              f"history-throughput: {obs}", flush=True)
    (Path(args.out) / "aa.json").write_text(json.dumps(results, indent=1))
    n_fail = sum(1 for r in results if r["fails"])
    hist = [h for r in results for h in r["history_throughput"]]
    tally = {k: sum(1 for h in hist if h["status"] == k) for k in ("PASS", "FAIL", "INCONCLUSIVE")}
    disturbed = sum(1 for h in hist if h["message"].startswith("Measurement disturbed"))
    print(f"{len(results)} comparisons, {n_fail} with a FAIL; history-throughput rules: {tally} "
          f"({disturbed} of the INCONCLUSIVE say 'measurement disturbed')")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("phase", choices=["run", "check"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--suite", default="tests/fixtures/aa_toy.toml")
    ap.add_argument("--profile")
    ap.add_argument("--set", action="append")
    ap.add_argument("--seeds")
    ap.add_argument("--quiet", type=int, default=4)
    ap.add_argument("--busy", type=int, default=3)
    args = ap.parse_args()
    do_run(args) if args.phase == "run" else do_check(args)


if __name__ == "__main__":
    main()
