#!/usr/bin/env bash
# The device check for the day a GPU is lent (scripts/gpu_check.py): one line per measured GPU fact
# (NVML process listing of this process and a child, energy over 1 s, allocator peak reset, clocks,
# device identity under CUDA_VISIBLE_DEVICES / MIG), bounded to 5 minutes. Needs only ampbench with
# its `gpu` extra and paddlepaddle-gpu.   bash scripts/gpu_check.sh
# Exit: 0 every fact measured (or n/a with its reason), 1 a FAIL line, 3 cannot run here (no GPU, or no
# Paddle in this interpreter: the facts that need none still printed), 124 it ran past 5 minutes.
set -euo pipefail
exec timeout 300 python3 "$(dirname "$0")/gpu_check.py" "$@"
