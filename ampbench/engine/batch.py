"""The batch policies: the batch sizes as the suite configures them (`ConfiguredBatch`, the default), or
`run SUITE --at-max-batch [--probe DIR]`: every mode at the largest batch `ampbench probe` found (`AtMaxBatch`).

This is how the seed's claim is made: FP32 at the batch it fits against AMP at the (larger) batch it
fits, compared per sample.  The probe is the given folder (or its probe.json), else the newest finished
probe folder of the same suite and profile beside the runs (results.probe_file.find_probe: the same rule
the report and tune's max-batch rung use).  A mode the probe did not size (not probed, an
error, or not even batch 1 fitted) is refused with its reason: a run at a guessed batch would not be
the claim.  The batch sizes change the config hash: such a run is its own experiment.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rich.console import Console
from rich.markup import escape

from ampbench.config import ConfigError, Suite
from ampbench.core.store import RunPaths
from ampbench.engine.policy import Policy
from ampbench.results.probe_file import NoProbe, ProbeFile, find_probe


class BatchPolicy(Policy):
    """The batch each mode trains at; the base keeps the suite's."""

    PACKAGE: ClassVar[str] = "ampbench.engine.batch"
    _kinds: ClassVar[dict[str, type[Policy]]] = {}

    def apply(self, suite: Suite, out_dir: Path, profile: str, console: Console) -> Suite:
        """The suite at this policy's batch sizes (a new run, before its plan)."""
        return suite

    def unhonoured(self) -> list[str]:
        """--resume keeps the run's batch sizes: the options of another policy are refused."""
        return []


class ConfiguredBatch(BatchPolicy):
    """The batch sizes the suite (and its profile and --set) configure."""

    kind: ClassVar[str] = "configured"


class AtMaxBatch(BatchPolicy):
    """Every mode at the largest batch the probe found (`probe`: its folder or probe.json; None: the newest
    finished probe of the suite and profile beside the runs)."""

    kind: ClassVar[str] = "at-max-batch"
    probe: Path | None = None

    def apply(self, suite: Suite, out_dir: Path, profile: str, console: Console) -> Suite:
        probe, where = probe_for_run(out_dir, suite.suite.name, profile, self.probe)
        sized = at_max_batch(suite, probe, where)
        console.print(f"at the probe's largest batches ({escape(str(where))}): "
                      + ", ".join(f"{escape(m.name)} {m.batch_size}" for m in sized.modes))
        return sized

    def unhonoured(self) -> list[str]:
        return ["--at-max-batch", *(["--probe"] if self.probe is not None else [])]


def probe_for_run(out_dir: Path, suite: str, profile: str, given: Path | None) -> tuple[ProbeFile, Path]:
    """The probe that sizes this run (results.probe_file.find_probe, the one rule), or exit 2 naming the key."""
    try:
        return find_probe(Path(out_dir) / suite, suite, profile, given)
    except NoProbe as e:
        if e.kind == "none-beside":
            raise ConfigError("--at-max-batch", suite, f"{e} (run `ampbench probe` first, or give --probe DIR)") from None
        hint = "run `ampbench probe SUITE` first" if e.kind == "no-file" else "run `ampbench probe` on this suite"
        raise ConfigError("--probe", str(given), f"{e} ({hint})") from None


def at_max_batch(suite: Suite, probe: ProbeFile, where: Path) -> Suite:
    """The suite with every planned mode's batch set to the probe's largest batch."""
    modes = []
    for m in suite.modes:
        pm = probe.modes.get(m.name)
        if pm is None or pm.status != "ok" or not pm.max_batch:
            why = "not probed" if pm is None else (pm.error or "not even batch 1 fitted")
            raise ConfigError(str(RunPaths(where).probe_json), f"modes.{m.name}", f"no largest batch: {why}")
        modes.append(m.model_copy(update={"batch_size": pm.max_batch}))
    return Suite.model_validate({**suite.model_dump(mode="json"), "modes": [m.model_dump(mode="json") for m in modes]})
