"""One run of a round side by side (engine.side_by_side) in its own process: `execute` on the request and
policies written to OPTIONS.json, its exit code as this process's.  Not a user verb."""

from __future__ import annotations

import sys
from pathlib import Path

from ampbench.core.files import read_text
from ampbench.core.json_read import parse_json
from ampbench.core.terminal import TerminalConsole
from ampbench.engine.execute import Policies, execute
from ampbench.engine.request import RunRequest
from ampbench.launch.process import install_signal_handlers


def options_from(path: Path) -> tuple[RunRequest, Policies]:
    data = parse_json(read_text(path, "run options"), path, "run options")
    return RunRequest.model_validate(data["request"]), Policies.from_json(data, str(path))


def main(argv: list[str]) -> int:
    install_signal_handlers()
    request, policies = options_from(Path(argv[1]))
    return execute(request, policies, console=TerminalConsole(file=sys.stderr, width=160, no_color=True))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
