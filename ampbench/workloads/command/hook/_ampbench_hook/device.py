"""What the hook says about the program's machine and model: the device it trains on, named at the
end of the first optimizer step (`name_device`), its Paddle and Python (`facts`), and the Linear/conv
layers of the model that trained (`audit_shapes`).

The device is named from the place the program trains on then (`paddle.device.get_device()`), not
at `import paddle`: a script that calls set_device("gpu:1") after its imports is polled on GPU 1,
and one that trains on CPU in a CUDA build is timed without a device sync (Paddle's synchronize
raises TypeError off a CUDAPlace, paddle/device/__init__.py). NVML is not read here: each step
event carries its end time and the device event names the GPU (CUDA variables, PCI bus id), so
ampbench's worker polls NVML over the program's process tree (ampbench/trial/command_gpu.py).
"""

from __future__ import annotations

import functools
import os
import sys
import time
import weakref
from typing import Any

from . import protocol
from .state import State

MAX_SHAPES = 2000   # Linear/conv layers the "shapes" event lists (its count says how many in all)


def _gpu_identity(paddle, ordinal: int) -> dict:
    """Which GPU this process trains on, for ampbench's worker, which polls it through NVML (this hook
    has no NVML): the CUDA variables NVML needs to map the device, and its PCI bus id from the CUDA
    driver (ctypes; None when the driver library does not answer)."""
    import ctypes

    ident: dict = {"cuda_env": {k: os.environ[k] for k in ("CUDA_VISIBLE_DEVICES", "FLAGS_selected_gpus",
                                                           "CUDA_DEVICE_ORDER") if k in os.environ}}
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        dev, buf = ctypes.c_int(0), ctypes.create_string_buffer(32)
        if (lib.cuInit(0) == 0 and lib.cuDeviceGet(ctypes.byref(dev), ctypes.c_int(ordinal)) == 0
                and lib.cuDeviceGetPCIBusId(buf, ctypes.c_int(32), dev) == 0):
            ident["pci_bus_id"] = buf.value.decode()
            raw = ctypes.create_string_buffer(16)   # cuDeviceGetUuid_v2: a MIG instance's own UUID under MIG
            if lib.cuDeviceGetUuid_v2(raw, dev) == 0:
                h = raw.raw.hex()
                ident["cuda_uuid"] = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    except Exception:
        pass
    return ident


def facts(paddle) -> dict:
    """The program's own Paddle and Python (its interpreter may not be ampbench's)."""
    facts = {"paddle": str(paddle.__version__), "python": sys.version.split()[0]}
    try:
        facts["paddle_commit"] = str(paddle.version.commit)[:12]
    except Exception:
        pass
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        facts["numpy"] = str(getattr(numpy, "__version__", ""))
    return facts


def _training_ordinal(paddle) -> int | None:
    """The GPU the program trains on now (its expected place, as set_device left it), None off a GPU."""
    try:
        if not paddle.is_compiled_with_cuda():
            return None
        where = str(paddle.device.get_device())
    except Exception:
        return None
    return int(where.rsplit(":", 1)[-1]) if where.startswith("gpu:") else None


def name_device(st: State) -> None:
    """At the first step's end: name the device the program trains on and choose the step's sync.
    Paddle's synchronize() without an argument syncs the *expected* place and raises TypeError when
    that is not a CUDAPlace (paddle/device/__init__.py, `synchronize`), so the hook binds it to the
    GPU named here, and syncs nothing when the program trains on CPU."""
    paddle = st.paddle
    st.ordinal = _training_ordinal(paddle)
    ev: dict = {"e": "device", "device": "cpu" if st.ordinal is None else "gpu"}
    if st.ordinal is not None:   # bound to the place, made once: a "gpu:N" string is parsed again at every call,
        try:                     # ~60% of the call's host time (scripts/bench_step_sync.py)
            where: Any = paddle.CUDAPlace(st.ordinal)
        except Exception:
            where = f"gpu:{st.ordinal}"
        st.sync = functools.partial(paddle.device.synchronize, where)
        try:
            ev["device_name"] = str(paddle.device.cuda.get_device_name(st.ordinal))
            ev["cuda"], ev["cudnn"] = str(paddle.version.cuda()), str(paddle.version.cudnn())
        except Exception:
            pass
        ev.update(_gpu_identity(paddle, st.ordinal), ordinal=st.ordinal)
        try:   # the first step's work ends before the second step's clock starts
            st.sync()
        except Exception as exc:
            st.sync = None
            st.emit(e="error", where="synchronize", error=f"{type(exc).__name__}: {exc}")
    st.emit(**ev)
    st.flush()   # once: the worker starts polling this GPU before the measured window opens


def wait_for_sampling(st: State) -> None:
    """Before the measured window opens on a GPU: wait for the worker's word that NVML samples this GPU
    (protocol.NVML_SAMPLING, sent once its first sample is taken; protocol.NVML_NONE: it will not), at most
    protocol.NVML_WAIT_S. The worker opens NVML when the device event of step 1 reaches it; a window opened before
    NVML's first sample would have no energy (issue 58.2). The wait is outside every step's time (the next
    step's clock starts after it); a worker that never answers costs the wait once, recorded as an error."""
    if st.ordinal is None or st.sock is None or st.nvml_word is not None:
        return
    import select

    t0 = time.perf_counter()
    try:
        ready, _, _ = select.select([st.sock], [], [], protocol.NVML_WAIT_S)
        st.nvml_word = st.sock.recv(16) if ready else b""
    except (OSError, ValueError):
        st.nvml_word = b""
    if st.nvml_word not in (protocol.NVML_SAMPLING, protocol.NVML_NONE):
        st.emit(e="error", where="nvml-wait", error=(f"no word from ampbench's worker that NVML samples this GPU "
                                                     f"after {time.perf_counter() - t0:.1f} s: the window opened "
                                                     "without it"))


def held_layer_ids(built: list) -> set:
    """The ids of every Layer that a Layer of `built` holds, at any depth: walked once each, with a stack.
    named_sublayers from every built Layer visits each subtree once per ancestor, through a generator per
    level, so its cost grows with the cube of the nesting depth (3000 nested Layers held step 1 for 24 s);
    this is linear, and never recurses."""
    held: set = set()
    stack = [sub for x in built for _, sub in x.named_children()]
    while stack:
        sub = stack.pop()
        if id(sub) not in held:
            held.add(id(sub))
            stack.extend(s for _, s in sub.named_children())
    return held


def _gemm_rows(paddle, root: Any) -> list:
    """[name, type, in, out] of the root's Linear and conv layers, read as ampbench's trackers/shapes.py
    reads them (a Linear weight is [in, out]; _ConvNd keeps its channels as given, paddle/nn/layer/conv.py)."""
    nn = paddle.nn
    conv = getattr(getattr(getattr(nn, "layer", None), "conv", None), "_ConvNd", None)
    rows = []
    for name, layer in root.named_sublayers(include_self=True):
        w = getattr(layer, "weight", None)
        if w is None or len(w.shape) < 2:
            continue
        if isinstance(layer, nn.Linear):
            rows.append([name or "Linear", "Linear", *[int(d) for d in w.shape[:2]]])
        elif conv is not None and isinstance(layer, conv):
            kind = type(layer).__name__
            rows.append([name or kind, kind, int(layer._in_channels), int(layer._out_channels)])
    return rows


def audit_shapes(st: State) -> None:
    """At the end of step 1, once: the Linear/conv layers of the model that trained, for ampbench's Tensor
    Core shape audit (trackers/shapes.py judges them; this hook cannot import ampbench). The model is
    among the Layers built before step 1: the roots (layers no other one holds, a DataParallel's wrapped
    model standing for it), named as named_sublayers names them (prefixed by class when several)."""
    try:
        paddle = st.paddle
        dp = getattr(paddle, "DataParallel", None)
        built = [x for x in list(st.layers.values()) if not (isinstance(dp, type) and isinstance(x, dp))]
        st.layers = weakref.WeakValueDictionary()
        inner = held_layer_ids(built)
        found = [(x, rows) for x in built if id(x) not in inner and (rows := _gemm_rows(paddle, x))]
        if len(found) > 1:
            found = [(x, [[f"{type(x).__name__}[{i}].{r[0]}", *r[1:]] for r in rows])
                     for i, (x, rows) in enumerate(found)]
        every = [r for _, rows in found for r in rows]
        st.emit(e="shapes", layers=[[str(r[0])[:200], *r[1:]] for r in every[:MAX_SHAPES]], count=len(every))
    except Exception as exc:   # never break the program: the audit is missing, and says why
        st.emit(e="error", where="shapes", error=f"{type(exc).__name__}: {exc}")
