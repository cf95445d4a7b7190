#!/usr/bin/env bash
# Real-programs acceptance (issue 31): real training programs, unmodified, from import to verdict.
#
#   scripts/accept_real_programs.sh CHECKOUT [--python PY] [--out DIR] [--quick] [--steps "12 20"]
#
# CHECKOUT is a PaddleOCR checkout (release 2.8 era: tools/train.py, configs/det/det_mv3_db.yml), e.g.
#   git clone https://github.com/tink2123/PaddleOCR && git -C PaddleOCR checkout bf1c33f
# PY runs PaddleOCR's trainer (default python3; it needs PaddleOCR's requirements.txt, with numpy<2).
# It checks, on PaddleOCR's own tools/train.py:
#   1. the stock det_mv3_db.yml without data: exit 2 before any trial, one line naming the label file;
#   2. import with --synthetic-data (16 images) --no-pretrained; --set train.steps=5 refused up front in
#      one line; the cpu profile (12 steps) runs with hmean read; a 2-epoch copy of the config (16 steps
#      at batch 2) runs --set train.steps=20 (fp32): Global.epoch_num raised to 3, hmean read;
#   3. every record against the program's own log: steps recorded = asked, the metric = the log's last
#      `cur metric` hmean, the epochs and eval step in the log's config dump, samples/s vs its `ips`
#      lines, an op table without initialisers and with the optimizer's ops apart;
# and, from PyPI, paddle.Model.fit (hapi) and a paddleformers Trainer script wrapped as docs/command.md
# shows (tests/fixtures/command/*.py, nothing of ampbench in them). --quick runs fp32 only; --steps
# picks the PaddleOCR runs (12: the stock config, every mode; 20: the 2-epoch copy, fp32).
# Exit 0 when every check passed; each check prints PASS/FAIL and the numbers.
set -u -o pipefail

CHECKOUT=${1:?usage: scripts/accept_real_programs.sh CHECKOUT [--python PY] [--out DIR] [--quick]}
shift
PY=python3
OUT=""
QUICK=0
STEPS="12 20"
while [ $# -gt 0 ]; do
  case "$1" in
    --python) PY=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --steps) STEPS=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
HERE=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$(mktemp -d -t ampbench-accept-XXXXXX)}
mkdir -p "$OUT"
CHECKOUT=$(cd "$CHECKOUT" && pwd)
CFG="$CHECKOUT/configs/det/det_mv3_db.yml"
AMPBENCH=(python3 -m ampbench.cli)
FAILED=0
MODES=()
[ "$QUICK" = 1 ] && MODES=(--mode fp32)

check() {   # check NAME COMMAND...: PASS/FAIL line
  if "${@:2}"; then echo "PASS $1"; else echo "FAIL $1"; FAILED=1; fi
}

one_line_exit_2() {   # one_line_exit_2 NEEDLE LOGFILE CODE
  [ "$3" = 2 ] && [ "$(grep -c . "$2")" = 1 ] && grep -q "$1" "$2" && ! grep -q Traceback "$2"
}

echo "== out: $OUT"
# 1. the stock config without data
"${AMPBENCH[@]}" import paddleocr "$CFG" --repo "$CHECKOUT" --python "$PY" --no-pretrained -o "$OUT/nodata.toml" \
  >"$OUT/nodata.txt" 2>&1
code=$?
cat "$OUT/nodata.txt"
check "stock det_mv3_db.yml without data: exit 2, one line naming the label file" \
  one_line_exit_2 "train_icdar2015_label.txt" "$OUT/nodata.txt" "$code"

# 2. synthetic data, the refusal, the runs
"${AMPBENCH[@]}" import paddleocr "$CFG" --repo "$CHECKOUT" --python "$PY" --no-pretrained --synthetic-data \
  -o "$OUT/det.toml" >"$OUT/import.txt" 2>&1 || { cat "$OUT/import.txt"; echo "FAIL import"; exit 1; }
python3 -c "import sys, yaml; c = yaml.safe_load(open(sys.argv[1])); c['Global']['epoch_num'] = 2
yaml.safe_dump(c, open(sys.argv[2], 'w'))" "$CFG" "$OUT/det_2epochs.yml"
"${AMPBENCH[@]}" import paddleocr "$OUT/det_2epochs.yml" --repo "$CHECKOUT" --python "$PY" --no-pretrained \
  --synthetic-data -o "$OUT/det2.toml" >"$OUT/import2.txt" 2>&1 || { cat "$OUT/import2.txt"; echo "FAIL import"; exit 1; }
"${AMPBENCH[@]}" run "$OUT/det.toml" --profile cpu --set train.steps=5 --out "$OUT/runs5" >"$OUT/steps5.txt" 2>&1
code=$?
cat "$OUT/steps5.txt"
check "train.steps=5 refused up front in one line" one_line_exit_2 "the speed rule needs 10" "$OUT/steps5.txt" "$code"
check "train.steps=5: no run folder" test ! -e "$OUT/runs5"

for steps in $STEPS; do
  extra=("${MODES[@]}") suite="$OUT/det.toml" epochs=1200
  if [ "$steps" = 20 ]; then extra=(--mode fp32) suite="$OUT/det2.toml" epochs=3; fi   # 2 epochs hold 16 steps
  start=$(date +%s)
  "${AMPBENCH[@]}" run "$suite" --profile cpu --set "train.steps=$steps" "${extra[@]}" \
    --out "$OUT/runs$steps" --no-report >"$OUT/run$steps.txt" 2>&1
  code=$?
  echo "== train.steps=$steps: exit $code after $(( $(date +%s) - start )) s"
  cat "$OUT/run$steps.txt"
  check "train.steps=$steps: exit 3 (AMP inactive on CPU) or 0" test "$code" = 3 -o "$code" = 0
  python3 - "$OUT/runs$steps" "$steps" "$epochs" <<'EOF' || FAILED=1
import json, re, sys
from pathlib import Path

root, steps, want_epochs = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ok = True
for f in sorted(root.glob("*/*/trials/*.json")):
    t = json.loads(f.read_text())
    log = (f.parent.parent / "logs" / f"{f.stem}.log").read_text(errors="replace")
    evals = re.findall(r"cur metric, .*?hmean: ([-+.\deE]+)", log)
    epochs = re.findall(r"epoch: \[\d+/(\d+)\]", log)
    ips = t.get("workload_info", {}).get("throughput_check") or {}
    ops, apart = t["amp"]["op_calls"], t["amp"].get("optimizer_op_calls", {})
    init = sorted({"gaussian_random", "uniform_random", "truncated_gaussian_random"} & set(ops))
    checks = {
        "status ok": t["status"] == "ok",
        f"{steps} steps recorded": len(t["steps"]) == steps,
        "hmean = the log's last evaluation": bool(evals) and abs(t["metrics"].get("hmean", -1) - float(evals[-1])) < 1e-6,
        f"Global.epoch_num {want_epochs} in the log": bool(epochs) and epochs[-1] == want_epochs,
        f"one evaluation, after step {steps - 1}": len(evals) == 1 and f"after the 0th iteration, an evaluation is run every {steps - 1} iterations" in log,
        "no initialiser in the op table": not init,
        "optimizer ops apart": any(op.startswith("adam") for op in apart),
    }
    for name, good in checks.items():
        ok &= good
        print(("PASS" if good else "FAIL"), f"{f.stem}: {name}")
    print(f"     {f.stem}: wall {t['wall_s']:.0f} s, measured steps {t['throughput']['measured_steps']}, "
          f"ampbench {ips.get('ampbench_samples_per_s', 0):.4g} vs program ips {ips.get('program_samples_per_s', 0):.4g} "
          f"samples/s (ratio {ips.get('ratio', float('nan')):.3g}, {ips.get('lines', 0)} ips lines), "
          f"hmean {t['metrics'].get('hmean')}, epochs in the log {epochs[-1] if epochs else '?'}, "
          f"optimizer ops apart {sum(sum(c.values()) for c in apart.values())}, initialisers {init}")
sys.exit(0 if ok else 1)
EOF
done

# 3. paddle.Model.fit (hapi) and a paddleformers Trainer script, wrapped from docs/command.md
cat >"$OUT/hapi.toml" <<EOF
[suite]
name = "hapi"
workload = "command"
metric = "acc"
seeds = [0]
[workload]
command = ["python3", "$HERE/tests/fixtures/command/hapi_fit.py", "--epochs", "5", "--seed", "{seed}", "--batch-size", "{batch_size}"]
metric = { preset = "hapi" }
stop_after_steps = true
[train]
batch_size = 16
steps = 12
warmup_steps = 2
[[modes]]
name = "fp32"
[[modes]]
name = "amp-o1-fp16"
level = "O1"
args = ["--amp", "O1"]
EOF
cat >"$OUT/trainer.toml" <<EOF
[suite]
name = "trainer"
workload = "command"
metric = "eval_accuracy"
seeds = [0]
[workload]
command = ["python3", "$HERE/tests/fixtures/command/trainer_text_cls.py", "--output_dir", "{out}", "--max_steps", "{steps}",
           "--seed", "{seed}", "--per_device_train_batch_size", "{batch_size}", "--logging_steps", "4",
           "--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true", "--dataloader_num_workers", "0"]
metric = { preset = "trainer" }
[train]
batch_size = 16
steps = 12
warmup_steps = 2
[[modes]]
name = "fp32"
[[modes]]
name = "amp-o1-bf16"
level = "O1"
dtype = "bfloat16"
args = ["--bf16", "--fp16_opt_level", "O1"]
EOF
for s in hapi trainer; do
  if [ "$s" = trainer ] && ! python3 -c "import paddleformers" 2>/dev/null; then
    echo "SKIP trainer: paddleformers is not installed (pip install paddleformers)"; continue
  fi
  "${AMPBENCH[@]}" run "$OUT/$s.toml" --out "$OUT/runs-$s" --no-report >"$OUT/run-$s.txt" 2>&1
  code=$?
  cat "$OUT/run-$s.txt"
  check "$s: exit 3 (AMP inactive on CPU) or 0, every trial ok with 12 steps and its metric" python3 - "$OUT/runs-$s" "$code" <<'EOF'
import json, sys
from pathlib import Path
ts = [json.loads(p.read_text()) for p in Path(sys.argv[1]).glob("*/*/trials/*.json")]
sys.exit(0 if sys.argv[2] in ("0", "3") and ts and all(t["status"] == "ok" and len(t["steps"]) == 12 and t["metrics"]
                                                       for t in ts) else 1)
EOF
done

[ "$FAILED" = 0 ] && echo "ALL PASSED ($OUT)" || echo "SOME FAILED ($OUT)"
exit "$FAILED"
