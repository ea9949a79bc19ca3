"""Atomic file writing: a temporary file in the same folder, then a rename.

Readers never see half a file, and an error leaves nothing behind.  Files get
the permissions ``open()`` would give them (the temporary file alone is 0600).

A file or folder that cannot be written raises :class:`OutputError` (a
:class:`~wss.errors.WssError`) naming the path and the reason, so the CLI
prints one line and exits with 2.  Commands check their outputs before the
work with :func:`ensure_dir` and :func:`ensure_file_target`, and run inside
:func:`all_or_nothing` so a failure leaves no output and no new folder.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator
from pathlib import Path

from wss.errors import WssError

__all__ = [
    "OutputError",
    "OutputTransaction",
    "all_or_nothing",
    "atomic_output",
    "atomic_write_bytes",
    "atomic_write_text",
    "ensure_dir",
    "ensure_file_target",
]


class OutputError(WssError):
    """An output file or folder that cannot be written (a bad path, a file where a folder should be, ...)."""


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


class OutputTransaction:
    """The outputs of one command, made all at once or not at all.

    Folders created while it is active are recorded and, on :meth:`rollback`,
    removed again if still empty.  With ``stage=True`` the atomic writers also
    keep their temporary files until :meth:`commit` renames them all into
    place; :meth:`rollback` deletes them instead.
    """

    def __init__(self, stage: bool = True):
        self.stage = stage
        self.made_dirs: list[Path] = []
        self.pending: list[tuple[Path, Path]] = []

    def commit(self) -> None:
        # Each file leaves ``pending`` only once it is in place: an error or a signal part-way through
        # leaves the rest for :meth:`rollback` to delete, so no temporary file stays behind.
        while self.pending:
            tmp, path = self.pending[0]
            try:
                os.replace(tmp, path)
            except OSError as exc:
                self.rollback()
                raise OutputError(f"cannot write {path}: {_reason(exc)}") from exc
            del self.pending[0]
        self.made_dirs = []

    def rollback(self) -> None:
        """Delete staged files and every folder made here that is still empty."""
        pending, self.pending = self.pending, []
        for tmp, _ in pending:
            tmp.unlink(missing_ok=True)
        made, self.made_dirs = self.made_dirs, []
        for d in reversed(made):
            with contextlib.suppress(OSError):
                d.rmdir()


_ACTIVE: contextvars.ContextVar[OutputTransaction | None] = contextvars.ContextVar("wss_outputs", default=None)


@contextlib.contextmanager
def all_or_nothing(stage: bool = True) -> Iterator[OutputTransaction]:
    """Make the atomic writes inside the block all-or-nothing.

    With ``stage=True`` (the default) files written with :func:`atomic_output`
    appear only when the block ends without an error; on an error (or Ctrl-C)
    none appears and files already there are untouched.  With ``stage=False``
    files are written at once (e.g. a sweep's cache, which must survive
    Ctrl-C) and only the folders made inside the block are tidied on an error.
    Either way an error removes the folders made inside the block that are
    still empty.  Inside an active block, a nested one joins it.
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
        return f"{existing} is a file, not a folder" if os.path.isfile(existing) else f"{existing} is not a folder"
    txn = _ACTIVE.get()
    for d in reversed(missing):
        try:
            os.mkdir(d)
        except FileExistsError:
            if not os.path.isdir(d):
                return f"{d} is not a folder"
            continue
        except OSError as exc:
            return f"cannot create folder {d}: {_reason(exc)}" if d != path else _reason(exc)
        if txn is not None:
            txn.made_dirs.append(d)
    return None


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
    """Create folder ``path`` if needed and check files can be written in it; raise :class:`OutputError` if not."""
    path = Path(path)
    problem = _dir_problem(path) or _probe(path)
    if problem:
        raise OutputError(f"cannot write into folder {path}: {problem}")
    return path


def ensure_file_target(path: str | Path) -> Path:
    """Check that file ``path`` can be written (its folder is made if needed); raise :class:`OutputError` if not."""
    path = Path(path)
    if os.path.isdir(path):
        raise OutputError(f"cannot write {path}: it is a folder")
    problem = _dir_problem(path.parent) or _probe(path.parent)
    if problem:
        raise OutputError(f"cannot write {path}: {problem}")
    return path


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_output(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path``, on error it is removed.

    Inside :func:`all_or_nothing` the replacement waits for the end of the
    block.  An :class:`OSError` (from making the folder, or raised while the
    temporary file is written) becomes an :class:`OutputError` naming ``path``.
    """
    path = Path(path)
    problem = _dir_problem(path.parent)
    if problem:
        raise OutputError(f"cannot write {path}: {problem}")
    txn = _ACTIVE.get()
    try:
        tmp = _new_temp_file(path.parent, f".{path.name}.")
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {_reason(exc)}") from exc
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())
        if txn is not None and txn.stage:
            if os.path.isdir(path):
                raise IsADirectoryError(21, "Is a directory", str(path))
            txn.pending.append((tmp, path))
        else:
            os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise OutputError(f"cannot write {path}: {_reason(exc)}") from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; return the path."""
    with atomic_output(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically; return the path."""
    return atomic_write_bytes(path, text.encode("utf-8"))
