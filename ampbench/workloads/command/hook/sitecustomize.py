"""ampbench's start-up hook for a `command` trial (the package `_ampbench_hook` beside this file
says what it measures and how).

This folder is put first on PYTHONPATH of the user's program, so Python's `site` imports this
module at start-up. It first runs the sitecustomize the user already had (the next one on
sys.path), so their start-up customisation still happens, then starts the hook, which does nothing
unless ampbench's worker named its channel in the environment and accepts this process.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _chain_user_sitecustomize() -> None:
    """Run the next sitecustomize on sys.path (the user's own), as if ours were not there."""
    paths = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", paths)
    if spec is None or spec.loader is None or spec.origin == __file__:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # theirs failed: say so, as site.py would, and go on
        print(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{type(exc).__name__}: {exc}",
              file=sys.stderr)



_chain_user_sitecustomize()
try:
    from _ampbench_hook import boot as _boot  # type: ignore[import-not-found]  # on the program's path: this folder
except Exception as _exc:  # never break the user's program: it runs unmeasured, and says why
    print(f"ampbench hook: not loaded: {type(_exc).__name__}: {_exc}", file=sys.stderr)
else:
    _boot.activate()
