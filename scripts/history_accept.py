#!/usr/bin/env python
"""Real-run power acceptance of the pooled history baseline (issue 34): `check --history` against a series.

    # make the runs: 22 unchanged (U01..U22) and 4 with a planted 20% slowdown (S1..S4), interleaved
    python scripts/history_accept.py runs  --out /tmp/hist --set train.steps=1505
    # judge them: each run against the 10 unchanged runs made just before it, pooled from a history
    python scripts/history_accept.py check --out /tmp/hist

`runs` makes U01..U10 first, then S1 U11 U12 U13, S2 U14 U15 U16, ... (a planted run every fourth run,
so slow drift of the machine hits both kinds); the plant is scripts/aa_runs.py's: extra host work in
every optimizer step from a sitecustomize on PYTHONPATH, so neither the config nor ampbench changes.
`check` writes, for every judged run, a history folder holding the summary lines of the 10 unchanged
runs before it (ampbench.commands.history), then runs `ampbench check RUN --history THAT_FOLDER`: the
history rules compare against the trials of those runs (judge.pooled).  Acceptance: every planted run
FAILs history-throughput (>= 3 of 4 asked), no unchanged run from U11 on FAILs anything (12
comparisons).  It prints the load average before and after, what the statistic alone decided (a verdict the
interference evidence withholds as "measurement disturbed" on a saturated machine), and writes
OUT/history-accept.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from aa_runs import _cli, _plant_env, run_resumable  # the same plant as the issue-23 acceptance

from ampbench.core.files import atomic_write_text

WINDOW = 10


def order(unchanged: int, planted: int) -> list[tuple[str, bool]]:
    """U01..U(WINDOW), then a planted run before every three unchanged ones."""
    out = [(f"U{i:02d}", False) for i in range(1, WINDOW + 1)]
    u, s = WINDOW, 0
    while u < unchanged or s < planted:
        if s < planted:
            s += 1
            out.append((f"S{s}", True))
        for _ in range(3):
            if u < unchanged:
                u += 1
                out.append((f"U{u:02d}", False))
    return out


def one_run(args: argparse.Namespace, label: str, planted: bool) -> dict:
    out = Path(args.out) / label
    cmd = _cli("run", args.suite, "--out", str(out), "--no-report")
    for s in args.set or []:
        cmd += ["--set", s]
    env = _plant_env(Path(args.out), args.slow) if planted else dict(os.environ)
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    runs = sorted(p.parent for p in out.rglob("run.json"))
    if not runs:
        raise SystemExit(f"{label}: no run folder made (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return {"label": label, "planted": planted, "slow": args.slow if planted else 0.0, "dir": str(runs[-1]),
            "wall_s": round(time.time() - t0, 1), "run_exit": proc.returncode, "load": os.getloadavg()}


def do_runs(args: argparse.Namespace) -> None:
    run_resumable(Path(args.out) / "runs.json", order(args.unchanged, args.planted),
                  lambda label, planted: one_run(args, label, planted))


def _history_for(args: argparse.Namespace, runs: list[dict], i: int) -> Path | None:
    """A history folder of the WINDOW unchanged runs made before runs[i]; None when there are fewer."""
    from ampbench.commands.history import append_history

    before = [r for r in runs[:i] if not r["planted"]][-WINDOW:]
    if len(before) < WINDOW:
        return None
    hist = Path(args.out) / "histories" / runs[i]["label"]
    if not hist.is_dir():
        for r in before:
            append_history(Path(r["dir"]), hist)
    return hist


def do_check(args: argparse.Namespace) -> None:
    runs = json.loads((Path(args.out) / "runs.json").read_text())
    load0 = os.getloadavg()
    rows = []
    for i, r in enumerate(runs):
        hist = _history_for(args, runs, i)
        if hist is None:
            continue
        proc = subprocess.run(_cli("check", r["dir"], "--history", str(hist)), capture_output=True, text=True,
                              check=False, env={**os.environ, "COLUMNS": "200"})
        from ampbench.results.run_dir import RunDir

        data = json.loads(RunDir(r["dir"]).latest_check_path().read_text())
        rules = [x for v in data["verdicts"] for x in v["rules"]]
        hist_rules = [x for x in rules if x["rule"] == "history-throughput"]
        fails = [f"{x['mode']}:{x['rule']}" for x in rules if x["status"] == "FAIL"]
        good = bool(hist_rules) and all(x["status"] == "FAIL" for x in hist_rules) if r["planted"] else not fails
        # what the statistic alone decided, before the interference evidence withheld it (disturbed)
        shown = [x["mode"] for x in hist_rules if x["status"] == "FAIL" or "is demonstrated" in x["message"]]
        rows.append({"label": r["label"], "planted": r["planted"], "exit": proc.returncode, "fails": fails,
                     "ok": good, "load_when_made": r.get("load"), "slowdown_shown_by_the_statistic": shown,
                     "disturbed": [x["mode"] for x in hist_rules if x["message"].startswith("Measurement disturbed")],
                     "history": [{"mode": x["mode"], "status": x["status"], "change": x.get("observed"),
                                  "message": x["message"]} for x in hist_rules]})
        print(f"{r['label']} ({'planted' if r['planted'] else 'unchanged'}): exit {proc.returncode}; "
              + "; ".join(f"{h['mode']} {h['status']} {h['change']}" for h in rows[-1]["history"])
              + f"; FAILs {fails or 0}; {'ok' if good else 'NOT OK'}", flush=True)
    s = [x for x in rows if x["planted"]]
    u = [x for x in rows if not x["planted"]]
    print(f"planted: {sum(x['ok'] for x in s)} of {len(s)} FAILed history-throughput in every mode; unchanged: "
          f"{sum(1 for x in u if x['fails'])} of {len(u)} with a FAIL; load average {load0} -> {os.getloadavg()}")
    print(f"the statistic alone (before 'measurement disturbed' withheld a verdict): a slowdown shown in every mode "
          f"of {sum(1 for x in s if len(x['slowdown_shown_by_the_statistic']) == len(x['history']))} of {len(s)} "
          f"planted runs and in {sum(1 for x in u if x['slowdown_shown_by_the_statistic'])} of {len(u)} unchanged "
          f"runs; {sum(1 for x in rows if x['disturbed'])} of {len(rows)} comparisons disturbed")
    atomic_write_text(Path(args.out) / "history-accept.json", json.dumps(rows, indent=1))
    raise SystemExit(0 if sum(x["ok"] for x in s) >= 3 and not any(x["fails"] for x in u) and len(u) >= 12 else 1)


QUANTILES = 101  # per trial: its step times at 0%, 1%, ... 100%; the floor (5%) and median (50%) stay exact


def do_export(args: argparse.Namespace) -> None:
    """A compact copy of the runs for tests/test_history_replay.py: per trial its 101 step-time
    percentiles (the fast floor and the median figure are two of them, so they replay exactly) and its
    CPU evidence; about 1% of the run folders' size."""
    import numpy as np

    from ampbench.results.run_dir import RunDir

    runs = json.loads((Path(args.out) / "runs.json").read_text())
    out = []
    for r in runs:
        trials = []
        for t in RunDir(r["dir"]).load_trials():
            times = [s.time_s for s in t.measured_steps()]
            q = np.percentile(times, np.linspace(0, 100, QUANTILES)) if times else []
            inf = t.interference
            trials.append({"mode": t.mode, "seed": t.seed, "status": t.status,
                           "step_time_us": [round(float(x) * 1e6, 2) for x in q],
                           "cpu_share": inf.cpu_share if inf else None, "others_cpu": inf.others_cpu if inf else None})
        out.append({"label": r["label"], "planted": r["planted"], "load_when_made": r.get("load"), "trials": trials})
    dest = Path(args.export)
    atomic_write_text(dest, json.dumps({"made": "scripts/history_accept.py runs " + " ".join(f"--set {x}" for x in args.set or []),
                                "suite": args.suite, "runs": out}, separators=(",", ":")) + "\n")
    print(f"{dest}: {len(out)} runs, {dest.stat().st_size // 1024} KiB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("phase", choices=["runs", "check", "export"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--suite", default="tests/fixtures/aa_toy.toml")
    ap.add_argument("--set", action="append", help="--set KEY=VALUE for every run (e.g. train.steps=1505)")
    ap.add_argument("--unchanged", type=int, default=22)
    ap.add_argument("--planted", type=int, default=4)
    ap.add_argument("--slow", type=float, default=0.20, help="planted throughput loss (0.20 = 20%%)")
    ap.add_argument("--export", help="export: the compact JSON to write (tests/fixtures/history_real/NAME.json)")
    args = ap.parse_args()
    {"runs": do_runs, "check": do_check, "export": do_export}[args.phase](args)


if __name__ == "__main__":
    main()
