"""Opening the files of an index directory: regular files only, never a link, never blocking.

Every file the engine reads under an index directory (``MANIFEST``, segment and
tombstone files, ``write.lock``, the server's ranking profiles) goes through
:func:`open_regular`. An index directory holds nothing but regular files the
engine wrote itself, so anything else in a listed place is damage, and some of
it is dangerous to open naively: a FIFO blocks ``open`` for ever (until a
writer appears), a symbolic link to ``/dev/zero`` reads endlessly, a device may
act on being opened, and a ``write.lock`` that is a symbolic link would make the
writer create, lock or truncate a file elsewhere.

So the file is first ``lstat``-ed (a device, FIFO, socket, directory or link is
refused without being opened at all), then opened with ``O_NOFOLLOW`` (a link
put there meanwhile fails instead of being followed) and ``O_NONBLOCK`` (a FIFO
put there meanwhile opens at once instead of waiting for a writer), and the
descriptor is checked with ``fstat``: what was opened is what is read, with no
window between a check and the open.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from weftsearch.errors import CorruptIndexError

__all__ = ["describe_kind", "open_regular", "read_regular"]

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISLNK, "a symbolic link"),
)

# O_NOFOLLOW and O_NONBLOCK exist on every POSIX system this runs on; the getattr keeps
# the module importable elsewhere (where the lstat and fstat checks still refuse).
_SAFE = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
# What open(2) answers for a link under O_NOFOLLOW (ELOOP; EMLINK on some BSDs), for a
# socket (ENXIO) and for a directory opened for writing (EISDIR).
_NOT_REGULAR_ERRNOS = frozenset({errno.ELOOP, errno.EMLINK, errno.ENXIO, errno.EISDIR, errno.EOPNOTSUPP})


def describe_kind(mode: int) -> str:
    """What kind of file ``mode`` (an ``st_mode``) is, as a phrase: ``"a FIFO (named pipe)"``."""
    for test, phrase in _KINDS:
        if test(mode):
            return phrase
    return "a regular file" if stat.S_ISREG(mode) else f"a file of type {stat.S_IFMT(mode):#o}"


def _refusal(path: Path, mode: int) -> CorruptIndexError:
    kind = describe_kind(mode)
    if stat.S_ISLNK(mode):
        with contextlib.suppress(OSError):  # gone meanwhile: the kind alone still says why
            kind += f" to {os.readlink(path)}"
    return CorruptIndexError(f"{path}: is {kind}, not a regular file; refused without opening it")


def open_regular(path: Path, flags: int = os.O_RDONLY) -> int:
    """Open ``path`` with ``flags`` if it is a regular file; return the descriptor.

    Never follows a symbolic link in the last component, never blocks on a
    FIFO and never opens a device (see the module docstring). The caller owns
    the descriptor. ``flags`` may add ``O_RDWR``, ``O_CREAT`` and ``O_EXCL``.

    Raises:
        FileNotFoundError: ``path`` does not exist (callers retry or report it).
        CorruptIndexError: ``path`` is a directory, FIFO, socket, device or
            symbolic link (the message names the file and what it is).
        OSError: any other failure of ``lstat``, ``open`` or ``fstat``.

    """
    try:
        before = os.lstat(path)
    except FileNotFoundError:
        if not flags & os.O_CREAT:
            raise
    else:
        if not stat.S_ISREG(before.st_mode):
            raise _refusal(path, before.st_mode)
    try:
        fd = os.open(path, flags | _SAFE, 0o644)
    except OSError as exc:
        if exc.errno in _NOT_REGULAR_ERRNOS:
            # Replaced by something else since the lstat: say what is there now.
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                raise exc from None
            if not stat.S_ISREG(mode):
                raise _refusal(path, mode) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _refusal(path, mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: Path) -> bytes:
    """The whole content of the regular file ``path``, opened as :func:`open_regular` opens it.

    Raises:
        FileNotFoundError, CorruptIndexError, OSError: as :func:`open_regular`.

    """
    fd = open_regular(path)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
