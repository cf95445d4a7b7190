"""Layer 1, config: suite files -> validated `Suite` models (models in suite.py, reading in loading.py)."""

from ampbench.config.loading import (
    LoadedSuite,
    deep_merge,
    load_suite,
    parse_override,
    read_toml,
    resolve_profile,
    validate_suite,
)
from ampbench.config.suite import (
    CLAIM_FIGURES,
    DEFAULT_PROFILE,
    REFERENCE_MODE,
    ClaimConfig,
    DistributedConfig,
    ModeConfig,
    OptimizerConfig,
    ScalerConfig,
    Suite,
    SuiteMeta,
    TargetConfig,
    Thresholds,
    TrainConfig,
)
from ampbench.core.errors import ConfigError

__all__ = [
    "CLAIM_FIGURES",
    "DEFAULT_PROFILE",
    "REFERENCE_MODE",
    "ClaimConfig",
    "ConfigError",
    "DistributedConfig",
    "LoadedSuite",
    "ModeConfig",
    "OptimizerConfig",
    "ScalerConfig",
    "Suite",
    "SuiteMeta",
    "TargetConfig",
    "Thresholds",
    "TrainConfig",
    "deep_merge",
    "load_suite",
    "parse_override",
    "read_toml",
    "resolve_profile",
    "validate_suite",
]
