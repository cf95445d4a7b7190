"""Fixed seeds (the default): the request's `--seeds`, else the suite's, and no more."""

from __future__ import annotations

from typing import ClassVar

from ampbench.engine.seeds.policy import SeedPolicy


class FixedSeeds(SeedPolicy):
    """The planned seeds are all the run trains."""

    kind: ClassVar[str] = "fixed"
