"""Whole-file writes that either land complete or not at all (temporary file, fsync, rename)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

__all__ = ["atomic_file", "write_atomic"]


@contextlib.contextmanager
def atomic_file(target: Path, mode: int | None = None) -> Iterator[IO[bytes]]:
    """A temporary file next to ``target``, renamed onto it on success and removed on failure.

    The parent folder is created if needed; the data is fsynced before the
    rename, so a crash leaves either the old file or the new one. ``mode``
    sets the permissions before the rename (``mkstemp`` makes files 0600).
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        with os.fdopen(handle, "wb") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def write_atomic(target: Path, data: bytes, mode: int | None = None) -> None:
    """Write ``data`` to ``target`` through :func:`atomic_file`."""
    with atomic_file(target, mode) as out:
        out.write(data)
