"""Crash-safe file writes: a temporary file beside the target, fsync, then ``os.replace``.

A process killed at any moment (SIGKILL, power loss after the fsyncs) leaves either the old
file or the new one under the target name, never a truncated mix: the new bytes go to a
temporary file in the *same directory* (so the rename never crosses a filesystem), are flushed
and fsync'ed, and only then is the temporary file renamed over the target with
:func:`os.replace` (atomic on POSIX and on Windows/NTFS); the directory is fsync'ed last so the
rename itself is durable. A killed writer leaves at most a hidden temporary file
(``.<name>.tmp-<pid>-<random>``), which the next write to the same target removes.

A checkpoint that must change several files together is made of *one* committed file (the
adapter checkpoint embeds its config in the safetensors header; see :mod:`adapters.io`), so
one rename commits it and there is no window in which the old checkpoint is gone.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from adapters.exceptions import AdapterConfigError

__all__ = ["atomic_open", "atomic_write_bytes", "atomic_write_text", "file_path",
           "fsync_directory"]

_TMP_MARK = ".tmp-"


def file_path(path: object, function: str) -> Path:
    """``path`` as a Path, or ``AdapterConfigError`` naming what was passed instead of a path.

    Parameters
    ----------
    path : object
        What the caller was given.
    function : str
        The public function's name, for the message.

    Returns
    -------
    pathlib.Path
    """
    if not isinstance(path, (str, os.PathLike)):
        raise AdapterConfigError(f"`{function}` takes a file path (str or os.PathLike); got "
                                 f"{type(path).__name__} {path!r}")
    return Path(path)


def fsync_directory(directory: str | os.PathLike) -> None:
    """Flush a directory's entries (new names, renames) to disk; a no-op where unsupported.

    Parameters
    ----------
    directory : str or os.PathLike
    """
    if os.name == "nt":  # pragma: no cover - directories cannot be opened on Windows
        return
    fd = os.open(os.fspath(directory), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists (another user's) or cannot tell: leave its file alone
    return True


def _remove_stale_temporaries(target: Path) -> None:
    """Delete ``.<name>.tmp-<pid>-*`` files left by writers that no longer run."""
    prefix = f".{target.name}{_TMP_MARK}"
    for path in target.parent.glob(f"{prefix}*"):
        pid = path.name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and not _pid_alive(int(pid)):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wb") -> Iterator[IO]:
    """Open a temporary file that replaces ``path`` atomically when the block succeeds.

    Parameters
    ----------
    path : str or os.PathLike
        Target file; its directory must exist.
    mode : {"wb", "w"}
        Binary or text (UTF-8) writing.

    Yields
    ------
    file object
        Write the whole new content to it. If the block raises, the temporary file is removed
        and ``path`` is untouched.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     target = Path(d) / "x.txt"
    ...     with atomic_open(target, "w") as fh:
    ...         _ = fh.write("new")
    ...     target.read_text(), sorted(p.name for p in Path(d).iterdir())
    ('new', ['x.txt'])
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"`mode` must be 'wb' or 'w'; got {mode!r}")
    target = Path(path)
    _remove_stale_temporaries(target)
    tmp = target.with_name(f".{target.name}{_TMP_MARK}{os.getpid()}-{secrets.token_hex(4)}")
    fh = open(tmp, "xb") if mode == "wb" else open(tmp, "x", encoding="utf-8")  # noqa: SIM115
    try:
        with fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    fsync_directory(target.parent)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Replace ``path`` by ``data`` atomically (see :func:`atomic_open`).

    Parameters
    ----------
    path : str or os.PathLike
    data : bytes

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    with atomic_open(path, "wb") as fh:
        fh.write(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Replace ``path`` by ``text`` (UTF-8) atomically (see :func:`atomic_open`).

    Parameters
    ----------
    path : str or os.PathLike
    text : str

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    with atomic_open(path, "w") as fh:
        fh.write(text)
    return Path(path)
