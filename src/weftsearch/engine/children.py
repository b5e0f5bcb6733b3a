"""Forked children that write segment files, and the process settings they run with.

A commit of a large buffer and a background merge write their segment in a
forked child, so searching threads keep this interpreter's GIL. This module
holds that machinery, apart from the index's API: the ``prctl`` lookup done
before any fork, the death signal that follows the parent, the CPU priority a
child takes (:data:`COMMIT_PRIORITIES`), and the file a child writes and the
parent installs (:class:`ChildFile`, :func:`write_in_child`). The parallel
analysis of :mod:`weftsearch.engine.ingest` forks its workers with the same helpers.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import signal
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from weftsearch.errors import IndexStorageError
from weftsearch.storage.codec import FileStamp
from weftsearch.storage.directory import IndexDirectory
from weftsearch.storage.pausing import Pause, no_pause
from weftsearch.storage.segment import SegmentReader
from weftsearch.storage.segment_merge import merge_columns
from weftsearch.storage.segment_writer import SegmentDocument, segment_columns, write_columns

__all__ = [
    "COMMIT_PRIORITIES",
    "ChildFile",
    "die_with_parent",
    "encode_here",
    "encode_in_child",
    "full_collections_deferred",
    "libc_prctl",
    "lower_priority",
    "merge_in_child",
    "write_in_child",
]

_PRCTL_FUNCTION: Any = None


def libc_prctl() -> Any:
    """``prctl`` from libc, looked up once in the parent (``None`` where there is none).

    Looked up before any fork: ``dlopen`` in a child forked from a threaded
    process could wait forever on a loader lock another thread held at the fork.
    """
    global _PRCTL_FUNCTION
    if _PRCTL_FUNCTION is None:
        try:
            _PRCTL_FUNCTION = ctypes.CDLL(None).prctl
        except (OSError, AttributeError):
            _PRCTL_FUNCTION = False
    return _PRCTL_FUNCTION or None


def die_with_parent(parent: int) -> None:
    """In a forked child: ask the kernel to kill us when the parent dies (Linux).

    No race: the death signal is armed first, then the parent is checked; if
    the parent died before the signal was armed, we have been re-parented
    already and exit here. (The signal follows the thread that forked, not
    the process; that thread waits in ``waitpid`` until we exit, so only the
    process's death can fire it.)
    """
    prctl = _PRCTL_FUNCTION or None
    if prctl is not None:
        with contextlib.suppress(OSError):
            prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


#: CPU priorities a commit's child encoder may run at (see ``Index``).
COMMIT_PRIORITIES = ("idle", "normal")


def lower_priority(priority: str) -> None:
    """In a forked child: take only the CPU time searches leave (best effort).

    ``SCHED_IDLE`` rather than a nice value, because a sleeping search thread
    that wakes preempts an idle-class task at once, where a niced one waits for
    the scheduler's next tick (the measurements, with their command, are in
    docs/BENCHMARKS.md, "Persistence"). An unprivileged process cannot leave the
    idle class again, which is harmless here: the child exits after one segment.
    """
    if priority == "normal":
        return
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (OSError, AttributeError):  # not Linux: the lowest nice value instead
        with contextlib.suppress(OSError):
            os.nice(19)


_DEFER_LOCK = threading.Lock()
#: Forked children alive under :func:`full_collections_deferred`, and the collector's
#: thresholds the first of them replaced (``None``: it changed nothing).
_DEFER_STATE: dict[str, Any] = {"children": 0, "saved": None, "set": None}
#: The oldest generation's threshold while a child lives: no automatic full collection.
_NO_FULL_COLLECTION = 2**30


@contextlib.contextmanager
def full_collections_deferred() -> Iterator[None]:
    """While a forked child lives, the parent makes no automatic full garbage collection.

    A full collection walks every tracked object and writes to its header:
    tens of milliseconds of GIL on a large heap (32-106 ms measured in a
    searching thread with SciFact and a 20,000-document commit loaded), and
    with a child alive each page it writes is copied first (copy-on-write).
    The oldest generation's threshold is raised for the child's life, so
    young collections go on as usual and the full collection that falls due
    meanwhile runs after it, as it would have (the collector's own counters
    are left alone; ``gc.freeze`` was not used: a full collection of the
    unfrozen rest would reset them, and the whole heap would be walked again
    soon after the thaw). ``gc.collect()`` called explicitly still collects.

    Nested children (two indexes forking at once) share one change, undone
    when the last ends. The thresholds are put back only if nobody changed
    them meanwhile, so an application's own ``gc.set_threshold`` wins.
    """
    with _DEFER_LOCK:
        if _DEFER_STATE["children"] == 0:
            saved = gc.get_threshold()
            if saved[0] and saved[2] < _NO_FULL_COLLECTION:  # threshold 0: collection is off already
                gc.set_threshold(saved[0], saved[1], _NO_FULL_COLLECTION)
                _DEFER_STATE["saved"], _DEFER_STATE["set"] = saved, gc.get_threshold()
        _DEFER_STATE["children"] += 1
    try:
        yield
    finally:
        with _DEFER_LOCK:
            _DEFER_STATE["children"] -= 1
            saved, made = _DEFER_STATE["saved"], _DEFER_STATE["set"]
            if _DEFER_STATE["children"] == 0 and saved is not None:
                if gc.get_threshold() == made:
                    gc.set_threshold(*saved)
                _DEFER_STATE["saved"] = _DEFER_STATE["set"] = None


@dataclass(frozen=True)
class ChildFile:
    """The segment file a forked child writes, and how (:func:`write_in_child`).

    Attributes:
        directory: the index directory it goes in.
        name: its final name (``seg-NNNNNN.wseg``).
        stamp: the index id and segment number its header carries.
        priority: the commit priority the child runs at.
        lock_fd: the writer lock's descriptor, which the child closes (``None``: no lock).

    """

    directory: IndexDirectory
    name: str
    stamp: FileStamp
    priority: str
    lock_fd: int | None


def write_in_child(write: Callable[[Path], object], target: ChildFile) -> bool:
    """Run ``write(temporary_path)`` in a forked child, then install the file as ``target.name``.

    Returns whether it succeeded. The child shares the parent's memory
    copy-on-write, so nothing is pickled. It first closes its copy of the
    writer lock's descriptor ``target.lock_fd``: an ``flock`` belongs to the open file description, which the
    parent keeps open, so the parent still holds the lock, and a child that
    outlives a killed parent (it is sent SIGKILL when the parent dies, but may
    wait for CPU time to act on it) holds nothing that blocks the next writer.
    It writes only a temporary file (``name.tmp-<child pid>``, swept by the
    next writer if nobody installs it) and exits without running any of the
    parent's handlers; the parent, which holds the lock, renames it to
    ``name``. So an orphaned child can never rename a file over one a later
    writer made. The parent waits in ``waitpid``, which releases the GIL.

    ``write`` runs in a child forked from a threaded process: it must take no
    lock another thread of the parent may have held at the fork (a segment
    reader's memo lock, say): it opens what it reads afresh.
    """
    directory, name = target.directory, target.name
    parent = os.getpid()
    libc_prctl()
    with full_collections_deferred():
        try:
            pid = os.fork()
        except OSError:
            return False  # no process to spare: the caller writes in its own thread
        if pid == 0:  # pragma: no cover - runs in the child
            code = 1
            try:
                if target.lock_fd is not None:
                    os.close(target.lock_fd)
                die_with_parent(parent)
                lower_priority(target.priority)
                # A collection here would walk (and so copy-on-write) the parent's
                # whole heap; the child makes no cycles that matter and exits soon.
                gc.disable()
                write(directory.path / f"{name}.tmp-{os.getpid()}")
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        (directory.path / f"{name}.tmp-{pid}").unlink(missing_ok=True)
        return False
    try:
        directory.install(directory.path / f"{name}.tmp-{pid}", name)
    except IndexStorageError:
        return False
    return True


def encode_in_child(
    documents: Sequence[SegmentDocument],
    dim: int | None,
    dtype: str,
    target: ChildFile,
    text_fields: Sequence[str] = (),
    positions_fields: Collection[str] = (),
) -> bool:
    """Encode and write a committed buffer's segment in a forked child (:func:`write_in_child`).

    It is written section by section, so the child never holds the encoded
    segment whole.
    """

    def write(path: Path) -> None:
        columns = segment_columns(
            documents, dim, dtype, text_fields=text_fields, positions_fields=positions_fields
        )
        write_columns(columns, path, target.stamp)

    return write_in_child(write, target)


def encode_here(
    documents: Sequence[SegmentDocument],
    dim: int | None,
    dtype: str,
    target: ChildFile,
    text_fields: Sequence[str] = (),
    positions_fields: Collection[str] = (),
    pause: Pause = no_pause,
) -> bool:
    """What :func:`encode_in_child` does, in this thread: the same file, written the same way.

    For a commit with nothing to keep the GIL for (no other thread) at
    ``"normal"`` priority, where a child only costs: the fork, and the
    copy-on-write of every page of the buffer the child touches (about a
    quarter of a SciFact build's CPU). Written section by section to
    ``name.tmp-<pid>``, then installed as ``target.name``; ``False`` (the
    temporary file removed) if writing failed, so the caller encodes as it
    would after a failed child, and reports the error then.
    """
    directory, name = target.directory, target.name
    temporary = directory.path / f"{name}.tmp-{os.getpid()}"
    try:
        columns = segment_columns(
            documents, dim, dtype, pause=pause, text_fields=text_fields, positions_fields=positions_fields
        )
        write_columns(columns, temporary, target.stamp, pause=pause)
        del columns
        directory.install(temporary, name)
    except Exception:  # any failure: the caller's own encoding reports it
        temporary.unlink(missing_ok=True)
        return False
    return True


def merge_in_child(sources: Sequence[tuple[str, NDArray[np.bool_]]], target: ChildFile) -> bool:
    """Merge committed segments into ``target.name`` in a forked child (:func:`write_in_child`).

    ``sources`` pairs each committed segment's file name with the mask of its
    documents to drop. The child opens every source afresh (its own memory
    maps and locks: the parent's readers may have been locked by a searching
    thread at the fork) and verifies what it reads, as a merge in the
    writer's thread does, so a damaged source fails the child and the caller's
    own merge then reports it. The merged postings wait in an unlinked file
    in the index folder, as there.
    """
    folder = target.directory.path

    def write(path: Path) -> None:
        readers = [(SegmentReader(folder / source), ~drop) for source, drop in sources]
        write_columns(merge_columns(readers, spill=folder), path, target.stamp)

    return write_in_child(write, target)
