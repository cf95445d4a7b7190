"""One bisect candidate's run in its own process (commands.bisect_side): `execute` on the RunOptions that
bisect wrote to OPTIONS.json, its exit code as this process's.  Not a user verb."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

from ampbench.commands.run import execute
from ampbench.commands.run_plan import RunOptions
from ampbench.core.files import parse_json, read_text
from ampbench.launch.process import install_signal_handlers
from ampbench.launch.slurm import SlurmOptions

PATH_FIELDS = ("suite_file", "out_dir", "resume", "baseline", "probe")


def options_from(path: Path) -> RunOptions:
    data = parse_json(read_text(path, "bisect candidate options"), path, "bisect candidate options")
    for key in PATH_FIELDS:
        if data.get(key) is not None:
            data[key] = Path(data[key])
    if data.get("slurm") is not None:
        data["slurm"] = SlurmOptions.model_validate(data["slurm"])
    return RunOptions(**data)


def main(argv: list[str]) -> int:
    install_signal_handlers()
    return execute(options_from(Path(argv[1])), console=Console(file=sys.stderr, width=160, no_color=True))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
