"""Hand-made suites, trials and run folders for tests (no paddle, no subprocess).

`make_trial` builds a Trial with explicit or simulated step times, loss, loss scale and found_inf;
`make_run` writes run.json + trials/ exactly as the runner does, so check/report/baseline code
can be tested on folders whose every number is known.  `StepNoise` is the throughput noise model
used by the simulation tests (log-normal per-step jitter, rare stalls, a per-trial level).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ampbench.config import Suite
from ampbench.core.docs import write_doc
from ampbench.results import AmpInfo, Env, Memory, RunDir, RunInfo, StepRecord, Trial, atomic_write_json

GPU_ENV = Env(paddle="3.3.1", device="gpu:0", device_name="NVIDIA Test GPU 24GB", cuda="12.6", python="3.11")
CPU_ENV = Env(paddle="3.3.1", device="cpu", device_name="", python="3.11")


@dataclass(frozen=True)
class StepNoise:
    """Per-step time = base x trial level x log-normal jitter, with occasional stalls (GC, I/O)."""

    step_sd: float = 0.05
    trial_sd: float = 0.015
    stall_rate: float = 0.02
    stall_max: float = 3.0

    def times(self, rng: np.random.Generator, n: int, base: float, level: float | None = None) -> np.ndarray:
        lvl = np.exp(rng.normal(0, self.trial_sd)) if level is None else level
        t = base * lvl * np.exp(rng.normal(0, self.step_sd, n))
        stalls = rng.random(n) < self.stall_rate
        t[stalls] *= rng.uniform(1.5, self.stall_max, stalls.sum())
        return t


def make_suite(
    modes: Sequence[str] = ("fp32", "amp-o1-fp16"),
    seeds: Sequence[int] = (0, 1, 2),
    metric: str = "accuracy",
    goal: str = "max",
    name: str = "toy",
    **thresholds: Any,
) -> Suite:
    mode_list = [{"name": m} if m == "fp32" else {"name": m, "level": "O2" if "o2" in m else "O1",
                                                   "dtype": "bfloat16" if "bf16" in m else "float16"} for m in modes]
    return Suite.model_validate({
        "suite": {"name": name, "workload": "toy", "metric": metric, "metric_goal": goal, "seeds": list(seeds)},
        "train": {"steps": 40, "warmup_steps": 5, "batch_size": 8},
        "modes": mode_list,
        "thresholds": thresholds,
    })


def plan_of(suite: Suite) -> list[tuple[str, int]]:
    return [(m.name, s) for m in suite.modes for s in suite.suite.seeds]


def make_steps(
    times: Sequence[float],
    warmup: int = 0,
    samples: int = 8,
    loss: Sequence[float | None] | Callable[[int], float] | None = None,
    loss_scale: Sequence[float | None] | None = None,
    found_inf: Sequence[bool] | None = None,
) -> list[StepRecord]:
    """Steps 1..len(times); the first `warmup` are warm-up; loss defaults to a falling curve."""
    n = len(times)
    out = []
    for i in range(n):
        if loss is None:
            lv: float | None = 2.0 * float(np.exp(-3.0 * i / max(1, n))) + 0.1
        elif callable(loss):
            lv = loss(i)
        else:
            lv = loss[i]
        out.append(StepRecord(
            step=i + 1, loss=lv, time_s=float(times[i]), samples=samples, warmup=i < warmup,
            loss_scale=None if loss_scale is None else loss_scale[i],
            found_inf=bool(found_inf[i]) if found_inf is not None else False,
        ))
    return out


def make_trial(
    mode: str = "fp32",
    seed: int = 0,
    suite: str = "toy",
    status: str = "ok",
    metric: float | None = 0.9,
    metric_name: str = "accuracy",
    times: Sequence[float] | None = None,
    warmup: int = 5,
    samples: int = 8,
    amp_active: bool | None = None,
    peak_bytes: int = 1 << 30,
    memory_source: str = "cuda",
    loss: Any = None,
    loss_scale: Sequence[float | None] | None = None,
    found_inf: Sequence[bool] | None = None,
    env: Env = GPU_ENV,
    config_hash: str = "",
    **extra: Any,
) -> Trial:
    """One trial; `amp_active` defaults to True for AMP modes (a GPU-like trial)."""
    amp = mode != "fp32"
    active = amp if amp_active is None else amp_active
    times = [0.05] * 40 if times is None else list(times)
    steps = make_steps(times, warmup, samples, loss, loss_scale, found_inf)
    ops = {"matmul_v2": {"float16": 10, "float32": 0}} if active else {"matmul_v2": {"float16": 0, "float32": 10}}
    data: dict[str, Any] = {
        "schema": "ampbench.trial/1", "suite": suite, "workload": "toy", "mode": mode, "seed": seed, "status": status,
        "config_hash": config_hash, "env": env, "batch_size": samples,
        "amp": AmpInfo(requested=amp, active=active, level="O1" if amp else "O0", dtype="float16" if amp else "float32",
                    op_calls=ops, inactive_reason="" if active or not amp else "CPU: AMP is a no-op",
                    inactive_code="" if active or not amp else "device"),  # as the worker records a CPU trial
        "steps": steps,
        "memory": Memory(source=memory_source, peak_allocated_bytes=peak_bytes, rss_peak_bytes=peak_bytes * 2),
        "metrics": {} if metric is None else {metric_name: metric},
        "skipped_steps": sum(1 for s in steps if s.found_inf),
        "error": None if status == "ok" else "Traceback ...\nRuntimeError: boom",
    }
    data.update(extra)
    return Trial.model_validate(data)


def make_trials(
    suite: Suite,
    metrics: dict[str, Sequence[float]] | None = None,
    base_time: dict[str, float] | None = None,
    peak: dict[str, int] | None = None,
    rng: np.random.Generator | None = None,
    noise: StepNoise = StepNoise(),
    n_steps: int = 60,
    warmup: int = 5,
    wall_clock: float | None = None,
    **kw: Any,
) -> list[Trial]:
    """A full matched set: every mode x seed of the suite, with seeded noisy step times.  `wall_clock`: the
    unix time the first trial starts, the trials then one after another in the runner's seed-major order
    (started_unix / ended_unix, as Trial records them); None: not recorded."""
    rng = rng or np.random.default_rng(0)
    out = []
    for m in suite.modes:
        for i, s in enumerate(suite.suite.seeds):
            t = noise.times(rng, n_steps, (base_time or {}).get(m.name, 0.05))
            mv = (metrics or {}).get(m.name)
            out.append(make_trial(
                m.name, s, suite=suite.suite.name, metric=0.9 if mv is None else mv[i],
                metric_name=suite.suite.metric, times=t, warmup=warmup,
                peak_bytes=(peak or {}).get(m.name, 1 << 30), **kw))
    return with_wall_clock(out, suite, wall_clock) if wall_clock is not None else out


def with_wall_clock(trials: list[Trial], suite: Suite, start: float) -> list[Trial]:
    """The trials one after another from unix time `start` in the runner's seed-major order (fp32 s0, amp s0,
    fp32 s1, ...): each trial's started_unix / ended_unix, 1 s between trials."""
    order = {(m.name, s): k for k, (s, m) in enumerate((s, m) for s in suite.suite.seeds for m in suite.modes)}
    out = []
    for t in trials:
        at = start + 10.0 * order.get((t.mode, t.seed), 0)
        out.append(t.model_copy(update={"started_unix": at, "ended_unix": at + 9.0}))
    return out


def make_run(
    root: Path,
    suite: Suite,
    trials: Iterable[Trial],
    plan: Sequence[tuple[str, int]] | None = None,
    profile: str = "default",
    run_id: str = "r1",
    env: Env = GPU_ENV,
) -> Path:
    """A run folder the way the runner writes it: run.json (config = effective suite) + trials/."""
    path = Path(root) / suite.suite.name / run_id
    rd = RunDir(path)
    rd.write_run(RunInfo(
        suite=suite.suite.name, suite_file=f"suites/{suite.suite.name}.toml", profile=profile, run_id=run_id,
        config_hash=suite.config_hash(), plan=[{"mode": m, "seed": s} for m, s in (plan or plan_of(suite))],
        config=suite.model_dump(mode="json"), env=env, started="2025-01-01T00:00:00Z",
    ))
    for t in trials:
        write_trial(rd, t)
    return path


def write_trial(run: RunDir, t: Trial) -> Path:
    """A trial file where the launcher writes it (the spec's trial_path is RunDir.trial_path)."""
    p = run.trial_path(t.mode, t.seed)
    write_doc(p, t)
    return p


def write_json(path: Path, data: Any) -> Path:
    atomic_write_json(path, data)
    return path
