"""`--resume RUN_DIR`: the rest of a run folder, exactly as its run.json plans it.

run.json is validated (schema, config, plan, names), and whatever the request or its policies ask that
would change the plan or the config is refused rather than silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ampbench.config import ConfigError, Suite
from ampbench.core.errors import ResultsError
from ampbench.core.files import safe_name
from ampbench.engine.request import DEFAULT_OUT, RunRequest
from ampbench.record.models import RunInfo
from ampbench.results.run_dir import RunDir, suite_of


@dataclass(frozen=True)
class Resumed:
    run: RunDir
    info: RunInfo
    suite: Suite
    plan: list[tuple[str, int]]


def _same_suite(given: Path, info: RunInfo) -> bool:
    if given.exists() and Path(info.suite_file).exists():
        return given.resolve() == Path(info.suite_file).resolve()
    return str(given) in (info.suite_file, info.suite, f"{info.suite}.toml")


def refuse_unhonoured(request: RunRequest, info: RunInfo, where: Path, policies: tuple[list[str], list[str]],
                      seeds: list[str]) -> None:
    """--resume finishes the run exactly as run.json plans it; what would change the plan or the config is
    refused: the request's options, the launcher's and the batch policy's (`policies`), the seed policy's
    (`seeds`: what it needs of run.json that this run does not hold)."""
    asked = (("--profile", request.profile), ("--mode", request.modes), ("--seeds", request.seeds),
             ("--set", request.overrides))
    given = [name for name, value in asked if value not in (None, ())]
    given += [*policies[0], *policies[1]]
    if Path(request.out_dir) != DEFAULT_OUT:
        given.append("--out")
    given += seeds
    if given:
        raise ConfigError("--resume", ", ".join(given),
                          f"not honoured: --resume finishes {where} as planned in its run.json (profile "
                          f"{info.profile!r}, {len(info.plan)} trials); start a new run to change the plan")
    if request.suite_file is not None and not _same_suite(Path(request.suite_file), info):
        raise ConfigError("--resume", str(request.suite_file),
                          f"{where} was run from suite {info.suite_file!r}; --resume always uses the config "
                          "recorded in run.json: drop the SUITE argument or give that one")


def load_resume(request: RunRequest, refuse: Callable[[RunInfo, Path], None]) -> Resumed:
    """The run folder given to --resume, run.json validated (schema, config, plan, names) once `refuse`
    (refuse_unhonoured over the request and its policies) has passed what was asked of it."""
    assert request.resume is not None
    run = RunDir(request.resume)
    info = run.load_run()
    where = run.run_json
    refuse(info, run.path)
    safe_name(info.suite, f"{where}: suite")
    suite = suite_of(info, where)
    if suite.suite.name != info.suite:
        raise ResultsError(f"{where}: suite {info.suite!r} but its config is suite {suite.suite.name!r}")
    plan = info.planned()
    unknown = sorted({m for m, _ in plan} - {m.name for m in suite.modes})
    if unknown:
        raise ResultsError(f"{where}: plan names mode(s) {unknown} that its config does not define")
    return Resumed(run=run, info=info, suite=suite, plan=plan)
