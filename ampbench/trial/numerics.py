"""Paddle's NaN/Inf checker around a trial's training steps, and the reader of its dumps.

`check_numerics = true` in a mode turns on `paddle.amp.debugging.TensorCheckerConfig` in the
non-aborting CHECK_NAN_INF mode: every op output of the training steps is checked, offending
ones are written to a dump file, training goes on, and the first offending op lands in the trial
(`Trial.numerics`).  `ampbench diagnose` uses the same hook at the CHECK_ALL level (every op's
max/min/mean) through the `AMPBENCH_NUMERICS_LEVEL` variable it sets for its worker processes.

The checker only runs between `begin(step)` and `end(step)`: evaluation stays unchecked, and the
dump lines can be attributed to steps.  Checking every op output costs time (and a device sync
per op on GPU), so a checked trial's step times are not a fair throughput sample: the record says so.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ampbench.core.opstat import OpStat
from ampbench.core.store import RunPaths

LEVEL_ENV = "AMPBENCH_NUMERICS_LEVEL"
DUMP_PREFIX = "worker_"  # Paddle names its dump files worker_<device>
# Paddle's DebugMode values (paddle.amp.debugging.DebugMode) under the names ampbench uses.
LEVELS = {"CHECK_NAN_INF": 1, "CHECK_ALL_FOR_OVERFLOW": 2, "CHECK_ALL": 3}
_ALIASES = {"1": 1, "nan_inf": 1, "2": 2, "overflow": 2, "3": 3, "all": 3}
TIMING_NOTE = ("Paddle's NaN/Inf checker inspected every op output during training: this trial's step times "
               "include its overhead and are not a fair throughput sample.")


def parse_level(text: str) -> int:
    """'all' / 'CHECK_ALL' / '3' -> 3 (Paddle's DebugMode value); aborting mode 0 is refused."""
    t = text.strip()
    level = LEVELS.get(t.upper()) or _ALIASES.get(t.lower())
    if level is None:
        raise ValueError(f"{LEVEL_ENV}={text!r}: expected one of {', '.join(LEVELS)} (or 1, 2, 3)")
    return level


def level_name(level: int) -> str:
    return next(k for k, v in LEVELS.items() if v == level)


def parse_dump_line(line: str) -> OpStat | None:
    """A `[PRECISION] ...` line -> OpStat, parsed with Paddle's own compare tool's parser."""
    if "[PRECISION]" not in line:
        return None
    from paddle.amp.accuracy_compare import TensorInfo

    info = TensorInfo().init_from_string(line)
    if not info.op_type:
        return None

    def f(v: Any) -> float:
        return float(v) if v is not None else float("nan")

    return OpStat(op=info.op_type, dtype=info.dtype or "", numel=int(info.numel or 0), max=f(info.max_value),
                  min=f(info.min_value), mean=f(info.mean_value), num_nan=int(info.has_nan or 0),
                  num_inf=int(info.has_inf or 0), num_zero=int(info.num_zero or 0), error="[ERROR]" in line)


def dump_files(dump_dir: Path) -> list[Path]:
    return sorted(p for p in Path(dump_dir).glob(DUMP_PREFIX + "*") if p.is_file())


def read_dump(dump_dir: Path, lines_per_step: list[int] | None = None) -> list[tuple[int, OpStat]]:
    """(step, OpStat) for every dump line; steps come from the hook's per-step line counts (0 if unknown)."""
    files = dump_files(dump_dir)
    if not files:
        return []
    out: list[tuple[int, OpStat]] = []
    bounds = _cumulative(lines_per_step or [])
    with open(files[0], encoding="utf-8", errors="replace") as fh:
        lines = [ln for ln in fh if ln.strip()]  # counted as the hook counts them
    for i, line in enumerate(lines):
        st = parse_dump_line(line)
        if st is not None:
            out.append((_step_of(i, bounds), st))
    return out


def _cumulative(counts: list[int]) -> list[int]:
    total, out = 0, []
    for c in counts:
        total += c
        out.append(total)
    return out


def _step_of(line_no: int, bounds: list[int]) -> int:
    for step, end in enumerate(bounds, start=1):
        if line_no < end:
            return step
    return 0


class NumericsHook:
    """Turns Paddle's tensor checker on for each training step and records what it found.

    `record` is the dict stored in `Trial.numerics`; it is updated in place after every step, so a
    trial that crashes mid-way still keeps the first offending op seen so far.
    """

    def __init__(self, level: int | None, dump_dir: Path | None):
        self.level, self.dump_dir = level, dump_dir
        self.record: dict[str, Any] | None = None
        self._offsets: dict[str, int] = {}
        self._partial = ""
        self._config: Any = None
        if level is None or dump_dir is None:
            return
        import paddle

        dump_dir.mkdir(parents=True, exist_ok=True)
        # Constructing an enabled TensorCheckerConfig re-seeds paddle/numpy/random (Paddle does this
        # for reproducible debugging): build the hook before the worker seeds the trial.
        self._config = paddle.amp.debugging.TensorCheckerConfig(
            enable=True, debug_mode=paddle.amp.debugging.DebugMode(level), output_dir=str(dump_dir),
            stack_height_limit=0,
        )
        self.record = {
            "level": level_name(level), "dump_dir": str(dump_dir), "steps_checked": 0, "first_bad": None,
            "first_bad_forward": None, "bad_steps": 0, "bad_ops": {}, "lines_per_step": [], "note": TIMING_NOTE,
        }

    @classmethod
    def for_trial(cls, check_numerics: bool, trial_path: str | Path, rank: int = 0,
                  env: Mapping[str, str] | None = None) -> NumericsHook:
        """The hook a worker needs: CHECK_NAN_INF for `check_numerics = true`, or the level diagnose asks for.

        Dumps go to <run folder>/numerics/<mode>__seed<k>/ (the trial file lives in <run folder>/trials/);
        data-parallel rank r > 0 dumps beside it, to <mode>__seed<k>.rank<r>/ (Paddle names the file
        after the device only, so ranks sharing a folder would interleave their lines).
        """
        env = os.environ if env is None else env
        level = parse_level(env[LEVEL_ENV]) if env.get(LEVEL_ENV) else (1 if check_numerics else None)
        if level is None:
            return cls(None, None)
        p = Path(trial_path)
        run = RunPaths.of_trial_file(p) or RunPaths(p.parent.parent)
        return cls(level, run.numerics_path(p.stem, rank))

    @property
    def active(self) -> bool:
        return self._config is not None

    def begin(self, step: int) -> None:
        if self.active:
            import paddle

            paddle.amp.debugging.enable_tensor_checker(self._config)

    def end(self, step: int) -> None:
        if not self.active:
            return
        import paddle

        paddle.amp.debugging.disable_tensor_checker()
        assert self.record is not None and self.dump_dir is not None
        lines = self._new_lines()
        rec = self.record
        rec["steps_checked"] = step
        rec["lines_per_step"].append(len(lines))
        bad = [s for s in (parse_dump_line(ln) for ln in lines) if s is not None and s.nonfinite]
        if bad:
            rec["bad_steps"] += 1
            for s in bad:
                rec["bad_ops"][s.op] = rec["bad_ops"].get(s.op, 0) + 1
            if rec["first_bad"] is None:
                rec["first_bad"] = {"step": step, **bad[0].to_dict()}
            fwd = next((s for s in bad if s.phase == "forward"), None)
            if rec["first_bad_forward"] is None and fwd is not None:
                rec["first_bad_forward"] = {"step": step, **fwd.to_dict()}

    def close(self) -> dict[str, Any] | None:
        """Turn the checker off for good (evaluation, teardown) and return the record."""
        if self.active:
            import paddle

            paddle.amp.debugging.disable_tensor_checker()
        return self.record

    def _new_lines(self) -> list[str]:
        """Complete lines appended to the dump file(s) since the last call."""
        assert self.dump_dir is not None
        text = self._partial
        for f in dump_files(self.dump_dir):
            off = self._offsets.get(f.name, 0)
            with open(f, "rb") as fh:
                fh.seek(off)
                chunk = fh.read()
            self._offsets[f.name] = off + len(chunk)
            text += chunk.decode("utf-8", errors="replace")
        lines = text.split("\n")
        self._partial = lines.pop()
        return [ln for ln in lines if ln.strip()]


