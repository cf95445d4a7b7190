"""File primitives every layer shares: the one atomic writer and the guarded readers.

Every write is atomic (temp file + rename inside the same folder, created with the process umask) so
an interrupted run never leaves half a file, and never goes through a symbolic link: the target is
never a link, and below the folder ampbench owns (`root`: the run folder, the site being built) no
folder is one either, walked with directory descriptors and O_NOFOLLOW. Reads open regular files
only (a FIFO never hangs a reader), bounded in size, and name the file when it is missing, a folder,
a link below its root or not UTF-8, turning OS and encoding errors into `ResultsError` (the CLI's
exit 2). A user's `-o` is checked by `check_output`: never an input, a record or a folder.
Versioned documents: core/docs.py.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ampbench.core.errors import ResultsError
from ampbench.core.store import RUN_JSON, TRIALS
from ampbench.core.text import printable


def shown_path(path: Path | str) -> str:
    """A path as text that can always be printed or written (a name with non-UTF-8 bytes gets them as \\xNN)."""
    return os.fsencode(str(path)).decode("utf-8", "backslashreplace")


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


MAX_READ_BYTES = 512 * 2**20  # no ampbench file is this big; a larger one is not ours (or a device)
RECORD_NAMES = {RUN_JSON}        # files a run folder is defined by: never replaced by another verb's output
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class LinkInTheWay(ResultsError):
    """A symbolic link where ampbench owns the folder (`path`): refused, never followed."""

    def __init__(self, path: Path):
        self.path = Path(path)
        super().__init__(f"{path}: is a symbolic link; ampbench never reads, writes or copies through a link "
                         "inside a folder it owns (replace it with a regular file or folder)")


def _link_error(path: Path) -> LinkInTheWay:
    return LinkInTheWay(path)


FolderId = tuple[int, int]   # (st_dev, st_ino): which folder a path named when ampbench made it


def folder_id(path: Path) -> FolderId:
    """The identity of a folder ampbench made (the run folder), taken before any program runs in it, so a
    later write can tell that the path now names another folder (the program moved, removed or replaced it)."""
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _not_the_folder(base: Path) -> ResultsError:
    return ResultsError(f"{base}: no longer the folder ampbench made (removed, moved or replaced since, e.g. by "
                        "the program under test); nothing is written into what is there now")


def _components(path: Path, root: Path | None) -> tuple[Path, list[str]]:
    """(base folder opened as given, names below it walked without following links)."""
    if root is None:
        return path.parent, [path.name]
    try:
        rel = path.relative_to(root)
    except ValueError:
        raise ResultsError(f"{path}: outside the folder {root} it belongs to") from None
    parts = [p for p in rel.parts if p not in ("", ".")]
    if not parts or ".." in parts:
        raise ResultsError(f"{path}: not a file inside {root}")
    return root, parts


def _open_dirs(base: Path, names: list[str], create: bool, expect: FolderId | None = None) -> int:
    """A descriptor of base/names[0]/.../names[-1] (folders), refusing a symbolic link at every step below
    `base` and, with `create`, making the missing ones; with `expect`, `base` must still be that folder
    (never re-created: a removed run folder is not brought back); the caller closes it."""
    try:
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    except FileNotFoundError:
        if expect is not None:
            raise _not_the_folder(base) from None
        if not create:
            raise
        base.mkdir(parents=True, exist_ok=True)
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    if expect is not None and (os.fstat(fd).st_dev, os.fstat(fd).st_ino) != tuple(expect):
        os.close(fd)
        raise _not_the_folder(base)
    here = base
    try:
        for name in names:
            here = here / name
            try:
                nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=fd)
                nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR) and stat.S_ISLNK(os.lstat(name, dir_fd=fd).st_mode):
                    raise _link_error(here) from None
                if e.errno == errno.ENOTDIR:
                    raise NotADirectoryError(errno.ENOTDIR, f"{here} is a file, not a folder", str(here)) from None
                raise
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd


def _existing(dfd: int, name: str, path: Path) -> os.stat_result | None:
    """What is at `name` now (not following a link); refuses a link, a folder and anything not a regular file."""
    try:
        st = os.lstat(name, dir_fd=dfd)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise _link_error(path)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "a folder is in the way", str(path))
    if not stat.S_ISREG(st.st_mode):  # a device, FIFO or socket is never replaced by a result
        raise OSError(errno.EINVAL, "not a regular file; refusing to replace it", str(path))
    return st


def _parent_fd(path: Path, root: Path | None, root_id: FolderId | None = None) -> tuple[int, str]:
    if root is None:
        blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        if blocker is not None:
            raise NotADirectoryError(errno.ENOTDIR, f"{blocker} is a file, not a folder", str(blocker))
    base, names = _components(path, None if root is None else Path(root))
    return _open_dirs(base, names[:-1], create=True, expect=root_id if root is not None else None), names[-1]


def atomic_write_bytes(path: Path, data: bytes, root: Path | None = None, replace: bool = True,
                       root_id: FolderId | None = None) -> None:
    """Write via a temp file in the same folder, then rename: readers see the old or the new file.

    Never through a symbolic link: the target itself must not be a link, and with `root` (the folder
    ampbench owns, e.g. the run folder) no folder between `root` and the file may be one either; with
    `root_id` (folder_id of `root` when ampbench made it) `root` must still be that very folder.
    `replace=False` refuses an existing file (a record). OS errors (disk full, read-only, a folder in
    the way) become ResultsError naming the path."""
    path = Path(path)
    dfd = -1
    tmp = f".{path.name}.{secrets.token_hex(4)}.tmp"
    try:
        dfd, name = _parent_fd(path, root, root_id)
        old = _existing(dfd, name, path)
        if old is not None and not replace:
            raise ResultsError(f"{path}: already exists; ampbench never replaces it (choose another output)")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o666, dir_fd=dfd)
    except OSError as e:
        if dfd >= 0:
            os.close(dfd)
        raise ResultsError(f"{path}: cannot write: {os_reason(e)}") from None
    except BaseException:
        if dfd >= 0:
            os.close(dfd)
        raise
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            if old is not None:  # an existing file keeps its permissions; a new one gets 0666 minus the umask
                os.fchmod(f.fileno(), old.st_mode & 0o7777)
        if replace:
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        else:
            os.link(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
            os.unlink(tmp, dir_fd=dfd)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)
        if isinstance(e, FileExistsError):
            raise ResultsError(f"{path}: already exists; ampbench never replaces it (choose another output)") from None
        if isinstance(e, OSError):
            raise ResultsError(f"{path}: cannot write: {os_reason(e)}") from None
        raise
    finally:
        os.close(dfd)


def atomic_write_text(path: Path, text: str, root: Path | None = None, replace: bool = True,
                      root_id: FolderId | None = None) -> None:
    """`atomic_write_bytes` of UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"), root=root, replace=replace, root_id=root_id)


def atomic_write_json(path: Path, data: Any, root: Path | None = None, root_id: FolderId | None = None) -> None:
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=False, allow_nan=True) + "\n", root=root,
                      root_id=root_id)


def remove_link(link: Path, root: Path, root_id: FolderId | None = None) -> None:
    """Remove the symbolic link `link` below `root` (the link only, never what it points to), walked
    without following links; a folder or file there is left alone. How a record is written after the
    program under test replaced a folder of the run by a link: the link goes, the record stays inside."""
    base, names = _components(Path(link), Path(root))
    try:
        dfd = _open_dirs(base, names[:-1], create=False, expect=root_id)
    except OSError as e:
        raise ResultsError(f"{link}: cannot remove the link: {os_reason(e)}") from None
    try:
        if stat.S_ISLNK(os.lstat(names[-1], dir_fd=dfd).st_mode):
            os.unlink(names[-1], dir_fd=dfd)
    except OSError as e:
        raise ResultsError(f"{link}: cannot remove the link: {os_reason(e)}") from None
    finally:
        os.close(dfd)


def open_for_writing(path: Path, root: Path | None = None) -> IO[str]:
    """A log file opened for writing (truncated), never through a symbolic link (see atomic_write_bytes)."""
    path = Path(path)
    dfd = -1
    try:
        dfd, name = _parent_fd(path, root)
        _existing(dfd, name, path)
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW | _CLOEXEC, 0o666, dir_fd=dfd)
    except OSError as e:
        raise ResultsError(f"{path}: cannot write: {os_reason(e)}") from None
    finally:
        if dfd >= 0:
            os.close(dfd)
    return os.fdopen(fd, "w", encoding="utf-8")


def open_for_append(path: Path, root: Path) -> IO[str]:
    """A log file below `root` opened for appending (created when missing), no link followed on the way or at
    the file itself (bisect.log of a resumed search: a link there is refused, never appended through)."""
    path = Path(path)
    dfd = -1
    try:
        dfd, name = _parent_fd(path, root)
        _existing(dfd, name, path)
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_APPEND | _NOFOLLOW | _CLOEXEC, 0o666, dir_fd=dfd)
    except OSError as e:
        raise ResultsError(f"{path}: cannot write: {os_reason(e)}") from None
    finally:
        if dfd >= 0:
            os.close(dfd)
    return os.fdopen(fd, "a", encoding="utf-8")


def ensure_folder(folder: Path, root: Path, create: bool = True) -> Path:
    """`folder` below `root` (the folder ampbench owns) as a real folder: walked from `root` without following
    a link, the missing ones made (with `create`); a link or a file on the way is refused (LinkInTheWay /
    ResultsError naming it). What a verb checks before it lets another layer write into a sub-folder of its
    own (bisect's runs/ and side/ before a candidate's run lands there)."""
    folder = Path(folder)
    base, names = _components(folder, Path(root)) if Path(folder) != Path(root) else (Path(root), [])
    try:
        os.close(_open_dirs(base, names, create=create))
    except OSError as e:
        raise ResultsError(f"{folder}: not a folder ampbench can use: {os_reason(e)}") from None
    return folder


MAX_EMPTY_DEPTH = 64   # folders inside a folder ampbench empties; deeper is refused, never recursed without bound


def empty_folder(folder: Path, root: Path) -> None:
    """Make `folder` (below `root`, the folder ampbench owns) an empty folder, creating it if missing.

    The one walk for every folder ampbench empties (a command trial's `{out}` and events, on every
    attempt, --resume included): opened with O_NOFOLLOW from `root` down, so a folder replaced by a
    symbolic link (a run folder from a CI artifact, or one the program under test rewrote) is refused,
    never followed to delete files elsewhere; inside it a link is removed as a link (its target
    untouched) and a sub-folder is emptied through its own descriptor before it is removed. OS errors
    become ResultsError naming the folder."""
    folder = Path(folder)
    base, names = _components(folder, Path(root))
    fd = -1
    try:
        fd = _open_dirs(base, names, create=True)
        _empty_fd(fd, folder, 0)
    except OSError as e:
        raise ResultsError(f"{folder}: cannot empty it: {os_reason(e)}") from None
    finally:
        if fd >= 0:
            os.close(fd)


def _empty_fd(fd: int, where: Path, depth: int) -> None:
    if depth > MAX_EMPTY_DEPTH:
        raise ResultsError(f"{where}: folders nested deeper than {MAX_EMPTY_DEPTH}; remove it by hand")
    for name in os.listdir(fd):
        if stat.S_ISDIR(os.lstat(name, dir_fd=fd).st_mode):
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            try:
                _empty_fd(sub, where / name, depth + 1)
            finally:
                os.close(sub)
            os.rmdir(name, dir_fd=fd)
        else:   # a file, a link (removed, never its target), a FIFO or a socket
            os.unlink(name, dir_fd=fd)


LOCK_WAIT_S = 120.0   # how long a writer waits for another's lock before it says so


@contextlib.contextmanager
def locked(lock: Path, what: str, timeout: float = LOCK_WAIT_S) -> Iterator[None]:
    """Hold an exclusive lock (fcntl, through filelock) on `lock` while a shared file is read, changed and
    written back: two `history append` or `history accept` at once each keep their record (without it 8
    concurrent appends kept 4-6 lines). The lock file is never a link (filelock would open its target)."""
    import filelock

    refuse_link(lock)
    guard = filelock.FileLock(lock, timeout=timeout)
    try:
        guard.acquire()
    except filelock.Timeout:
        held = f"has held this lock on {what} for {timeout:.0f} s" if timeout > 0 else f"holds this lock on {what}"
        raise ResultsError(f"{lock}: another ampbench process {held}; wait for it to finish") from None
    except OSError as e:
        raise ResultsError(f"{lock}: cannot lock {what}: {os_reason(e)}") from None
    try:
        yield
    finally:
        guard.release()


def refuse_link(path: Path) -> None:
    """A fixed path ampbench creates inside its folder (a lock) must not be a symbolic link."""
    with contextlib.suppress(OSError):
        if stat.S_ISLNK(os.lstat(path).st_mode):
            raise _link_error(Path(path))


def is_record(path: Path) -> bool:
    """Whether an existing file is one ampbench must never overwrite with another verb's output:
    run.json, a trial file, or any ampbench result document (its first bytes name an ampbench schema)."""
    p = Path(path)
    try:
        st = os.lstat(p)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return False
    if p.name in RECORD_NAMES or p.parent.name == TRIALS:
        return True
    try:
        with open(p, "rb", opener=lambda f, fl: os.open(f, fl | os.O_NONBLOCK | _NOFOLLOW)) as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return re.search(rb'"schema"\s*:\s*"ampbench\.', head) is not None


def check_output(path: Path, inputs: list[Path] | tuple[Path, ...] = (), allow_records: bool = False,
                 kinds: tuple[str, ...] = ()) -> Path:
    """A user's `-o` path, checked before anything is computed (every verb's `-o` goes through here):
    not one of the inputs, not a record (unless `allow_records`, e.g. a baseline refreshed on purpose),
    not a folder, parent not a file, and, given the suffixes the verb writes (`kinds`), not an existing
    file of another kind (a training script or a YAML config is never replaced by a suite)."""
    path = Path(path)
    for src in inputs:
        with contextlib.suppress(OSError):
            if path.exists() and Path(src).exists() and os.path.samefile(path, src):
                raise ResultsError(f"{path}: is the input {src}; refusing to replace it (choose another output)")
    if path.is_dir():
        raise ResultsError(f"{path}: is a folder; give a file name (EISDIR)")
    if is_record(path) and (not allow_records or path.name in RECORD_NAMES or path.parent.name == TRIALS):
        raise ResultsError(f"{path}: is an ampbench record (run.json, a trial or result file); refusing to replace it")
    blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise ResultsError(f"{path}: cannot write: {blocker} is a file, not a folder (ENOTDIR)")
    if kinds and os.path.lexists(path) and path.suffix.lower() not in kinds:
        raise ResultsError(f"{path}: exists and is not a {' or '.join(kinds)} file; refusing to replace it "
                           "(choose another output)")
    return path


def _open_for_reading(p: Path, what: str, root: Path | None) -> int:
    """A read-only, non-blocking descriptor of `p` (no link followed below `root`), or ResultsError."""
    dfd = -1
    try:
        if root is None:
            return os.open(p, os.O_RDONLY | os.O_NONBLOCK | _CLOEXEC)
        base, names = _components(p, Path(root))
        dfd = _open_dirs(base, names[:-1], create=False)
        return os.open(names[-1], os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC, dir_fd=dfd)
    except FileNotFoundError:
        raise ResultsError(f"{p}: {what} not found") from None
    except OSError as e:
        if e.errno == errno.ELOOP and root is not None:
            raise _link_error(p) from None
        if e.errno == errno.EISDIR:
            raise ResultsError(f"{p}: {what} expected, found a folder") from None
        raise ResultsError(f"{p}: cannot read {what}: {os_reason(e)}") from None
    finally:
        if dfd >= 0:
            os.close(dfd)


def read_bytes(path: Path, what: str = "result file", root: Path | None = None,
               limit: int = MAX_READ_BYTES) -> bytes:
    """A regular file's bytes, or ResultsError naming it: missing, a folder, a FIFO or device (opened
    non-blocking, so a FIFO never hangs a read), larger than `limit`, unreadable. With `root`, no
    symbolic link is followed below it (the file included)."""
    p = Path(path)
    fd = _open_for_reading(p, what, root)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise ResultsError(f"{p}: {what} expected, found a folder")
        if not stat.S_ISREG(st.st_mode):
            raise ResultsError(f"{p}: {what} is not a regular file (a FIFO, socket or device); refusing to read it")
        if st.st_size > limit:
            raise ResultsError(f"{p}: {what} is {st.st_size:,} bytes, over the {limit:,}-byte limit; not an ampbench file?")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
        if len(data) > limit:
            raise ResultsError(f"{p}: {what} is over the {limit:,}-byte limit; not an ampbench file?")
        return data
    except OSError as e:
        raise ResultsError(f"{p}: cannot read {what}: {os_reason(e)}") from None
    finally:
        os.close(fd)


def read_text(path: Path, what: str = "result file", root: Path | None = None, limit: int = MAX_READ_BYTES) -> str:
    """A file's text, or ResultsError naming it (missing, a folder, not a regular file, too big, unreadable,
    not UTF-8)."""
    data = read_bytes(path, what, root=root, limit=limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ResultsError(f"{path}: {what} is not UTF-8 text (byte {e.start}); corrupt?") from None


MAX_INT_DIGITS = 40   # no integer ampbench writes has more digits (byte counts, seeds, steps); 10**400 is not ours


def _bounded_int(text: str) -> int:
    if len(text) > MAX_INT_DIGITS + 1:
        raise ValueError(f"an integer of {len(text.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def loads_bounded(text: str | bytes) -> Any:
    """json.loads with every integer bounded to MAX_INT_DIGITS digits (a longer one raises ValueError before
    Python converts it: no 4,300-digit conversion, no 10**400 reaching a numpy array)."""
    return json.loads(text, parse_int=_bounded_int)


def parse_json(text: str | bytes, where: object, what: str = "result file") -> Any:
    """JSON text -> data, or ResultsError naming `where`: malformed, nested too deeply for the parser, or a
    number Python refuses to convert (an integer of more than 4,300 digits raises ValueError, not a
    JSONDecodeError). The one parse of every file and line ampbench reads back."""
    try:
        return loads_bounded(text)
    except RecursionError:
        raise ResultsError(f"{where}: {what} is nested too deeply to be an ampbench file") from None
    except json.JSONDecodeError as e:
        raise ResultsError(f"{where}: {what} is not valid JSON ({e}); truncated or corrupt?") from None
    except ValueError as e:   # an integer past MAX_INT_DIGITS (or Python's 4,300-digit conversion limit)
        raise ResultsError(f"{where}: {what} holds a number ampbench cannot read ({str(e)[:80]})") from None


def read_json(path: Path, what: str = "result file", root: Path | None = None) -> Any:
    return parse_json(read_text(path, what, root=root), path, what)



# ---------------------------------------------------------------- log text helpers

LOG_TAIL_MARKER = "--- last log lines ---"  # older trial files carry the log tail inside `error` after this


def last_line(text: str | None, limit: int = 160) -> str:
    """The line of an error that says what went wrong: the exception line of a traceback, or the runner's
    own sentence for a killed trial (a log tail appended after LOG_TAIL_MARKER is ignored); "" if none.
    It came from the program: its control characters are shown escaped (core/text.py), never passed on."""
    head = (text or "").split(LOG_TAIL_MARKER)[0]
    lines = [ln.strip() for ln in head.strip().splitlines() if ln.strip()]
    return printable(lines[-1][:limit]) if lines else ""


def tail_lines(path: Path, lines: int = 30) -> str:
    """The last `lines` lines of a log file; "" when it is missing or unreadable (a log is evidence, not input)."""
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
