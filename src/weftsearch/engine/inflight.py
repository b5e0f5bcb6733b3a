"""How many searches are running now: per index (for its writer) and in the whole process (for scorers).

Two readers of the same count, for two reasons:

* an index's writer rests between slices of encoding while one of *its*
  searches runs (``weftsearch.engine.index``: commits and merges yield);
* a scorer with two paths of equal results picks the one that releases the
  GIL when *any* other search runs in this process. CPython runs one
  thread's bytecode at a time, so a search that holds the GIL makes every
  other search wait; one that spends its time in a compiled call without the
  GIL lets them run beside it. Alone, the faster path wins; in company, the
  one that shares (``BM25Scorer.score``: numpy on small snapshots, the
  compiled kernel when searches overlap; measured in docs/BENCHMARKS.md,
  "Load ladder").

The counts are exact at every moment (one process-wide lock around each
change) and cost two uncontended lock round trips a search.
"""

from __future__ import annotations

import threading

__all__ = ["SearchesInFlight", "searches_in_flight"]

_process_lock = threading.Lock()
_process_count = 0


def searches_in_flight() -> int:
    """Searches running now in this process, in any thread and any index (this one included). O(1)."""
    return _process_count


class SearchesInFlight:
    """A context manager counting one index's running searches (and the process's). Thread-safe."""

    __slots__ = ("_count",)

    def __init__(self) -> None:
        self._count = 0

    # Both counts change under the one process-wide lock: one lock round trip on entry
    # and one on exit (a search's every microsecond counts on a small index).
    def __enter__(self) -> None:
        global _process_count
        with _process_lock:
            self._count += 1
            _process_count += 1

    def __exit__(self, *exc: object) -> None:
        global _process_count
        with _process_lock:
            _process_count -= 1
            self._count -= 1

    def __bool__(self) -> bool:
        """Whether any search of this index is running."""
        return self._count > 0
