"""Files in and out: atomic outputs that respect what is there, inputs read within a limit, safe names.

Outputs
    A regular file (or a new one) is written to a temporary file in the same
    folder, then renamed over the target: readers never see half a file, and
    an error leaves nothing behind.  Files get the permissions ``open()``
    would give them (the temporary file alone is 0600).

    A target that exists and is neither a regular file nor a folder (a device
    such as ``/dev/null``, a FIFO, a terminal; ``/dev/stdout`` and
    ``/dev/fd/N`` resolve to one) is written to directly and never replaced:
    the bytes are kept in a private temporary folder until the output would
    have been renamed into place, then copied into the target.  Replacing
    ``/dev/null`` with a regular file, as a rename would, breaks the machine
    for everyone; writing into it is what every Unix tool does.  A socket
    cannot be opened, and is refused.

    Inside :func:`all_or_nothing` (``stage=True``) each folder that receives a
    file is locked for the whole command (``flock`` on the folder itself, so
    nothing is left in it and a killed process lets go at once): a second
    command writing into the same folder at the same time is refused with one
    line, so a folder always holds the files of one run, never one run's
    ``result.json`` beside another's trace.  The run that takes the lock
    removes the temporary files (:data:`TEMP_FILE`) that killed runs left
    there.

    A file or folder that cannot be written raises :class:`OutputError` (a
    :class:`~wss.errors.WssError`) naming the path and the reason, so the CLI
    prints one line and exits with 2.  Commands check their outputs before the
    work with :func:`ensure_dir` and :func:`ensure_file_target`, and run inside
    :func:`all_or_nothing` so a failure leaves no output and no new folder.

Inputs
    :func:`read_input` reads a file only up to a limit: a larger regular file
    is refused before it is read, and a stream (``/dev/zero``, a FIFO, a
    process substitution ``<(...)``) is read only until it passes the limit.

Names
    :func:`safe_name` turns a name that becomes a file or folder name (a
    scenario's ``name`` becomes ``out/<name>/``) into one safe path component.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import math
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wss.errors import WssError, shorten

try:  # POSIX; elsewhere output folders are not locked
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "OutputError",
    "InputError",
    "OutputTransaction",
    "all_or_nothing",
    "atomic_output",
    "atomic_write_bytes",
    "atomic_write_text",
    "ensure_dir",
    "ensure_file_target",
    "is_special_file",
    "read_input",
    "loads_finite",
    "safe_name",
    "TEMP_FILE",
    "MAX_NAME_BYTES",
]


class OutputError(WssError):
    """An output file or folder that cannot be written (a bad path, a file where a folder should be, ...)."""


class InputError(WssError):
    """An input that cannot be read whole: a folder, or more than its limit."""


#: The temporary files this module makes: ``.<name>.<12 hex digits>.tmp``.  Those left in a folder by a
#: killed run are removed by the next command that locks the folder.
TEMP_FILE = re.compile(r"\..+\.[0-9a-f]{12}\.tmp")


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _shown(path: str | Path) -> str:
    """A path as a message shows it: one line, at most :data:`~wss.errors.MAX_ECHO_CHARS` characters."""
    return shorten(str(path))


def is_special_file(path: str | Path) -> bool:
    """Does ``path`` exist as something other than a regular file or a folder (a device, a FIFO, a socket)?

    Symbolic links are followed: ``/dev/stdout`` is the terminal or pipe it points to.
    """
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


@dataclass
class _Staged:
    """A finished temporary file waiting for the end of the transaction: renamed over ``path``, or, for
    a special file (``direct``), copied into it."""

    tmp: Path
    path: Path
    direct: bool = False

    def deliver(self) -> None:
        if self.direct:
            _copy_into(self.tmp, self.path)
            _discard(self)
        else:
            os.replace(self.tmp, self.path)


def _discard(staged: _Staged) -> None:
    staged.tmp.unlink(missing_ok=True)
    if staged.direct:  # its private folder
        shutil.rmtree(staged.tmp.parent, ignore_errors=True)


class OutputTransaction:
    """The outputs of one command, made all at once or not at all.

    Folders created while it is active are recorded and, on :meth:`rollback`,
    removed again if still empty.  With ``stage=True`` the atomic writers also
    keep their temporary files until :meth:`commit` renames them all into
    place; :meth:`rollback` deletes them instead.  A staged transaction also
    holds the lock of every folder it writes into until it ends.
    """

    def __init__(self, stage: bool = True):
        self.stage = stage
        self.made_dirs: list[Path] = []
        self.pending: list[_Staged] = []
        self._locks: dict[tuple[int, int], int] = {}  # (device, inode) of a folder -> its open, locked descriptor

    def commit(self) -> None:
        # Each file leaves ``pending`` only once it is in place: an error or a signal part-way through
        # leaves the rest for :meth:`rollback` to delete, so no temporary file stays behind.
        while self.pending:
            staged = self.pending[0]
            try:
                staged.deliver()
            except OSError as exc:
                self.rollback()
                raise OutputError(f"cannot write {_shown(staged.path)}: {_reason(exc)}") from exc
            del self.pending[0]
        self.made_dirs = []
        self.release()

    def rollback(self) -> None:
        """Delete staged files and every folder made here that is still empty."""
        pending, self.pending = self.pending, []
        for staged in pending:
            _discard(staged)
        made, self.made_dirs = self.made_dirs, []
        for d in reversed(made):
            with contextlib.suppress(OSError):
                d.rmdir()
        self.release()

    def lock(self, folder: Path) -> None:
        """Hold ``folder``'s lock until the transaction ends; on taking it, remove temporary files left there.

        Raises :class:`OutputError` when another command holds it.
        """
        if not self.stage or fcntl is None:
            return
        try:
            fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except OSError:
            return  # not a folder we can open: the write itself reports the problem
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) in self._locks:
                os.close(fd)
                return
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OutputError(f"cannot write into {_shown(folder)}: another wss command is writing there now; "
                              "wait for it to end or choose another output") from None
        except OSError:  # a file system without locks (some network mounts): write unlocked, as before
            os.close(fd)
            return
        except BaseException:
            os.close(fd)
            raise
        self._locks[(st.st_dev, st.st_ino)] = fd
        _remove_leftovers(folder)

    def release(self) -> None:
        """Let go of every folder lock."""
        locks, self._locks = self._locks, {}
        for fd in locks.values():
            with contextlib.suppress(OSError):
                os.close(fd)


def _remove_leftovers(folder: Path) -> None:
    """Delete the temporary files (:data:`TEMP_FILE`) of killed runs in ``folder``: its lock is held, so no
    live wss command is writing them."""
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            if TEMP_FILE.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


_ACTIVE: contextvars.ContextVar[OutputTransaction | None] = contextvars.ContextVar("wss_outputs", default=None)


@contextlib.contextmanager
def all_or_nothing(stage: bool = True) -> Iterator[OutputTransaction]:
    """Make the atomic writes inside the block all-or-nothing.

    With ``stage=True`` (the default) files written with :func:`atomic_output`
    appear only when the block ends without an error; on an error (or Ctrl-C)
    none appears and files already there are untouched; every folder written
    into is locked until the block ends.  With ``stage=False`` files are
    written at once (e.g. a sweep's cache, which must survive Ctrl-C and may
    be shared by sweeps running together) and only the folders made inside
    the block are tidied on an error.  Either way an error removes the
    folders made inside the block that are still empty.  Inside an active
    block, a nested one joins it.
    """
    active = _ACTIVE.get()
    if active is not None:
        yield active
        return
    txn = OutputTransaction(stage)
    token = _ACTIVE.set(txn)
    try:
        try:
            yield txn
        finally:
            _ACTIVE.reset(token)
        txn.commit()
    except BaseException:
        txn.rollback()
        raise


def _dir_problem(path: Path) -> str | None:
    """Make folder ``path`` (and missing parents) and check a file can be made in it; return what is wrong."""
    path = Path(path)
    missing: list[Path] = []
    existing = path
    while not os.path.lexists(existing) and existing != existing.parent:
        missing.append(existing)
        existing = existing.parent
    if os.path.lexists(existing) and not os.path.isdir(existing):
        if os.path.isfile(existing):
            return f"{_shown(existing)} is a file, not a folder"
        return f"{_shown(existing)} is not a folder"
    txn = _ACTIVE.get()
    made = txn.made_dirs if txn is not None else []  # outside a transaction nothing is tidied
    for d in reversed(missing):
        # Recorded before it is made: a signal (Ctrl-C, SIGTERM) landing just after mkdir returns must still find
        # it for the rollback, which removes it if it exists and is empty.  Dropped again if it is not this call's.
        made.append(d)
        try:
            os.mkdir(d)
        except FileExistsError:
            made.remove(d)
            if not os.path.isdir(d):
                return f"{_shown(d)} is not a folder"
            continue
        except OSError as exc:
            made.remove(d)
            return f"cannot create folder {_shown(d)}: {_reason(exc)}" if d != path else _reason(exc)
    return None


def _lock(folder: Path) -> None:
    txn = _ACTIVE.get()
    if txn is not None:
        txn.lock(folder)


def _new_temp_file(folder: Path, prefix: str) -> Path:
    """Create an empty file ``<prefix><random>.tmp`` in ``folder``, readable by its owner only; return its path.

    Unlike :func:`tempfile.mkstemp` this knows the name before the file exists, so a signal (Ctrl-C,
    SIGTERM) arriving just as the file is made still removes it: no temporary file stays behind.
    """
    while True:
        tmp = folder / f"{prefix}{os.urandom(6).hex()}.tmp"
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            continue
        except OSError:
            raise
        except BaseException:  # a 48-bit random name: if it exists now, this call made it
            tmp.unlink(missing_ok=True)
            raise
        return tmp


def _probe(path: Path) -> str | None:
    """Check that a file can be created in folder ``path``; return the reason if not."""
    try:
        made = _new_temp_file(path, ".wss-write-check.")
    except OSError as exc:
        return _reason(exc)
    with contextlib.suppress(OSError):
        made.unlink()
    return None


def ensure_dir(path: str | Path) -> Path:
    """Create folder ``path`` if needed and check files can be written in it; raise :class:`OutputError` if not.

    Inside a staged :func:`all_or_nothing` block the folder is locked until the block ends.
    """
    path = Path(path)
    problem = _dir_problem(path)
    if problem is None:
        _lock(path)
        problem = _probe(path)
    if problem:
        raise OutputError(f"cannot write into folder {_shown(path)}: {problem}")
    return path


def ensure_file_target(path: str | Path) -> Path:
    """Check that file ``path`` can be written (its folder is made if needed); raise :class:`OutputError` if not.

    A special file (a device, a FIFO) must be writable by this user; its folder is left alone.
    """
    path = Path(path)
    if os.path.isdir(path):
        raise OutputError(f"cannot write {_shown(path)}: it is a folder")
    if is_special_file(path):
        problem = _special_problem(path)
    else:
        problem = _dir_problem(path.parent)
        if problem is None:
            _lock(path.parent)
            problem = _probe(path.parent)
    if problem:
        raise OutputError(f"cannot write {_shown(path)}: {problem}")
    return path


def _special_problem(path: Path) -> str | None:
    """What stops writing into special file ``path``, checked without opening it (a FIFO would wait for a reader)."""
    if stat.S_ISSOCK(os.stat(path).st_mode):
        return "it is a socket, which cannot be written as a file"
    if not os.access(path, os.W_OK):
        return "Permission denied"
    return None


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _copy_into(tmp: Path, path: Path) -> None:
    """Copy ``tmp``'s bytes into special file ``path``, opened as it is (never created, truncated or replaced).

    Opening a FIFO waits for its reader, as ``cat > fifo`` does.
    """
    fd = os.open(path, os.O_WRONLY | getattr(os, "O_NOCTTY", 0))
    with open(fd, "wb", closefd=True) as dst, tmp.open("rb") as src:
        shutil.copyfileobj(src, dst, 1 << 20)


@contextlib.contextmanager
def atomic_output(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path``, on error it is removed.

    Inside :func:`all_or_nothing` the replacement waits for the end of the
    block.  An :class:`OSError` (from making the folder, or raised while the
    temporary file is written) becomes an :class:`OutputError` naming ``path``.
    A special file (a device, a FIFO) is written into, not replaced (see the module's docstring).
    """
    path = Path(path)
    direct = is_special_file(path)
    if direct:
        problem = _special_problem(path)
    else:
        problem = _dir_problem(path.parent)
        if problem is None:
            _lock(path.parent)
    if problem:
        raise OutputError(f"cannot write {_shown(path)}: {problem}")
    txn = _ACTIVE.get()
    try:
        folder = Path(tempfile.mkdtemp(prefix="wss-output-")) if direct else path.parent
        tmp = _new_temp_file(folder, f".{path.name}.")
    except OSError as exc:
        raise OutputError(f"cannot write {_shown(path)}: {_reason(exc)}") from exc
    staged = _Staged(tmp, path, direct)
    try:
        yield tmp
        if not direct:
            os.chmod(tmp, 0o666 & ~_umask())
        if txn is not None and txn.stage:
            if os.path.isdir(path):
                raise IsADirectoryError(21, "Is a directory", str(path))
            txn.pending.append(staged)
        else:
            staged.deliver()
    except OSError as exc:
        _discard(staged)
        raise OutputError(f"cannot write {_shown(path)}: {_reason(exc)}") from exc
    except BaseException:
        _discard(staged)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; return the path."""
    with atomic_output(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically; return the path."""
    return atomic_write_bytes(path, text.encode("utf-8"))


# --------------------------------------------------------------------------- inputs


def read_input(path: str | Path, limit: int, starts_with: bytes = b"") -> bytes:
    """The bytes of file ``path``, refused with :class:`InputError` past ``limit`` bytes before being read whole.

    A regular file larger than ``limit`` is refused from its size, unread.  Anything else that can be
    read (a FIFO, ``/dev/stdin``, a process substitution, a device) is read up to ``limit + 1`` bytes
    and refused if it holds more, so ``/dev/zero`` costs ``limit`` bytes, not all memory.  With
    ``starts_with``, input whose first bytes other than blanks are not those is refused as soon as they
    are read (a JSON object starts with ``{``: ``/dev/zero`` or a binary file is refused at once).  A
    folder is refused.  Other failures (no such file, permission denied) raise :class:`OSError` as
    ``open`` does.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOCTTY", 0))
    with open(fd, "rb", closefd=True) as f:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise InputError("it is a folder, not a file")
        if stat.S_ISREG(st.st_mode) and st.st_size > limit:
            raise InputError(f"{_size(st.st_size)}, more than the {_size(limit)} a file of this kind may hold")
        chunks: list[bytes] = []
        total, head = 0, b""
        while total <= limit:
            chunk = f.read(min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if starts_with and len(head) < len(starts_with):
                head = head + chunk if head else chunk.lstrip()
                shown = min(len(head), len(starts_with))
                if head[:shown] != starts_with[:shown]:
                    raise InputError(f"it does not start with {starts_with.decode('ascii', 'replace')!r}")
    if total > limit:
        raise InputError(f"more than the {_size(limit)} a file of this kind may hold")
    return b"".join(chunks)


def _size(n: int) -> str:
    return f"{n / 2**20:,.1f} MB" if n >= 2**20 else f"{n:,} bytes"


# --------------------------------------------------------------------------- names


#: The most bytes (UTF-8) of a name made into a file or folder name by :func:`safe_name`; file systems
#: allow 255, and a default output folder has suffixes to add.
MAX_NAME_BYTES = 100


def safe_name(name: str, keep: str = "-_.", fallback: str = "scenario", limit: int = MAX_NAME_BYTES) -> str:
    """``name`` as one safe path component: letters, digits and ``keep``, every other character ``_``.

    Never empty, never ``.`` or ``..`` nor a hidden name (a leading dot becomes ``_``), never a separator or
    a control character, at most ``limit`` bytes: a longer name keeps its start and ends with ``-`` and
    the first 8 hex digits of its sha256, so two long names stay apart.
    """
    text = "".join(ch if (ch.isalnum() and ch.isprintable()) or ch in keep else "_" for ch in name)
    if text.startswith("."):
        text = "_" + text[1:]
    if not text:
        return fallback
    if len(text.encode("utf-8")) > limit:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        head = text.encode("utf-8")[: limit - 9].decode("utf-8", "ignore")
        text = f"{head}-{digest}"
    return text


def loads_finite(text: str | bytes) -> Any:
    """JSON as wss writes it: every number finite.  ``NaN``, ``Infinity`` and a number too large for a float
    (``1e999``) raise :class:`ValueError` naming it, where :func:`json.loads` would give a non-finite float."""
    def finite(number: str) -> float:
        value = float(number)
        if not math.isfinite(value):
            raise ValueError(f"the number {shorten(number, 40)} is not finite")
        return value

    def constant(name: str) -> float:
        raise ValueError(f"{name} is not a number wss writes (it writes finite numbers only)")

    return json.loads(text, parse_float=finite, parse_constant=constant)
