"""What a bundled workload needs beyond ampbench's own dependencies, and the one command installing it.

`scripts/setup.sh` is light by default (toy, resnet); the ocr, bert and ctr suites' packages come with
`setup.sh --suites NAME`. A run of such a suite without them would start, and each trial would crash on
its first import; `missing` lets the runner refuse it before anything starts, naming the command.
Modules are looked up with importlib's finders, not imported (paddleocr edits sys.path on import).
"""

from __future__ import annotations

import importlib.util

from ampbench.core.install import install_hint

# workload -> (the setup.sh suite name, the top-level modules its code imports)
NEEDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "dbnet": ("ocr", ("paddleocr", "shapely", "pyclipper", "skimage", "cv2", "yaml")),
    "bert": ("bert", ("paddleformers", "tokenizers")),
    "ctr": ("ctr", ("sklearn", "pyarrow")),
}


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def missing(workload: str) -> str | None:
    """None when the workload's packages are installed (or it needs none); else one sentence naming the
    missing modules and the command that installs them."""
    if workload not in NEEDS:
        return None
    suite, modules = NEEDS[workload]
    absent = [m for m in modules if not _installed(m)]
    if not absent:
        return None
    return (f"the {workload} workload needs {', '.join(absent)}, not installed here; install the {suite} suite's "
            f"extras with: {install_hint(suite)}")
