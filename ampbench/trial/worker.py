"""One trial in one process: seed, build, apply the precision mode, train, evaluate, write JSON.

Run as `python -m ampbench.trial.worker SPEC.json`. Progress goes to the runner as JSON lines on a
private channel (the original stdout); everything else Paddle or the workload prints goes to
stderr, which the runner saves as the trial's log. The trial file is written atomically, also
when training raises, so a failure is recorded with its traceback and the steps done so far.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Any, TextIO

from ampbench.config import ModeConfig, OptimizerConfig, Suite
from ampbench.launch.distributed import write_failure_note, writes_trial
from ampbench.launch.process import watch_parent
from ampbench.launch.spec import EVENT_PREFIX, TrialSpec
from ampbench.results import AmpInfo, EvalRecord, Interference, StepRecord, Trial, atomic_write_json
from ampbench.trackers import load

OOM_MARKERS = ("out of memory", "resourceexhausted", "resource_exhausted", "cannot allocate memory")


class Events:
    """The worker's private line channel to the runner."""

    def __init__(self, stream: TextIO | None):
        self.stream = stream

    def emit(self, **data: Any) -> None:
        if self.stream is not None:
            self.stream.write(EVENT_PREFIX + json.dumps(data) + "\n")
            self.stream.flush()


def seed_everything(seed: int) -> None:
    import numpy as np
    import paddle

    random.seed(seed)
    np.random.seed(seed)
    paddle.seed(seed)


def build_optimizer(cfg: OptimizerConfig, parameters: Any, total_steps: int) -> tuple[Any, Any]:
    """Optimizer plus LR scheduler (None for a constant rate); the scheduler steps once per update."""
    import paddle

    lr: Any = cfg.lr
    sched = None
    if cfg.schedule == "linear":
        sched = paddle.optimizer.lr.PolynomialDecay(cfg.lr, decay_steps=max(1, total_steps), end_lr=0.0, power=1.0)
    elif cfg.schedule == "cosine":
        sched = paddle.optimizer.lr.CosineAnnealingDecay(cfg.lr, T_max=max(1, total_steps))
    if cfg.lr_warmup_steps:
        sched = paddle.optimizer.lr.LinearWarmup(sched if sched is not None else cfg.lr,
                                                 warmup_steps=cfg.lr_warmup_steps, start_lr=0.0, end_lr=cfg.lr)
    if sched is not None:
        lr = sched
    clip = paddle.nn.ClipGradByGlobalNorm(cfg.grad_clip_norm) if cfg.grad_clip_norm else None
    common = {"learning_rate": lr, "parameters": parameters, "grad_clip": clip}
    if cfg.name == "adam":
        opt = paddle.optimizer.Adam(weight_decay=cfg.weight_decay or None, **common)
    elif cfg.name == "adamw":
        opt = paddle.optimizer.AdamW(weight_decay=cfg.weight_decay, **common)
    elif cfg.name == "momentum":
        opt = paddle.optimizer.Momentum(momentum=cfg.momentum, weight_decay=cfg.weight_decay or None, **common)
    else:
        opt = paddle.optimizer.SGD(weight_decay=cfg.weight_decay or None, **common)
    return opt, sched


def classify_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".lower()
    if isinstance(exc, MemoryError) or any(m in text for m in OOM_MARKERS):
        return "oom"
    return "crashed"


class Fault:
    """Injected failures for tests and acceptance checks (never set in a normal run)."""

    def __init__(self, kind: str | None, at_step: int):
        self.kind, self.at_step = kind, at_step

    def maybe(self, step: int) -> None:
        if self.kind is None or step != self.at_step:
            return
        if self.kind == "crash":
            raise RuntimeError(f"injected crash at step {step} (AMPBENCH_FAULT)")
        if self.kind == "oom":
            raise MemoryError(f"injected out of memory at step {step} (AMPBENCH_FAULT)")
        if self.kind == "hang":
            time.sleep(10**6)
        if self.kind == "exit":
            os._exit(13)  # dies like a segfault would: no trial file, the runner records it

    def poison(self, step: int) -> bool:
        return self.kind == "nan" and step >= self.at_step


class TrialRunner:
    """Holds the state of one trial so a failure can still be recorded with what was done."""

    def __init__(self, spec: TrialSpec, events: Events):
        self.spec, self.events = spec, events
        self.t_start = time.perf_counter()
        self.suite: Suite = spec.suite
        self.mode: ModeConfig = self.suite.mode(spec.mode)
        self.batch = spec.batch_size or self.suite.batch_size(self.mode)
        self.accum = self.suite.grad_accum(self.mode)
        self.steps_total = spec.steps or self.suite.train.steps
        self.trial = Trial(
            suite=self.suite.suite.name, workload=self.suite.suite.workload, mode=self.mode.name, seed=spec.seed,
            profile=spec.profile, status="crashed", config=self._effective_config(), config_hash=spec.config_hash,
            batch_size=self.batch, grad_accum=self.accum,
        )

    def _effective_config(self) -> dict[str, Any]:
        cfg = self.spec.suite.model_dump(mode="json")
        cfg["mode"] = self.mode.model_dump(mode="json")
        cfg["effective"] = {"batch_size": self.batch, "grad_accum": self.accum, "steps": self.steps_total}
        return cfg

    # ------------------------------------------------------------------ the trial
    def run(self) -> None:
        import paddle

        from ampbench.launch.distributed import Replicas, fault_applies
        from ampbench.trackers import device
        from ampbench.trackers.measure import MemoryTracker, StepClock, throughput
        from ampbench.trial.precision import Precision, collect_op_dtypes, low_precision_calls
        from ampbench.workloads import WorkloadContext, get_workload_class

        train = self.suite.train
        gpu = device.has_gpu()
        paddle.set_device("gpu" if gpu else "cpu")
        from ampbench.trial.flags import apply_flags
        self.trial.flags = apply_flags(self.suite.flags, self.mode.flags)
        replicas = Replicas.from_env(self.suite, self.mode)  # data parallel: a no-op for one process
        replicas.init()
        self.trial.world_size = replicas.world
        self.trial.env = device.environment()
        cls = get_workload_class(self.suite.suite.workload)
        params = cls.Params.model_validate(self.suite.workload)
        ctx = WorkloadContext(params=params, batch_size=self.batch, steps=self.steps_total, seed=self.spec.seed,
                              cache_dir=Path(self.spec.cache_dir), world_size=replicas.world, rank=replicas.rank)
        wl = cls(ctx)
        self.events.emit(event="phase", phase="prepare")
        wl.prepare()
        self.trial.workload_info = wl.describe()  # type: ignore[attr-defined]

        from ampbench.trial.numerics import NumericsHook  # built before seeding: Paddle's checker re-seeds

        numerics = NumericsHook.for_trial(self.mode.check_numerics, self.spec.trial_path, rank=replicas.rank)
        self.trial.numerics = numerics.record  # updated in place after every step
        seed_everything(self.spec.seed)
        model = wl.build_model()
        optimizer, sched = build_optimizer(train.optimizer, model.parameters(), self.steps_total)
        prec = Precision.build(self.mode)
        model, optimizer = prec.prepare(model, optimizer)
        prec.check_model(model)
        model = replicas.wrap(model)
        model.train()
        amp = AmpInfo(**prec.describe())
        self.trial.amp = amp

        batches = replicas.shard(wl.train_batches(self.spec.seed, self.batch), wl)
        clock, mem = StepClock(), MemoryTracker()
        fault = Fault(self.spec.fault if fault_applies() else None, self.spec.fault_step)
        stats_cm = contextlib.ExitStack()
        op_counts = stats_cm.enter_context(collect_op_dtypes())
        stats_open = True
        counts_total: dict[str, int] = {}
        consecutive_bad = 0
        diverge_after = train.diverge_after
        train_wall = 0.0
        self.events.emit(event="start", total=self.steps_total)
        window: load.LoadMark | None = None
        if train.warmup_steps == 0:
            mem.start()
        for step in range(1, self.steps_total + 1):
            warm = step <= train.warmup_steps
            window = window or (None if warm else load.mark())
            if step == train.warmup_steps + 1 and step > 1:
                mem.start()
            fault.maybe(step)
            numerics.begin(step)
            clock.start()
            cpu0 = time.process_time()
            loss_sum, samples, counts = 0.0, 0, {}
            for micro in range(self.accum):
                batch = next(batches)
                with prec.autocast(), replicas.micro_batch(model, micro, self.accum):
                    loss = wl.loss(model, batch)
                if fault.poison(step):
                    loss = loss * float("nan")
                if self.accum > 1:
                    loss = loss / self.accum
                prec.backward(loss)
                loss_sum += float(loss.item())
                samples += batch.samples
                for k, v in batch.counts.items():
                    counts[k] = counts.get(k, 0) + v
            replicas.sync_grads()
            loss_sum, samples, counts = replicas.reduce_step(loss_sum, samples, counts)
            outcome = prec.step(optimizer)
            if sched is not None:
                sched.step()
            dt = clock.stop()
            cpu_dt = time.process_time() - cpu0
            numerics.end(step)
            train_wall += dt
            if stats_open and step >= train.amp_stats_steps:
                stats_cm.close()
                stats_open = False
            rec = StepRecord(step=step, loss=loss_sum if math.isfinite(loss_sum) else None, time_s=dt,
                             loss_scale=outcome.loss_scale, found_inf=outcome.found_inf, samples=samples, warmup=warm,
                             cpu_s=cpu_dt)
            if not warm:
                for k, v in counts.items():
                    counts_total[k] = counts_total.get(k, 0) + v
            self.trial.steps.append(rec)
            self.trial.skipped_steps += int(outcome.found_inf)
            finite = math.isfinite(loss_sum)
            self.trial.nonfinite_losses += int(not finite)
            consecutive_bad = 0 if finite else consecutive_bad + 1
            self.events.emit(event="step", **rec.model_dump(mode="json"), raw_loss=repr(loss_sum))
            if consecutive_bad >= diverge_after:
                self.trial.status = "diverged"
                self.trial.error = f"loss was not finite for {consecutive_bad} consecutive steps (up to step {step})"
                break
            if train.eval_every and step % train.eval_every == 0 and step < self.steps_total:
                self._evaluate(wl, model, prec, step, train_wall)
        if stats_open:
            stats_cm.close()
        numerics.close()
        self.trial.memory = mem.stop()
        self.trial.interference = (self.trial.interference or Interference()).model_copy(
            update={"cpu_share": self.trial.cpu_share(), "others_cpu": load.others_cpu(window)})
        amp.op_calls = dict(op_counts)
        low = low_precision_calls(amp.op_calls)
        amp.active = bool(self.mode.amp and low > 0)
        amp.evidence = f"{low} low-precision op calls of {sum(sum(c.values()) for c in amp.op_calls.values())} " \
                       f"in the first {min(train.amp_stats_steps, len(self.trial.steps))} step(s)"
        if self.mode.amp and not amp.active:
            amp.inactive_reason = (
                f"AMP inactive on this device ({self.trial.env.device}): every op ran in float32"
                if not device.amp_supported(self.mode.dtype) else
                "AMP requested but no op ran in low precision (check the custom op lists)"
            )
        self.trial.throughput = throughput(self.trial.steps, counts_total)
        if self.trial.status != "diverged":
            self.trial.metrics = self._evaluate(wl, model, prec, len(self.trial.steps), train_wall,
                                                final=True)
            self.trial.status = "ok"
        self._time_to_target(wl)
        self.trial.workload_info = wl.describe()  # type: ignore[attr-defined]  # counts from training too
        replicas.finish(self.trial, model)  # per-rank memory, weight digests

    def _evaluate(self, wl: Any, model: Any, prec: Any, step: int, train_wall: float,
                  final: bool = False) -> dict[str, float]:
        self.events.emit(event="phase", phase="evaluate", step=step)
        model.eval()
        try:
            with prec.autocast():
                metrics = {k: float(v) for k, v in wl.evaluate(model).items()}
        finally:
            model.train()
        if self.suite.train.eval_every or not final:
            self.trial.evals.append(EvalRecord(step=step, wall_s=train_wall, metrics=metrics))
        self.events.emit(event="eval", step=step, metrics=metrics)
        return metrics

    def _time_to_target(self, wl: Any) -> None:
        target = self.suite.train.target
        if target is None:
            return
        from ampbench.judge.target import first_reach

        goal = wl.metric_goals.get(target.metric, "max")
        self.trial.time_to_target = first_reach(self.trial.evals, target.metric, target.value, goal)

    def write(self) -> None:
        atomic_write_json(Path(self.spec.trial_path), self.trial.to_json())


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m ampbench.trial.worker SPEC.json", file=sys.stderr)
        return 2
    # Private event channel = the original stdout; all other output (Paddle's prints) -> stderr/log.
    event_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    events = Events(os.fdopen(event_fd, "w", buffering=1))
    spec = TrialSpec.model_validate_json(Path(argv[0]).read_text())
    watch_parent()  # ends this process (every rank) if ampbench is gone, even SIGKILLed
    lead = writes_trial(spec.suite.model_dump(mode="json"))  # data parallel: only rank 0 reports and writes
    if not lead:
        events = Events(None)
    tr = TrialRunner(spec, events)
    code = 0
    try:
        tr.run()
    except BaseException as exc:  # recorded, never lost: the trial file says what happened
        tr.trial.status = classify_error(exc)  # type: ignore[assignment]
        tr.trial.error = "".join(traceback.format_exception(exc))[-8000:]
        traceback.print_exc()
        write_failure_note(tr.trial.status, tr.trial.error)
        code = 1
    tr.trial.wall_s = time.perf_counter() - tr.t_start
    if lead:
        tr.write()
    events.emit(event="done", status=tr.trial.status)
    return code


if __name__ == "__main__":
    sys.exit(main())
