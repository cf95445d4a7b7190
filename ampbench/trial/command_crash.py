"""Why a user's program died, in the words the trial line can carry: the program's own last error
line (exception type and message, from its output's tail) and, for environment breaks ampbench can
name, the fix. The reason is otherwise only in the trial log's tail, not on the line a user reads.

Each known break is matched on the text the library itself prints (read in their sources or seen
in real runs), never on a guess:
- numpy 2 under modules built for numpy 1 (PaddleOCR 2.8's requirements leave numpy unpinned):
  numpy's `_multiarray_umath` import check prints "compiled using NumPy 1.x cannot be run in NumPy 2"
  / "module compiled against ABI version", and the importer then fails with
  "numpy.core.multiarray failed to import".
- paddleformers 0.4.1 beside pyarrow >= 22: its `datasets` pin still subclasses
  `pyarrow.PyExtensionType`, which pyarrow 22 removed ("has no attribute 'PyExtensionType'").
- paddleformers' --fp16 on a CPU Paddle: its trainer reads `GradScaler._cache_found_inf`, which a
  CPU build's scaler never sets ("object has no attribute '_cache_found_inf'").
- a module missing from the program's interpreter (`ModuleNotFoundError: No module named 'x'`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_ERROR_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)(?::\s.*)?$")
_MISSING = re.compile(r"No module named '([\w.]+)'")
KNOWN_BREAKS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("compiled using NumPy 1.x cannot be run in", "module compiled against ABI version",
      "numpy.core.multiarray failed to import", "_ARRAY_API not found"),
     "a module built for numpy 1 under numpy 2: install numpy<2 in the program's interpreter "
     "(pip install 'numpy<2')"),
    (("has no attribute 'PyExtensionType'",),
     "pyarrow >= 22 removed PyExtensionType, which this datasets/paddleformers still uses: "
     "pip install 'pyarrow<22'"),
    (("has no attribute '_cache_found_inf'",),
     "paddleformers' --fp16 needs a GPU Paddle (a CPU build's GradScaler never sets _cache_found_inf): "
     "on CPU run the fp32 and bf16 modes only (--mode)"),
)


def last_error(lines: Iterable[str]) -> str:
    """The program's own last error line, e.g. "FileNotFoundError: [Errno 2] No such file ...";
    "" when its output has none."""
    found = ""
    for line in lines:
        if _ERROR_LINE.match(line.rstrip()):
            found = line.strip()
    return found[:300]


def known_fix(lines: Iterable[str]) -> str:
    """The fix for an environment break ampbench recognises in the output's tail ("" if none)."""
    text = "\n".join(lines)
    for needles, fix in KNOWN_BREAKS:
        if any(n in text for n in needles):
            return fix
    missing = _MISSING.findall(text)
    if missing:
        return (f"the program's Python has no module {missing[-1]!r}: install it there (pip install "
                f"{missing[-1].split('.')[0]}, or its project's requirements)")
    return ""


def crash_text(lines: Iterable[str]) -> str:
    """"; the program said: ERROR (fix: ...)" for the trial line, or "" when nothing is known."""
    tail = list(lines)
    err, fix = last_error(tail), known_fix(tail)
    return (f"; the program said: {err}" if err else "") + (f" (fix: {fix})" if fix else "")
