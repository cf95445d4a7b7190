"""`ampbench run SUITE --at-max-batch [--probe DIR]`: every mode at the largest batch `ampbench probe` found.

This is how the seed's claim is made: FP32 at the batch it fits against AMP at the (larger) batch it
fits, compared per sample.  The probe is the given folder (or its probe.json), else the newest probe
folder of the same suite and profile beside the runs.  A mode the probe did not size (not probed, an
error, or not even batch 1 fitted) is refused with its reason: a run at a guessed batch would not be
the claim.  The batch sizes change the config hash: such a run is its own experiment.
"""

from __future__ import annotations

from pathlib import Path

from ampbench.config import ConfigError, Suite
from ampbench.core.store import RunPaths
from ampbench.results.probe_file import ProbeFile, load_probe, newest_probe


def find_probe(out_dir: Path, suite: str, profile: str, given: Path | None) -> tuple[ProbeFile, Path]:
    if given is not None:
        folder = given.parent if given.name == RunPaths(given.parent).probe_json.name else given
        probe = load_probe(folder)
        if probe is None:
            raise ConfigError("--probe", str(given), "no probe.json there (run `ampbench probe SUITE` first)")
        if probe.suite != suite or probe.profile != profile:
            raise ConfigError("--probe", str(given), f"a probe of suite {probe.suite!r}, profile {probe.profile!r}; "
                              f"this run is suite {suite!r}, profile {profile!r}: its batches were found for another "
                              "program (run `ampbench probe` on this suite)")
        return probe, folder
    root = Path(out_dir) / suite
    found = newest_probe(root, suite, profile, finished=True)
    if found is None:
        raise ConfigError("--at-max-batch", suite, f"no finished probe of suite {suite!r}, profile {profile!r} "
                                                  f"under {root} (run `ampbench probe` first, or give --probe DIR)")
    return found


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
