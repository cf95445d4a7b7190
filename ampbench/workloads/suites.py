"""A suite file loaded and checked all the way: the suite models (config/) and then the named
workload's own parameter model and cross-checks, each error as `file: key: reason`.

config/ knows nothing of workloads (it sits below them); this is where the two meet, so every
caller that needs a runnable suite (run, probe, import) gets the same checks.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from ampbench.config import DEFAULT_PROFILE, LoadedSuite, Suite
from ampbench.config import load_suite as load_suite_models
from ampbench.config.loading import error_reason, key_path
from ampbench.core.errors import ConfigError
from ampbench.workloads import get_workload_class


def check_workload(suite: Suite, file: str, profile: str = DEFAULT_PROFILE) -> None:
    """The `[workload]` table through the workload's own Params model, then its suite cross-checks."""
    where = file if profile == DEFAULT_PROFILE else f"{file} (profile {profile})"
    try:
        cls = get_workload_class(suite.suite.workload)
    except KeyError as e:
        raise ConfigError(where, "suite.workload", str(e.args[0])) from None
    try:
        params = cls.Params.model_validate(suite.workload)
    except ValidationError as e:
        err = e.errors()[0]
        raise ConfigError(where, "workload." + key_path(err["loc"], suite.workload), error_reason(err, cls.Params)) from None
    for key, reason in cls.check_suite(params, suite):
        raise ConfigError(where, key, reason)


def load_suite(path: str | Path, profile: str | None = None, has_gpu: bool = False,
               overrides: list[str] | None = None) -> LoadedSuite:
    """config.load_suite, then the workload's checks on the base and on the chosen profile."""
    loaded = load_suite_models(path, profile, has_gpu, overrides, on_valid=check_workload)
    return loaded
