"""Work in short slices: the helpers that let encoding share the interpreter with searches.

A commit or a merge encodes a segment in the writer's own process, beside
threads that search. CPython runs one thread's bytecode at a time (the GIL):
a thread inside one long C call (sorting a million strings, joining a
hundred megabytes) holds it throughout, and a thread running bytecode keeps
it until the switch interval (5 ms) forces it out, and takes it back whenever
a searching thread lets go of it. Either way a search waits.

So every loop of the encoder over documents, terms or bytes runs in slices
and calls a *pause* between slices. The storage layer only calls it; the
engine decides what it does (see ``weftsearch.engine.index``: sleep for a
moment once about a millisecond of work has passed, so searching threads take
the GIL). Heavy numpy calls (sorts, gathers, BLAS) release the GIL on their
own and need no slicing. Nothing here changes a result: the same inputs give
the same bytes with or without pauses.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator, Sequence
from itertools import islice
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "Pause",
    "no_pause",
    "SLICE",
    "slices",
    "sorted_in_slices",
    "join_in_slices",
    "strings_array",
    "copy_in_slices",
]

T = TypeVar("T")

#: A callable the encoder calls between slices of work.
Pause = Callable[[], None]

#: Items (documents, terms, records) handled between two calls of the pause.
SLICE = 256

#: Bytes copied between two calls of the pause.
_BYTE_SLICE = 1 << 20


def no_pause() -> None:
    """The pause of a caller with no one to share the interpreter with: do nothing."""


def slices(count: int, size: int = SLICE) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of consecutive slices of ``range(count)``, each at most ``size`` long."""
    for start in range(0, count, size):
        yield start, min(start + size, count)


def sorted_in_slices(items: Sequence[T], key: Callable[[T], Any] | None, pause: Pause) -> list[T]:
    """``sorted(items, key=key)``, pausing between slices.

    Sorts slices of :data:`SLICE` items, then merges them (``heapq.merge``)
    a slice at a time. The result equals ``sorted``'s for unique keys (both
    are stable otherwise too: merge takes equal keys from earlier slices first).
    O(n log n).
    """
    if len(items) <= SLICE or pause is no_pause:
        # Nobody to pause for (a forked encoder, a bulk build): one C-level sort, the same order.
        return sorted(items, key=key)  # type: ignore[type-var, arg-type]
    runs = []
    for start, end in slices(len(items)):
        runs.append(sorted(items[start:end], key=key))  # type: ignore[type-var, arg-type]
        pause()
    out: list[T] = []
    ends: list[tuple[Any, Any]] = [
        (run[0], run[-1]) if key is None else (key(run[0]), key(run[-1])) for run in runs
    ]
    if all(last <= first for (_, last), (first, _) in itertools.pairwise(ends)):
        # Input already in order, or nearly (a bulk load in key order): the sorted slices follow
        # one another, so they are the merge's output as they are, with no comparison per item.
        for run in runs:
            out.extend(run)
            pause()
        return out
    merged = heapq.merge(*runs, key=key)  # type: ignore[arg-type]
    while True:
        part = list(islice(merged, SLICE))
        if not part:
            return out
        out.extend(part)
        pause()


def join_in_slices(parts: Sequence[bytes], pause: Pause) -> NDArray[np.uint8]:
    """``b"".join(parts)`` as a uint8 array, built a slice of parts at a time."""
    total = int(np.fromiter(map(len, parts), dtype=np.int64, count=len(parts)).sum())
    out = np.empty(total, dtype=np.uint8)
    position = 0
    for start, end in slices(len(parts)):
        chunk = b"".join(parts[start:end])
        out[position : position + len(chunk)] = np.frombuffer(chunk, dtype=np.uint8)
        position += len(chunk)
        pause()
    return out


def strings_array(strings: Sequence[str], pause: Pause) -> NDArray[np.str_]:
    """``np.array(strings, dtype=np.str_)``, converted a slice at a time."""
    if len(strings) <= SLICE:
        return np.array(strings, dtype=np.str_)
    parts = []
    for start, end in slices(len(strings)):
        parts.append(np.array(strings[start:end], dtype=np.str_))
        pause()
    return np.concatenate(parts)


def copy_in_slices(target: memoryview, offset: int, source: memoryview, pause: Pause) -> None:
    """``target[offset : offset + len(source)] = source`` a megabyte at a time."""
    for start in range(0, len(source), _BYTE_SLICE):
        end = min(start + _BYTE_SLICE, len(source))
        target[offset + start : offset + end] = source[start:end]
        pause()
