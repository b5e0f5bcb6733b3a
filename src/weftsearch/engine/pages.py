"""Pages of a ranking: a plain ``offset`` and an opaque cursor (``after=``), ``search_after`` style.

A page is a slice of one deeper search. ``search(query, k, ..., offset=n)``
returns hits ``n .. n + k - 1`` (0-based) of ``search(query, n + k, ...)``
with the same ``depth`` argument: the same keys, scores (to the bit), order
and explanations, with :attr:`Hit.rank <weftsearch.Hit.rank>` counting from
``n + 1``. ``n + k`` is bounded as ``k`` is (``MAX_K``), and the page costs
what that deeper search costs (fusion needs every stream to the depth it
ranks at), so deep pages cost more than the first.

A cursor (:attr:`SearchResults.next_cursor <weftsearch.SearchResults.next_cursor>`)
carries what the next page needs: the last hit's fused score (its float64
bits) and key, how many hits the pages so far held, the snapshot generation
they came from, and a digest of the query and the ranking (text, vector,
seeds, time, filter, each scorer and the fuser with their parameters, the
``depth`` argument). ``search(..., after=cursor)`` searches that same
generation and returns the hits ranked after (score descending, key
ascending) the cursor's hit, so concatenated pages equal one search with
``k = pages x size``, ties across a page boundary included. A cursor is
URL-safe text, sealed with a keyed hash: an altered cursor, one from another
index, or one replayed with another query or ranking is an
:class:`~weftsearch.errors.InvalidCursorError`.

With two or more scorers and ``depth=None`` each page asks the scorers for
``max(offset + k, 100)`` candidates, as the deeper search would: pages past
the 100th hit then come from ranking at different depths, so pass ``depth``
(at least the deepest hit you will ask for) to page a fused ranking further
than that. One exact scorer (BM25, an exhaustive vector scan) ranks the same
at every depth.

**Retention** (which generations a cursor may name): an
:class:`~weftsearch.Index` keeps the snapshots of the last
:data:`CURSOR_GENERATIONS` generations it issued cursors on (a cursor is
issued, and its snapshot kept, when :attr:`next_cursor` is first read), and
accepts any snapshot of the cursor's generation still held elsewhere; a
cursor naming any other generation raises
:class:`~weftsearch.errors.CursorExpiredError`. Kept snapshots hold their
segments' memory maps (and the disk of files a merge replaced) until they
fall out of the window or the index is closed. A sharded index accepts
cursors of its current cut only.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import os
import re
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from weftsearch.engine.protocols import Fuser, Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.snapshot import Snapshot
from weftsearch.engine.stream import MAX_K
from weftsearch.errors import CursorExpiredError, InvalidCursorError, InvalidParameterError

__all__ = [
    "CURSOR_GENERATIONS",
    "PageStart",
    "CursorSeal",
    "IndexCursors",
    "check_offset",
    "ranking_digest",
]

#: Generations an :class:`~weftsearch.Index` keeps for the cursors it issued (the newest ones).
CURSOR_GENERATIONS = 8

_VERSION = 1
# version, generation, position, score bits, digest (16 bytes); then the key's UTF-8, then the seal.
_HEAD = struct.Struct(">BQQQ16s")
_SEAL = 16
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_TOKEN = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True, slots=True)
class PageStart:
    """Where a page starts: after the hit ``(score, key)``, the ``position``-th of the ranking.

    Attributes:
        generation: the snapshot generation (a sharded index's cut) the pages read.
        position: hits on the pages so far (the next page's first hit is ranked ``position + 1``).
        score: the last hit's fused score.
        key: the last hit's key.
        digest: the query and ranking the pages are of (:func:`ranking_digest`).

    """

    generation: int
    position: int
    score: float
    key: str
    digest: bytes


def check_offset(offset: object, k: int) -> int:
    """``offset`` as an int from 0 with ``offset + k`` at most ``MAX_K``, else :class:`InvalidParameterError`.

    ``k`` is the (checked) page size.
    """
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or offset < 0:
        raise InvalidParameterError(f"offset must be a non-negative integer, got {offset!r}")
    if int(offset) + k > MAX_K:
        raise InvalidParameterError(
            f"offset + k must be at most {MAX_K:,} (weftsearch.engine.stream.MAX_K), "
            f"got offset {offset!r} + k {k!r}"
        )
    return int(offset)


def _describe(part: object) -> str:
    """A part of the ranking as text: its type, name and repr (an address in a repr is dropped)."""
    kind = type(part)
    return f"{kind.__module__}.{kind.__qualname__}|{getattr(part, 'name', '')}|{_ADDRESS.sub('', repr(part))}"


def ranking_digest(query: Query, fuser: Fuser, scorers: Sequence[Scorer], depth: int | None) -> bytes:
    """16 bytes naming a query and its ranking: what a cursor is bound to.

    Covers the query's text, its parsed tree (``to_string()``, or nothing for
    plain text, so a plain query's cursor does not page a parsed one), vector
    (its float32 bytes), seeds, time and filter (canonical form), each scorer
    and the fuser (type, name, repr: the built-in ones' reprs show their
    parameters) and the ``depth`` argument as given. The page size ``k`` is
    not part of it: pages may differ in size.
    """
    digest = hashlib.blake2b(digest_size=16, person=b"weft-rank")
    vector = b"" if query.vector is None else np.ascontiguousarray(query.vector, np.float32).tobytes()
    for part in (
        query.text.encode(),
        b"" if query.tree is None else b"tree:" + query.tree.to_string().encode(),
        vector,
        "\x00".join(query.seeds).encode(),
        repr(query.timestamp).encode(),
        ("" if query.filter is None else str(query.filter)).encode(),
        _describe(fuser).encode(),
        *(_describe(scorer).encode() for scorer in scorers),
        repr(depth).encode(),
    ):
        digest.update(struct.pack(">Q", len(part)))
        digest.update(part)
    return digest.digest()


class CursorSeal:
    """Writes and reads one index's cursors, sealed with a key so they cannot be altered unseen.

    The key comes from the index id (so every process serving one on-disk
    index reads the others' cursors), or is random for an index in memory.
    The seal detects damage and mixing up indexes; it is not a secret
    against someone who knows the index id (a forged cursor can only move
    where a page of a search the caller may run anyway starts).
    """

    def __init__(self, index_id: str) -> None:
        self._key = (
            hashlib.blake2b(index_id.encode(), digest_size=32, person=b"weft-cursor").digest()
            if index_id
            else os.urandom(32)
        )

    def _seal(self, body: bytes) -> bytes:
        return hmac.new(self._key, body, hashlib.sha256).digest()[:_SEAL]

    def write(self, start: PageStart) -> str:
        """``start`` as URL-safe text (base64url, no padding)."""
        bits = struct.unpack(">Q", struct.pack(">d", start.score))[0]
        body = _HEAD.pack(_VERSION, start.generation, start.position, bits, start.digest) + start.key.encode()
        return base64.urlsafe_b64encode(body + self._seal(body)).rstrip(b"=").decode("ascii")

    def issuer(
        self, generation: int, query: Query, fuser: Fuser, scorers: Sequence[Scorer], depth: int | None
    ) -> Callable[[int, float, str], str]:
        """What issues the cursors of one search: ``issue(position, score, key)``.

        The search read ``generation`` and ranked ``query`` by ``scorers`` fused
        by ``fuser`` at ``depth``; ``issue`` makes the cursor of the page after
        hit ``(score, key)``, the ``position``-th (``SearchResults._offer_cursor``
        calls it when ``next_cursor`` is first read). The ranking's digest is
        made then, not by every search.
        """

        def issue(position: int, score: float, key: str) -> str:
            digest = ranking_digest(query, fuser, scorers, depth)
            return self.write(PageStart(generation, position, score, key, digest))

        return issue

    def read(self, cursor: object) -> PageStart:
        """The :class:`PageStart` a cursor holds; :class:`InvalidCursorError` unless this index sealed it."""
        if not isinstance(cursor, str):
            raise InvalidCursorError(
                f"a cursor is a string (results.next_cursor), got {type(cursor).__name__}"
            )
        shown = cursor if len(cursor) <= 40 else cursor[:37] + "..."
        if not _TOKEN.fullmatch(cursor) or len(cursor) % 4 == 1:
            raise InvalidCursorError(f"not a cursor (not URL-safe base64): {shown!r}")
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != cursor:
            # Another spelling of the same bytes (the unused low bits of the last character
            # changed): not the text this index issued.
            raise InvalidCursorError(f"cursor {shown!r} was not issued by this index, or was altered")
        if len(raw) < _HEAD.size + _SEAL + 1:
            raise InvalidCursorError(f"not a cursor (too short): {shown!r}")
        body, seal = raw[:-_SEAL], raw[-_SEAL:]
        if not hmac.compare_digest(seal, self._seal(body)):
            raise InvalidCursorError(f"cursor {shown!r} was not issued by this index, or was altered")
        version, generation, position, bits, digest = _HEAD.unpack_from(body)
        if version != _VERSION:  # pragma: no cover - sealed by this code, so always this version
            raise InvalidCursorError(f"cursor {shown!r} has version {version}, not {_VERSION}")
        score = struct.unpack(">d", struct.pack(">Q", bits))[0]
        return PageStart(generation, position, score, body[_HEAD.size :].decode(), digest)

    def check(
        self,
        cursor: object,
        query: Query,
        fuser: Fuser,
        scorers: Sequence[Scorer],
        depth: int | None,
        offset: object,
    ) -> PageStart:
        """Read ``cursor`` and check it belongs to this query and ranking (``offset`` must be 0)."""
        if not (isinstance(offset, (int, np.integer)) and not isinstance(offset, bool) and offset == 0):
            raise InvalidParameterError(f"give offset or after, not both (offset {offset!r} with a cursor)")
        start = self.read(cursor)
        if start.digest != ranking_digest(query, fuser, scorers, depth):
            raise InvalidCursorError(
                "the cursor was made for another query or ranking (text, vector, seeds, time, filter, "
                "scorers, fuser and depth must be those of the first page)"
            )
        return start


class IndexCursors:
    """An :class:`~weftsearch.Index`'s cursor bookkeeping: the seal and the snapshots cursors may name.

    Kept out of the index so that its module holds the index's state and
    writes, and the retention rule (module docstring, "Retention") lives
    beside the cursor format it serves. Thread-safe: searching threads issue
    cursors while a writer publishes snapshots and may close the index.
    """

    def __init__(self) -> None:
        #: Generation -> its snapshot, for the newest :data:`CURSOR_GENERATIONS` generations
        #: a cursor was issued on (oldest first).
        self.kept: OrderedDict[int, Snapshot] = OrderedDict()
        self._lock = threading.Lock()
        self._seal: CursorSeal | None = None
        self._closed = False

    def seal(self, index_id: str) -> CursorSeal:
        """The seal of the index's cursors, made on first use.

        Made lazily because an index learns its id after construction
        (``Index.create``/``Index.open`` set it), and every search before then
        is impossible anyway.
        """
        seal = self._seal
        if seal is None:
            seal = self._seal = CursorSeal(index_id)
        return seal

    def issuer(
        self,
        index_id: str,
        snapshot: Snapshot,
        query: Query | str,
        fuser: Fuser,
        scorers: Sequence[Scorer],
        depth: int | None,
    ) -> Callable[[int, float, str], str]:
        """:meth:`CursorSeal.issuer` of a search of ``snapshot``, which each cursor it issues keeps.

        Kept (unless closed) when the cursor is issued, that is when
        ``next_cursor`` is first read, so searches whose cursor nobody reads
        keep nothing. A partial of :meth:`issue`: nothing is made per search
        but the partial (the seal and the ranking's digest wait for the read;
        a query given as its text, already checked by the search, becomes its
        :class:`Query` then too).
        """
        return functools.partial(self.issue, index_id, snapshot, query, fuser, scorers, depth)

    def issue(
        self,
        index_id: str,
        snapshot: Snapshot,
        query: Query | str,
        fuser: Fuser,
        scorers: Sequence[Scorer],
        depth: int | None,
        position: int,
        score: float,
        key: str,
    ) -> str:
        """The cursor of the page after hit ``(score, key)``, the ``position``-th of a search of ``snapshot``.

        Keeps ``snapshot`` for the next page (unless closed), then seals the
        cursor as :meth:`CursorSeal.issuer`'s function does.
        """
        with self._lock:
            if not self._closed:
                self.kept[snapshot.generation] = snapshot
                self.kept.move_to_end(snapshot.generation)
                while len(self.kept) > CURSOR_GENERATIONS:
                    self.kept.popitem(last=False)
        asked = Query(text=query) if isinstance(query, str) else query
        digest = ranking_digest(asked, fuser, scorers, depth)
        return self.seal(index_id).write(PageStart(snapshot.generation, position, score, key, digest))

    def snapshot(
        self, generation: int, current: Callable[[], Snapshot], held: Iterable[Snapshot]
    ) -> Snapshot:
        """The snapshot of ``generation`` for a cursor, else :class:`CursorExpiredError`.

        Looked for among the kept ones, then ``current()`` (the index's
        current snapshot), then ``held`` (every snapshot the index made that
        someone still holds: a weak set, which may change size while read).
        """
        with self._lock:
            kept = self.kept.get(generation)
        if kept is not None:
            return kept
        now = current()
        if now.generation == generation:
            return now
        for _ in range(3):
            try:
                found = [snapshot for snapshot in held if snapshot.generation == generation]
            except RuntimeError:  # a writer published a snapshot meanwhile (the set changed size): look again
                continue
            if found:
                return found[0]
            break
        raise CursorExpiredError(
            f"the cursor's generation {generation} is no longer kept (the index is at generation "
            f"{now.generation} and keeps the last {CURSOR_GENERATIONS} generations it issued "
            "cursors on): search again from the first page"
        )

    def close(self) -> None:
        """Drop the kept snapshots (their memory maps) and keep none from now on."""
        with self._lock:
            self._closed = True
            self.kept.clear()
