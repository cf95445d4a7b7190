"""Time and memory of `ampbench publish` on a large synthetic nightly history (issue 24: 100,000 runs in
under a minute and under 1 GB).

    python scripts/bench_publish.py [--runs 100000] [--modes 3] [--per-trial 3] [--keep DIR] [--run-dir RUN]

Writes one <suite>.jsonl of N history lines (three modes each, some FAIL runs so regressions exist, no
report pages), runs publish in a fresh process and prints wall seconds, peak RSS (ru_maxrss of the
child) and the site size. Take the numbers on an idle machine: on a loaded one they are upper bounds.
`--run-dir RUN`: every line names that run folder (a hostile or careless history, issue 59: one report
copy per line before, 7.5 min and 15 GB at 100,000 lines); publish makes its report once, for the line whose
run id the folder's run.json holds.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODES = ["fp32", "amp-o1-fp16", "amp-o2-fp16", "amp-o2-bf16"]


def history_line(i: int, n_modes: int, rng: random.Random, per_trial: int = 0, run_dir: str = "") -> str:
    day = 1_700_000_000 + i * 3600
    started = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(day))
    modes = {}
    for m in MODES[:n_modes]:
        amp = m != "fp32"
        verdict = ("FAIL" if rng.random() < 0.02 else "PASS") if amp else "not checked"
        modes[m] = {"mode": m, "amp_requested": amp, "amp_active": amp, "trials": 2, "ok": 2,
                    "samples_per_s": 1000 * (1.8 if amp else 1.0) * rng.uniform(0.95, 1.05),
                    "peak_bytes": int(6e9 * (0.6 if amp else 1.0) * rng.uniform(0.98, 1.02)),
                    "metric_mean": 0.8 + rng.gauss(0, 0.003), "metric_std": 0.002, "metric_n": 2,
                    "verdict": verdict, "flagged_rules": ["accuracy-parity"] if verdict == "FAIL" else []}
        if per_trial:  # what a line written since issue 34 carries for the pooled history baseline
            rate = modes[m]["samples_per_s"]
            modes[m]["floor_samples_per_s"] = rate * 1.05
            modes[m]["per_trial"] = [{"seed": s, "samples_per_s": rate * rng.uniform(0.97, 1.03),
                                      "floor_samples_per_s": rate * 1.05 * rng.uniform(0.99, 1.01),
                                      "metric": 0.8 + rng.gauss(0, 0.003), "peak_bytes": modes[m]["peak_bytes"],
                                      "cpu_share": 1.0, "others_cpu": 0.1, "cpu_count": 16} for s in range(per_trial)]
    return json.dumps({"schema": "ampbench.history/1", "suite": "ocr", "workload": "dbnet",
                       "run_id": f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime(day))}-{i % 10000:04d}",
                       "started": started, "git_sha": f"{rng.getrandbits(160):040x}", "metric": "hmean",
                       "verdict": "PASS", "modes": modes, "run_dir": run_dir})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--modes", type=int, default=3, choices=range(1, len(MODES) + 1))
    ap.add_argument("--keep", type=Path, help="write the history and site here instead of a temp folder")
    ap.add_argument("--per-trial", type=int, default=0, help="trials per mode kept in each line (pooled history)")
    ap.add_argument("--view", default="auto", choices=("auto", "interactive", "static"), help="publish --view")
    ap.add_argument("--run-dir", type=Path, help="every line names this run folder (its report made once)")
    a = ap.parse_args()
    work = a.keep or Path(tempfile.mkdtemp(prefix="ampbench-bench-publish-"))
    hist = work / "history"
    hist.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    with open(hist / "ocr.jsonl", "w", encoding="utf-8") as f:
        f.writelines(history_line(i, a.modes, rng, a.per_trial, str(a.run_dir or "")) + "\n" for i in range(a.runs))
    site = work / "site"
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "ampbench.cli", "publish", str(hist), "-o", str(site),
                        "--view", a.view],
                       capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    size = sum(p.stat().st_size for p in site.rglob("*") if p.is_file()) if site.exists() else 0
    print(f"runs {a.runs:,}  modes {a.modes}  exit {r.returncode}  wall {wall:.1f} s  peak RSS {peak_mb:,.0f} MB  "
          f"site {size / 2**20:,.1f} MiB ({sum(1 for _ in site.rglob('*.html')) if site.exists() else 0} pages)")
    if r.returncode:
        print(r.stderr[-2000:], file=sys.stderr)
    if a.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if r.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
