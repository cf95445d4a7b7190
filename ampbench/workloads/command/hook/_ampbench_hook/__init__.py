"""ampbench's start-up hook for a `command` trial: measures the user's own Paddle training, unedited.

The folder above (workloads/command/hook/) is put first on PYTHONPATH of the user's program, so
Python's `site` imports its sitecustomize at start-up, which runs the user's own sitecustomize and
then `boot.activate()`. This package imports nothing of the `ampbench` package (the user's
interpreter may not have it) and only the standard library until the program itself imports
paddle: the two ampbench modules it shares with the worker, record/wire.py (the event vocabulary) and
core/protocol.py (the environment names), are standard-library-only files loaded here by their path
(`_load`), so nothing is mirrored between the hook and the worker.

It does nothing unless protocol.HOOK_SOCKET_ENV names the worker's channel and the worker accepts
this process (the token it handed its child, and the sender is of the program's own process tree).
When the program's `import paddle` has finished (`boot`), it records per optimizer step (`steps`:
the wall time since the previous step's end, after a device synchronisation on GPU, minus
evaluations inside the loop; the loss the tensors backward() ran on, unscaled when a GradScaler
scaled them, read at the step boundary of steps 1, 1 + k, 1 + 2k, ... (k: protocol.HOOK_LOSS_EVERY_ENV); the
GradScaler's scale and found_inf), op dtype counts (`ops`), the allocator peak of the measured
window (`peaks`), the device and the model's Linear/conv shapes (`device`), and data waits and the
AMP decorate/DataParallel order (`patches`), what the AMP calls made used (`ampcalls`). Modules: state
(the shared state, the queue, the flusher, the connection), steps, ops, peaks, device, patches, ampcalls,
inject (amp = "inject"), saves, boot.
"""

from __future__ import annotations

import importlib.util
import os
import sys

_PACKAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..")


def _load(name: str, file: str):
    """ampbench's own FILE (a path below the package: record/wire.py) as module `name`, from its path
    (never `import ampbench`)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(_PACKAGE, *file.split("/")))
    if spec is None or spec.loader is None:
        raise ImportError(f"ampbench's {file} is not beside the hook")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module   # dataclasses and typing look a module up by name
    spec.loader.exec_module(module)
    return module


def load_emulator():
    """ampbench's trial/emulate package (standard library only at import) as `_ampbench_emulate`, from its
    path: loaded only for a mode's emulate = true (protocol.HOOK_EMULATE_ENV)."""
    found = sys.modules.get("_ampbench_emulate")
    if found is not None:
        return found
    folder = os.path.join(_PACKAGE, "trial", "emulate")
    spec = importlib.util.spec_from_file_location("_ampbench_emulate", os.path.join(folder, "__init__.py"),
                                                  submodule_search_locations=[folder])
    if spec is None or spec.loader is None:
        raise ImportError("ampbench's trial/emulate is not beside the hook")
    module = importlib.util.module_from_spec(spec)
    sys.modules["_ampbench_emulate"] = module
    spec.loader.exec_module(module)
    return module


wire = sys.modules.get("_ampbench_wire") or _load("_ampbench_wire", "record/wire.py")
protocol = sys.modules.get("_ampbench_protocol") or _load("_ampbench_protocol", "core/protocol.py")
