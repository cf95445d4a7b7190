"""How a failure is classified, and the failures tests inject (AMPBENCH_FAULT / spec.fault)."""

from __future__ import annotations

import os
import time

from ampbench.record.models import Status

# Paddle raises ResourceExhaustedError ("out of memory") from its allocator, but a cuBLAS/cuDNN
# workspace that cannot be allocated surfaces as an External error naming the library's status
# (CUBLAS_STATUS_ALLOC_FAILED, CUDNN_STATUS_ALLOC_FAILED): both are the memory boundary.
OOM_MARKERS = ("out of memory", "resourceexhausted", "resource_exhausted", "cannot allocate memory",
               "cublas_status_alloc_failed", "cudnn_status_alloc_failed", "cudaerrormemoryallocation",
               "cuda_error_out_of_memory")


def classify_error(exc: BaseException) -> Status:
    text = f"{type(exc).__name__}: {exc}".lower()
    if isinstance(exc, MemoryError) or any(m in text for m in OOM_MARKERS):
        return "oom"
    return "crashed"


class Fault:
    """Injected failures for tests and acceptance checks (never set in a normal run)."""

    def __init__(self, kind: str | None, at_step: int):
        self.kind, self.at_step = kind, at_step

    def maybe(self, step: int) -> None:
        if self.kind is None or step != self.at_step:
            return
        if self.kind == "crash":
            raise RuntimeError(f"injected crash at step {step} (AMPBENCH_FAULT)")
        if self.kind == "oom":
            raise MemoryError(f"injected out of memory at step {step} (AMPBENCH_FAULT)")
        if self.kind == "hang":
            time.sleep(10**6)
        if self.kind == "exit":
            os._exit(13)  # dies like a segfault would: no trial file, the runner records it

    def poison(self, step: int) -> bool:
        return self.kind == "nan" and step >= self.at_step
