"""The `command` workload: benchmark the user's own training program (docs/command.md).

params.py (the [workload] table and placeholder checks), presets.py (metrics and throughput from
the program's own log and result files), workload.py (the registry entry), hook/ (the start-up
hook that measures the program from inside, importing nothing of ampbench).
"""

from __future__ import annotations

from pathlib import Path

HOOK_DIR = Path(__file__).resolve().parent / "hook"
