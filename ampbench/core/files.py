"""File primitives every layer shares: the one atomic writer and the guarded readers.

Every write is atomic (temp file + rename, created with the process umask) so an interrupted run
never leaves half a file; reads name the file when it is missing, a folder or not UTF-8, and turn
OS and encoding errors into `ResultsError` (the CLI's exit 2). Versioned documents: core/docs.py.
"""

from __future__ import annotations

import errno
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from ampbench.core.errors import ResultsError


def _umask() -> int:
    """The process umask (read without changing it where /proc allows)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def os_reason(e: OSError | UnicodeDecodeError) -> str:
    """An OS or encoding error as a short reason with its errno name: `No space left on device (ENOSPC)`."""
    if isinstance(e, UnicodeDecodeError):
        return f"not UTF-8 text (byte {e.start})"
    name = errno.errorcode.get(e.errno or 0, "")
    text = e.strerror or str(e) or type(e).__name__
    return f"{text} ({name})" if name else text


_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def safe_name(name: object, what: str = "name") -> str:
    """A name read from a file (suite, device, run id), checked before it becomes part of a path:
    no separators, no `..`, nothing hidden; a tampered file cannot direct a write elsewhere."""
    if not isinstance(name, str) or not _SAFE_NAME.match(name) or ".." in name:
        raise ResultsError(f"{what} {name!r} cannot be used in a file name (letters, digits, '_', '.', '-' only)")
    return name


def _mode_for(path: Path) -> int:
    """An existing file keeps its permissions; a new one gets 0666 minus the process umask."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        return 0o666 & ~_umask()


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temp file in the same folder, then rename: readers see the old or the new file.
    OS errors (disk full, read-only, a folder in the way) become ResultsError naming the path."""
    path = Path(path)
    try:
        blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        if blocker is not None:
            raise NotADirectoryError(errno.ENOTDIR, f"{blocker} is a file, not a folder", str(blocker))
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir():
            raise IsADirectoryError(errno.EISDIR, "a folder is in the way", str(path))
        if path.exists() and not path.is_file():  # a device, FIFO or socket is never replaced by a result
            raise OSError(errno.EINVAL, "not a regular file; refusing to replace it", str(path))
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise ResultsError(f"{path}: cannot write: {os_reason(e)}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _mode_for(path))
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise ResultsError(f"{path}: cannot write: {os_reason(e)}") from None
        raise


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=False, allow_nan=True) + "\n")


def read_text(path: Path, what: str = "result file") -> str:
    """A file's text, or ResultsError naming it (missing, a folder, unreadable, not UTF-8)."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ResultsError(f"{p}: {what} not found") from None
    except IsADirectoryError:
        raise ResultsError(f"{p}: {what} expected, found a folder") from None
    except UnicodeDecodeError as e:
        raise ResultsError(f"{p}: {what} is not UTF-8 text (byte {e.start}); corrupt?") from None
    except OSError as e:
        raise ResultsError(f"{p}: cannot read {what}: {os_reason(e)}") from None


def read_json(path: Path, what: str = "result file") -> Any:
    text = read_text(path, what)
    try:
        return json.loads(text)
    except RecursionError:
        raise ResultsError(f"{path}: {what} is nested too deeply to be an ampbench file") from None
    except json.JSONDecodeError as e:
        raise ResultsError(f"{path}: {what} is not valid JSON ({e}); truncated or corrupt?") from None


# ---------------------------------------------------------------- log text helpers

LOG_TAIL_MARKER = "--- last log lines ---"  # older trial files carry the log tail inside `error` after this


def last_line(text: str | None, limit: int = 160) -> str:
    """The line of an error that says what went wrong: the exception line of a traceback, or the runner's
    own sentence for a killed trial (a log tail appended after LOG_TAIL_MARKER is ignored); "" if none."""
    head = (text or "").split(LOG_TAIL_MARKER)[0]
    lines = [ln.strip() for ln in head.strip().splitlines() if ln.strip()]
    return lines[-1][:limit] if lines else ""


def tail_lines(path: Path, lines: int = 30) -> str:
    """The last `lines` lines of a log file; "" when it is missing or unreadable (a log is evidence, not input)."""
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
