"""One SIGALRM deadline for the storage tests whose regression would block rather than fail."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType


@contextlib.contextmanager
def alarm(seconds: float, error: type[BaseException], what: str) -> Iterator[None]:
    """Raise ``error`` in the block after ``seconds`` (SIGALRM: main thread, POSIX; elsewhere no limit).

    ``error`` should derive from :class:`BaseException` only, so that no library ``except Exception``
    swallows it.
    """
    if not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum: int, frame: FrameType | None) -> None:
        raise error(f"{what} ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
