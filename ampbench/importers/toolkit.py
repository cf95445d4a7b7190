"""What every `ampbench import TOOLKIT CONFIG --repo CHECKOUT` shares (PaddleOCR, PaddleClas, PaddleSeg, PaddleRec):
the checkout checked and resolved, the config found in it, and the `[workload]` table of a command suite that
runs the toolkit's own trainer as its users run it.

- **The checkout first on PYTHONPATH**: a toolkit's `tools/train.py` imports its package (`paddleseg`, `ppcls`,
  `ppocr`) and Python puts the script's own folder, not the checkout, first on sys.path; a copy installed in
  site-packages (`setup.sh --test` installs PyPI's paddleseg 2.8.0) would shadow the checkout's.  The suite's
  `env = { PYTHONPATH = CHECKOUT }` puts the checkout ahead (ampbench's hook folder still first: trial/command.py).
- **The metric from the toolkit's own evaluation line**: the command preset that reads it
  (workloads/command/presets.py), named in the import's decisions.
- **The batch passed through**: every command carries `{batch_size}` in the toolkit's own flag, so a mode's
  `batch_size` (or `--set train.batch_size`) reaches the program; never kept in step by hand.
- **Synthetic data in the toolkit's format** (`--synthetic-data`): written by importers/toolkit_data.py beside
  the suite file (commands/imports.py picks the folder).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ampbench.core.errors import ConfigError
from ampbench.importers.base import braced


@dataclass(frozen=True)
class Toolkit:
    """One toolkit's trainer as its users run it."""

    name: str                 # "PaddleSeg"
    script: str               # its trainer, relative to the checkout: "tools/train.py"
    package: str              # a folder only a checkout has: "paddleseg"
    preset: str               # the metric preset that reads its log (workloads/command/presets.py)
    eval_line: str            # the line its evaluation prints, in words for the decisions
    batch_flag: str           # how its command takes the batch: "--batch_size {batch_size}"
    package_required: bool = True   # the package folder marks a checkout (PaddleOCR's stand-ins hold tools/ only)

    def checkout(self, repo: str | Path) -> Path:
        """The checkout, resolved; one line naming --repo when it is not one."""
        root = Path(repo).resolve()
        need_package = self.package_required and not (root / self.package).is_dir()
        if not (root / self.script).is_file() or need_package:
            both = f" and {self.package}/" if self.package_required else ""
            raise ConfigError(str(root), "--repo", f"not a {self.name} checkout: {self.script}{both} not found in it")
        return root

    def config(self, path: str | Path, checkout: Path) -> Path:
        """The config as given, or relative to the checkout as the toolkit's own docs name it."""
        p = Path(path)
        if not p.is_file() and not p.is_absolute() and (checkout / p).is_file():
            p = checkout / p
        return p.resolve()

    def workload(self, command: list[str], checkout: Path, **more: Any) -> dict[str, Any]:
        """The command suite's [workload]: the trainer run in the checkout with the checkout first on PYTHONPATH
        and the toolkit's metric preset.  `command` must pass the batch (`{batch_size}`)."""
        if not any("{batch_size}" in a for a in command):
            raise ValueError(f"{self.name}'s command must pass {{batch_size}} ({self.batch_flag})")
        return {"command": command, "cwd": braced(checkout), "env": tree_env(checkout),
                "metric": {"preset": self.preset}, **more}

    def decisions(self, py: str, config: Path, checkout: Path, metric: str) -> list[str]:
        """The import's decisions every toolkit states the same way."""
        return [f"program: {py} {self.script} on {config} in {checkout} (its model, data, augmentations; nothing "
                "translated)",
                f"PYTHONPATH: {checkout} first, so the checkout's {self.package} is imported, not an installed copy",
                f"batch: {self.batch_flag} (a mode's batch_size or --set train.batch_size reaches the program)",
                f"metric: {metric} from {self.name}'s own {self.eval_line}"]


def tree_env(checkout: Path) -> dict[str, str]:
    """The checkout ahead of any installed copy of the toolkit (the module docstring)."""
    return {"PYTHONPATH": braced(checkout)}
