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

The acceptance of issue 23 (an idle machine, nothing else running; take no numbers on a loaded one):

    python scripts/aa_runs.py accept --suite tests/fixtures/aa_toy.toml --pairs 12 --slow 0.20 \
        --max-seeds 12 --out /tmp/aa/accept          # add --affinity 0 for the pinned variant
    python scripts/aa_runs.py accept-check --out /tmp/aa/accept

The acceptance of issue 62 (identical code, one run of each pair under a busy loop per core; each pair
checked both ways, a planted slowdown against both kinds; every FAIL of identical code and every PASS of
the planted slowdown is an error):

    python scripts/aa_runs.py pairs --suite tests/fixtures/aa_toy.toml --pairs 6 --planted 4 --slow 0.20 \
        --set train.steps=150 --out /tmp/aa/pairs      # plus --set workload.* for ~11 ms steps
    python scripts/aa_runs.py pairs-check --out /tmp/aa/pairs
    python scripts/aa_runs.py pairs-export --out /tmp/aa/pairs    # -> tests/fixtures/baseline_pairs/pairs.json

`accept` makes Q0, then for i = 1..pairs: Qi = `run --until-decided --baseline Q(i-1)` (unchanged code)
and Si = the same with a planted code slowdown (`--slow`: extra host work in every optimizer step,
injected from a sitecustomize on PYTHONPATH, so neither the config nor ampbench changes).  Each run
judges itself against its baseline at the end (check-vs-Q(i-1).json).  `accept-check` tallies: every Si
must FAIL history-throughput (in every mode), no Qi may FAIL anything; it prints the seeds each run used.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ampbench.core.files import atomic_write_text


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


def run_resumable(manifest: Path, plan: list[tuple[str, bool]], make: Callable[[str, bool], dict]) -> None:
    """Make every (label, flag) of `plan` not yet in `manifest` (a JSON list of records with a "label"),
    writing the manifest after each run, so a killed session resumes where it stopped."""
    done = json.loads(manifest.read_text()) if manifest.is_file() else []
    have = {r["label"] for r in done}
    for label, flag in plan:
        if label in have:
            continue
        rec = make(label, flag)
        done.append(rec)
        manifest.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(manifest, json.dumps(done, indent=1))
        print(json.dumps(rec), flush=True)


def do_run(args: argparse.Namespace) -> None:
    # Interleave quiet and busy runs so slow drift of the shared machine hits both kinds.
    order = []
    for i in range(max(args.quiet, args.busy)):
        if i < args.quiet:
            order.append((f"Q{i}", False))
        if i < args.busy:
            order.append((f"B{i}", True))
    run_resumable(Path(args.out) / "runs.json", order, lambda label, busy: one_run(args, label, busy))


def _rules(run_dir: str) -> list[dict]:
    """The newest check of the run (check-vs-<baseline>.json after `check --baseline`, else check.json)."""
    from ampbench.results.run_dir import RunDir

    data = json.loads(RunDir(run_dir).latest_check_path().read_text())
    return [r for v in data["verdicts"] for r in v["rules"]]


# ---------------------------------------------------------------- issue 23 acceptance

PLANT = '''"""Planted code slowdown for scripts/aa_runs.py accept: extra host work in every optimizer step.

Every optimizer class that defines its own step() is patched (Adam, SGD ... override the base class's),
the classes defined later too; the nested call of a subclass's step into its base's spins once."""
import os, time
_F = float(os.environ.get("AMPBENCH_PLANT_SLOW", "0") or 0)
if _F > 0:
    import paddle
    _last, _depth = [None], [0]

    def _slowed(step):
        def _slow_step(self, *a, **k):
            _depth[0] += 1
            try:
                out = step(self, *a, **k)
            finally:
                _depth[0] -= 1
            if _depth[0]:
                return out
            now = time.perf_counter()
            if _last[0] is not None:  # spin for F / (1 - F) of the step so far: throughput x (1 - F)
                end = now + (now - _last[0]) * _F / (1 - _F)
                while time.perf_counter() < end:
                    pass
            _last[0] = time.perf_counter()
            return out
        return _slow_step

    _todo, _seen = [paddle.optimizer.Optimizer], set()
    while _todo:
        _cls = _todo.pop()
        if _cls not in _seen:
            _seen.add(_cls)
            if "step" in vars(_cls):
                _cls.step = _slowed(vars(_cls)["step"])
            _todo.extend(_cls.__subclasses__())
'''


def _plant_env(out: Path, slow: float) -> dict[str, str]:
    d = out / "plant"
    d.mkdir(parents=True, exist_ok=True)
    (d / "sitecustomize.py").write_text(PLANT)
    path = os.pathsep.join(x for x in (str(d), os.environ.get("PYTHONPATH", "")) if x)
    return {**os.environ, "PYTHONPATH": path, "AMPBENCH_PLANT_SLOW": str(slow)}


def accept_run(args: argparse.Namespace, label: str, baseline: str | None, slow: float) -> dict:
    out = Path(args.out) / label
    cmd = _cli("run", args.suite, "--out", str(out), "--no-report")
    if baseline is not None:
        cmd += ["--until-decided", "--max-seeds", str(args.max_seeds), "--baseline", baseline]
    for opt, val in (("--profile", args.profile), ("--seeds", args.seeds), ("--affinity", args.affinity)):
        if val:
            cmd += [opt, val]
    for s in args.set or []:
        cmd += ["--set", s]
    env = _plant_env(Path(args.out), slow) if slow > 0 else dict(os.environ)
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    runs = sorted(p.parent for p in out.rglob("run.json"))
    if not runs:
        raise SystemExit(f"{label}: no run folder made (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return {"label": label, "baseline": baseline, "slow": slow, "dir": str(runs[-1]),
            "wall_s": round(time.time() - t0, 1), "run_exit": proc.returncode}


def do_accept(args: argparse.Namespace) -> None:
    manifest = Path(args.out) / "accept.json"
    done = json.loads(manifest.read_text()) if manifest.is_file() else []
    have = {r["label"]: r for r in done}

    def keep(rec: dict) -> None:
        done.append(rec)
        have[rec["label"]] = rec
        manifest.parent.mkdir(parents=True, exist_ok=True)
        manifest.write_text(json.dumps(done, indent=1))
        print(json.dumps(rec), flush=True)

    if "Q0" not in have:
        keep(accept_run(args, "Q0", None, 0.0))
    for i in range(1, args.pairs + 1):
        base = have[f"Q{i - 1}"]["dir"]
        # the slowed run first, then the unchanged one: machine drift hits both kinds alike
        if f"S{i}" not in have:
            keep(accept_run(args, f"S{i}", base, args.slow))
        if f"Q{i}" not in have:
            keep(accept_run(args, f"Q{i}", base, 0.0))


def do_accept_check(args: argparse.Namespace) -> None:
    runs = json.loads((Path(args.out) / "accept.json").read_text())
    rows, ok = [], True
    for r in runs:
        if r["baseline"] is None:
            continue
        rules = _rules(r["dir"])
        hist = [x for x in rules if x["rule"] == "history-throughput"]
        fails = [f"{x['mode']}:{x['rule']}" for x in rules if x["status"] == "FAIL"]
        info = json.loads((Path(r["dir"]) / "run.json").read_text())
        seeds = (info.get("sequential") or {}).get("looks", [None])[-1]
        planted = r["slow"] > 0
        good = all(x["status"] == "FAIL" for x in hist) and bool(hist) if planted else not fails
        ok &= good
        rows.append({"label": r["label"], "planted": planted, "seeds": seeds, "fails": fails, "ok": good,
                     "history": [(x["mode"], x["status"], x.get("observed")) for x in hist]})
        print(f"{r['label']} ({'planted ' + format(r['slow'], '.0%') if planted else 'unchanged'}): seeds {seeds}; "
              f"history-throughput {[(m, s) for m, s, _ in rows[-1]['history']]}; FAILs {fails or 0}; "
              f"{'ok' if good else 'NOT OK'}", flush=True)
    s = [x for x in rows if x["planted"]]
    q = [x for x in rows if not x["planted"]]
    print(f"planted: {sum(x['ok'] for x in s)} of {len(s)} FAILed by history-throughput in every mode; "
          f"unchanged: {sum(1 for x in q if x['fails'])} of {len(q)} with a FAIL; median seeds planted "
          f"{_median([x['seeds'] for x in s])}, unchanged {_median([x['seeds'] for x in q])}")
    (Path(args.out) / "accept-result.json").write_text(json.dumps(rows, indent=1))
    raise SystemExit(0 if ok and len(q) >= 12 else 1)


def _median(v: list) -> float | None:
    v = sorted(x for x in v if x is not None)
    return None if not v else (v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2)


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


# ---------------------------------------------------------------- issue 62: pairs, one side under load

def pairs_run(args: argparse.Namespace, label: str, busy: bool, slow: float) -> dict:
    """One run of the pairs acceptance: under a busy loop per core when `busy`, with the planted slowdown when
    `slow` > 0; the machine's load average before and after (the machine is shared: it is part of the result)."""
    out = Path(args.out) / label
    cmd = _cli("run", args.suite, "--out", str(out), "--no-report", *[x for s in args.set or [] for x in ("--set", s)])
    env = _plant_env(Path(args.out), slow) if slow > 0 else dict(os.environ)
    load_before = os.getloadavg()
    procs = start_load(os.cpu_count() or 1) if busy else []
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    finally:
        stop_load(procs)
    runs = sorted(p.parent for p in out.rglob("run.json"))
    if not runs:
        raise SystemExit(f"{label}: no run folder made (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return {"label": label, "busy": busy, "slow": slow, "dir": str(runs[-1]), "wall_s": round(time.time() - t0, 1),
            "run_exit": proc.returncode, "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()]}


def do_pairs(args: argparse.Namespace) -> None:
    """A_i (no load added) and B_i (a busy loop per core) for i < pairs, then S_j (the planted slowdown), every
    other one under the busy loops; interleaved so the shared machine's drift hits every kind."""
    plan: list[tuple[str, tuple[bool, float]]] = []
    for i in range(max(args.pairs, args.planted)):
        if i < args.pairs:
            plan += [(f"A{i}", (False, 0.0)), (f"B{i}", (True, 0.0))]
        if i < args.planted:
            plan.append((f"S{i}", (i % 2 == 1, args.slow)))
    run_resumable(Path(args.out) / "pairs.json", plan, lambda label, how: pairs_run(args, label, *how))


def _evidence(run_dir: str) -> dict:
    """Median others_cpu and CPU share over the run's ok trials (what the checker weighed)."""
    import statistics
    others, shares = [], []
    for f in sorted((Path(run_dir) / "trials").glob("*.json")):
        t = json.loads(f.read_text())
        inf = t.get("interference") or {}
        if t.get("status") == "ok" and inf.get("others_cpu") is not None:
            others.append(inf["others_cpu"])
        if t.get("status") == "ok" and inf.get("cpu_share"):
            shares.append(inf["cpu_share"])
    return {"others_cpu": round(statistics.median(others), 2) if others else None,
            "cpu_share": round(statistics.median(shares), 2) if shares else None}


def do_pairs_check(args: argparse.Namespace) -> None:
    """Every pair both ways (A_i vs B_i, B_i vs A_i: identical code, one side loaded) and every planted run against
    the unchanged runs of its index (S_j vs A_j, S_j vs B_j).  Identical code must never FAIL, the planted
    slowdown never PASS; prints one line per comparison and the counts, writes OUT/pairs-result.json."""
    runs = {r["label"]: r for r in json.loads((Path(args.out) / "pairs.json").read_text())}
    pairs, planted_runs = sum(k.startswith("A") for k in runs), sum(k.startswith("S") for k in runs)
    todo = [(f"A{i}", f"B{i}") for i in range(pairs)] + [(f"B{i}", f"A{i}") for i in range(pairs)]
    todo += [(f"S{j}", f"{k}{j}") for j in range(planted_runs) for k in ("A", "B")]
    rows = []
    for cur, base in todo:
        if cur not in runs or base not in runs:
            continue
        proc = subprocess.run(_cli("check", runs[cur]["dir"], "--baseline", runs[base]["dir"]), capture_output=True,
                              text=True, check=False, env={**os.environ, "COLUMNS": "200"})
        hist = [r for r in _rules(runs[cur]["dir"]) if r["rule"] == "history-throughput"]
        rows.append({"current": cur, "baseline": base, "planted": runs[cur]["slow"] > 0, "exit": proc.returncode,
                     "current_busy": runs[cur]["busy"], "baseline_busy": runs[base]["busy"],
                     "current_evidence": _evidence(runs[cur]["dir"]), "baseline_evidence": _evidence(runs[base]["dir"]),
                     "history": [(r["mode"], r["status"], r.get("observed"),
                                  bool((r.get("details") or {}).get("disturbed"))) for r in hist]})
        x = rows[-1]
        print(f"{cur} ({'busy' if x['current_busy'] else 'no load added'}, {x['current_evidence']}) vs {base} "
              f"({'busy' if x['baseline_busy'] else 'no load added'}, {x['baseline_evidence']}): "
              + ", ".join(f"{m} {st}{' (disturbed)' if d else ''} {o if o is None else format(o, '+.1%')}"
                          for m, st, o, d in x["history"]), flush=True)
    same = [x for x in rows if not x["planted"]]
    planted = [x for x in rows if x["planted"]]
    fails = sum(any(st == "FAIL" for _, st, _, _ in x["history"]) for x in same)
    passes = sum(any(st == "PASS" for _, st, _, _ in x["history"]) for x in planted)
    caught = sum(bool(x["history"]) and all(st == "FAIL" for _, st, _, _ in x["history"]) for x in planted)
    print(f"identical code: {fails} of {len(same)} comparisons with a FAIL; planted {args.slow:.0%} slowdown: "
          f"{passes} of {len(planted)} with a PASS, {caught} FAILed in every mode")
    (Path(args.out) / "pairs-result.json").write_text(json.dumps(rows, indent=1))
    raise SystemExit(0 if fails == 0 and passes == 0 else 1)


def do_pairs_export(args: argparse.Namespace) -> None:
    """The pairs' runs reduced to what the history rule reads (each trial's measured step times in whole
    microseconds, its CPU evidence) with each run's conditions: tests/fixtures/baseline_pairs/pairs.json, replayed
    by tests/test_baseline_replay.py."""
    runs = json.loads((Path(args.out) / "pairs.json").read_text())
    out, samples = [], set()
    for r in runs:
        trials = []
        for f in sorted((Path(r["dir"]) / "trials").glob("*.json")):
            t = json.loads(f.read_text())
            measured = [st for st in t["steps"] if not st.get("warmup")]
            samples |= {st.get("samples") for st in measured}
            inf = t.get("interference") or {}
            trials.append({"mode": t["mode"], "seed": t["seed"], "status": t["status"],
                           "step_time_us": [round(st["time_s"] * 1e6) for st in measured],
                           "cpu_share": inf.get("cpu_share"), "others_cpu": inf.get("others_cpu")})
        out.append({k: r[k] for k in ("label", "busy", "slow", "loadavg_before", "loadavg_after")} | {"trials": trials})
    if len(samples) != 1:
        raise SystemExit(f"samples per step differ between steps: {sorted(samples)}")
    doc = {"made": "scripts/aa_runs.py pairs " + " ".join(f"--set {x}" for x in args.set or []),
           "suite": args.suite, "samples": samples.pop(), "runs": out}
    dest = Path(args.export)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"{dest}: {len(out)} runs, {dest.stat().st_size} bytes")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("phase", choices=["run", "check", "accept", "accept-check", "pairs", "pairs-check", "pairs-export"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--suite", default="tests/fixtures/aa_toy.toml")
    ap.add_argument("--profile")
    ap.add_argument("--set", action="append")
    ap.add_argument("--seeds")
    ap.add_argument("--quiet", type=int, default=4)
    ap.add_argument("--busy", type=int, default=3)
    ap.add_argument("--pairs", type=int, default=12, help="accept: unchanged and planted runs after Q0")
    ap.add_argument("--slow", type=float, default=0.20, help="accept: planted throughput loss (0.20 = 20%%)")
    ap.add_argument("--max-seeds", type=int, default=12, help="accept: --max-seeds of --until-decided")
    ap.add_argument("--affinity", default=None, help="accept: pin every trial (run --affinity)")
    ap.add_argument("--planted", type=int, default=4, help="pairs: planted runs (every other one under load)")
    ap.add_argument("--export", default="tests/fixtures/baseline_pairs/pairs.json", help="pairs-export: the fixture")
    args = ap.parse_args()
    if args.phase == "pairs" and "--pairs" not in sys.argv:
        args.pairs = 6
    {"run": do_run, "check": do_check, "accept": do_accept, "accept-check": do_accept_check, "pairs": do_pairs,
     "pairs-check": do_pairs_check, "pairs-export": do_pairs_export}[args.phase](args)


if __name__ == "__main__":
    main()
