"""How a writer shares the interpreter with searches: the pause its encoder takes between slices.

A commit or merge running in this process (not in a forked child) calls a
:class:`YieldToSearches` between slices of work
(:mod:`weftsearch.storage.pausing`), and drops a sealed buffer with
:func:`release_gradually`, so a search never waits long for the GIL.
"""

from __future__ import annotations

import time

from weftsearch.engine.inflight import SearchesInFlight
from weftsearch.storage.segment_writer import SegmentDocument

__all__ = ["YieldToSearches", "release_gradually"]

#: Seconds of work a committing or merging thread does between two rests
#: while searches run (the longest a search waits for it at a time).
_WORK_SLICE_S = 0.00025
#: Seconds it then rests, so that searching threads take the GIL: the writer
#: gets at most a fifth of the interpreter while searches run.
_REST_S = 0.001
#: Documents freed between two pauses when a sealed buffer is dropped.
_FREE_SLICE = 32


class YieldToSearches:
    """The pause the encoder calls between slices of work (see :mod:`weftsearch.storage.pausing`).

    CPython runs one thread's bytecode at a time. A thread encoding a segment
    would keep the GIL until the switch interval (5 ms) forces it out, and
    take it back whenever a searching thread lets go of it (every larger numpy
    call does): a search would wait 5 ms at each such point, and share the
    interpreter half and half with the commit. So while any search runs, the
    encoder rests 1 ms after each quarter millisecond of work: a search waits
    at most that quarter millisecond at a time, and the commit takes at most a
    fifth of the interpreter (it runs longer instead). With no search running
    it never rests.
    """

    __slots__ = ("_searches", "_since")

    def __init__(self, searches: SearchesInFlight) -> None:
        self._searches = searches
        self._since = time.perf_counter()

    def __call__(self) -> None:
        """Rest if a quarter millisecond of work has passed since the last rest and a search runs."""
        now = time.perf_counter()
        if now - self._since >= _WORK_SLICE_S:
            if self._searches:
                time.sleep(_REST_S)
            self._since = time.perf_counter()


def release_gradually(entries: dict[str, SegmentDocument], pause: YieldToSearches) -> None:
    """Drop the last references to ``entries`` a slice at a time, pausing between slices.

    Freeing a dict of many analysed documents in one go is a single C call
    that holds the GIL throughout (tens of milliseconds for 20,000 documents).
    """
    while entries:
        for _ in range(min(_FREE_SLICE, len(entries))):
            entries.popitem()
        pause()
