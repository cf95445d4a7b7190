"""Suite keys retired before 0.1.0, each with what replaced it.  No model keeps a field for one: a suite file
(or a --set) that still sets it is refused in one line naming the key and the replacement (exit 2).

Earlier versions also wrote two of them into run.json's `config` (`RUN_JSON_KEYS`); nothing read them, so
such a run still opens, the keys dropped on read (results.run_dir.migrate_config).
"""

from __future__ import annotations

RETIRED: dict[str, str] = {
    "train.log_every": "retired: nothing read it (every step is recorded); drop the key",
    "thresholds.bootstrap_resamples": "retired: nothing read it (the speedup's interval is computed from the "
                                      "trials' step rates, not resampled); drop the key",
    "workload.loss_every_ms": "replaced by loss_every_steps: the loss is read at fixed step indices (steps 1, "
                              "1 + k, 1 + 2k, ...), so runs line up step for step; set loss_every_steps = K instead",
}
RUN_JSON_KEYS = ("train.log_every", "thresholds.bootstrap_resamples")


def retired(key: str) -> str | None:
    """What replaced a retired key (`section.key`), or None: not a retired key."""
    return RETIRED.get(key)
