"""Snapshots over segments: one immutable, consistent view that scorers read.

A snapshot is a list of *parts*, one per segment (on disk or still in memory),
each with the tombstones in force when the snapshot was taken. Everything a
scorer sees (postings, lengths and collection statistics, vectors, links,
times, stored documents) comes from those parts, so a search never mixes two
states of the index, and writers never block it.

Internal ids are dense integers ``0 .. n_docs - 1`` over the live documents:
part p's live documents get ids ``base_p .. base_p + live_p - 1`` in the
part's key order. They mean something only inside one snapshot; results
leave the engine as keys. Use :meth:`Snapshot.key_rank` to order by key.

Nothing here reads the whole corpus when a snapshot is made: each array is
read from its segment (a memory map) when a scorer first asks for it, and
cached for the life of the snapshot.
"""

from __future__ import annotations

import bisect
import collections
import copy
import functools
import threading
import weakref
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from weftsearch.analysis import Analyzer, SimpleAnalyzer
from weftsearch.documents import Document, FieldValue
from weftsearch.engine.filters import Filter, SegmentFields, as_filter, check_filter, segment_mask
from weftsearch.engine.stream import at_least_kth
from weftsearch.errors import CorruptIndexError, InvalidParameterError, PartialGraphError, UnknownKeyError
from weftsearch.native.bm25 import HIT_PART_FIELDS, compiled_bm25, hits_sound, ties_by_key
from weftsearch.native.scan import inner_products
from weftsearch.schema import DEFAULT_FIELD, Schema
from weftsearch.storage.ivf import worth_probing
from weftsearch.storage.segment import SegmentReader

__all__ = [
    "CollectionStatistics",
    "LinkView",
    "Snapshot",
    "key_positions",
    "link_matrix",
    "SnapshotPart",
    "Postings",
    "VectorBlock",
    "QueryTerms",
    "QUERY_TERMS_ENTRIES",
    "FILTER_MASKS",
]

T = TypeVar("T")
IdArray = NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class CollectionStatistics:
    """The statistics of a whole collection that a snapshot is one part of (a shard).

    A scorer whose scores depend on the collection (BM25's N, average length
    and document frequencies; recency's "now") reads them through
    :attr:`Snapshot.collection_n_docs`, :attr:`Snapshot.collection_avgdl`,
    :meth:`Snapshot.collection_doc_freq` and :attr:`Snapshot.latest_time`,
    which give these values on a snapshot made by
    :meth:`Snapshot.with_statistics`, and the snapshot's own otherwise. A
    sharded search gathers them from every shard first, so each shard scores
    as the single index would (``weftsearch.distributed``).

    Attributes:
        n_docs: live documents in the collection.
        total_length: the sum of their lengths in terms (an integer, so the
            average is the single index's to the bit: ``total_length / n_docs``).
        doc_freq: live documents holding each analysed term; it must hold
            every term a query scored under these statistics uses.
        latest_time: the newest document time (POSIX seconds), ``None`` if no
            document has one.
        field_kinds: every field of the collection with its type, so a filter
            naming a field only other shards hold is checked as the whole
            collection would check it (``None``: the snapshot's own).
        links_complete: whether the snapshot holds every document a link can
            reach; when False (one shard of several), :meth:`Snapshot.links`
            and :meth:`Snapshot.linked` refuse rather than give a part of the
            graph as if it were the whole.
        field_lengths: the total length of each named text field over the
            live documents (an integer, as ``total_length``), for the fields a
            query scores (:meth:`Snapshot.field_avglen`).
        field_doc_freq: per group of text fields (a sorted tuple of names),
            the live documents holding each analysed term in ANY field of the
            group: one field's df for a ``field:term`` leaf, BM25F's
            (``combined_fields``) df for several (:meth:`Snapshot.fields_doc_freq`).
            The default field alone is :attr:`doc_freq`.
        prefix_terms: per (group of text fields, prefix as typed), how many
            distinct dictionary terms the prefix expands to in any field of
            the group over the whole collection (at least one more than the
            limit when there are more), so a shard refuses a prefix the whole
            index would refuse (:meth:`Snapshot.collection_prefix_terms`).

    """

    n_docs: int
    total_length: int
    doc_freq: Mapping[str, int]
    latest_time: float | None = None
    field_kinds: Mapping[str, str] | None = None
    links_complete: bool = True
    field_lengths: Mapping[str, int] | None = None
    field_doc_freq: Mapping[tuple[str, ...], Mapping[str, int]] | None = None
    prefix_terms: Mapping[tuple[tuple[str, ...], str], int] | None = None

    @property
    def avgdl(self) -> float:
        """``total_length / n_docs`` (0.0 when empty), as :attr:`Snapshot.avgdl` computes it."""
        return float(self.total_length / self.n_docs) if self.n_docs else 0.0


@dataclass(frozen=True, slots=True)
class Postings:
    """The postings of a list of terms, concatenated term by term.

    Attributes:
        doc_freq: int64, one entry per requested term: the number of live
            documents holding it (0 for a term the index has never seen).
        ids: int64 internal ids of every posting, term by term in the order
            the terms were asked for, ascending within a term.
        term_freqs: float64 within-document frequency of each posting.
        term_index: int64 position (in the requested list) of each posting's term.

    """

    doc_freq: NDArray[np.int64]
    ids: IdArray
    term_freqs: NDArray[np.float64]
    term_index: NDArray[np.int64]


#: :meth:`Snapshot._split` groups at most this many ids by segment in Python (a loop
#: over a search's few hits costs less than numpy's per-segment passes).
_SPLIT_IN_PYTHON = 256

#: Blocks with at most this many lists rank them with one stable sort; more
#: lists go through the O(nlist) selection (a sort of 256 costs about as much).
_SORT_LISTS_BELOW = 256


@functools.lru_cache(maxsize=64)
def _every_row(count: int) -> NDArray[np.int64]:
    """``arange(count)`` as int64, read-only, shared (one per list count)."""
    rows = np.arange(count, dtype=np.int64)
    rows.setflags(write=False)
    return rows


@dataclass(frozen=True, slots=True)
class VectorBlock:
    """Stored vectors as one contiguous matrix and the ids of its rows.

    Attributes:
        ids: int64, one per row of ``matrix``: the row's internal id, or -1 for
            a row whose document is deleted (skip those rows).
        matrix: ``(len(ids), dim)``, float32 (float16 in a half-precision
            index), read-only (often a memory map).
        centroids: float32 ``(nlist, dim)`` unit centroids of the block's IVF
            lists, or ``None`` when the block is not partitioned.
        list_offsets: uint64 ``(nlist + 1)``: list ``l`` is rows
            ``list_offsets[l] ..< list_offsets[l + 1]``; ``None`` without lists.
        norms: float32 Euclidean norm of each row (computed once per segment),
            or ``None`` where the block was built by hand.

    """

    ids: IdArray
    matrix: NDArray[np.float32]
    centroids: NDArray[np.float32] | None = None
    list_offsets: NDArray[np.uint64] | None = None
    norms: NDArray[np.float32] | None = None

    def lists_to_probe(self, nprobe: int | None) -> int:
        """``nprobe``, or 0 when every row is scanned instead: no lists, ``nprobe=None``, or not worth it.

        Probing is worth it when it reads fewer rows than a scan
        (:func:`~weftsearch.storage.ivf.worth_probing`). O(1).
        """
        if nprobe is None or self.centroids is None:
            return 0
        return nprobe if worth_probing(self.matrix.shape[0], self.centroids.shape[0], nprobe) else 0

    def nearest_lists(self, unit_query: NDArray[np.float32], nprobe: int) -> NDArray[np.int64] | None:
        """The ``nprobe`` lists nearest ``unit_query``, ascending; ``None`` means "scan every row".

        ``None`` when the block has no lists, or when probing would read no
        fewer rows than a scan (:func:`~weftsearch.storage.ivf.worth_probing`).
        Lists are ranked by the inner product of their unit centroid with the
        query (ties: the lower list first; a list whose closeness is NaN is
        never chosen). O(nlist * dim) for the centroids, then one stable sort
        of up to 256 lists, or an O(nlist) selection of more.
        """
        if self.centroids is None or self.list_offsets is None or not self.lists_to_probe(nprobe):
            return None
        nlist = self.centroids.shape[0]
        closeness = inner_products(self.centroids, unit_query, _every_row(nlist))
        if nlist <= _SORT_LISTS_BELOW:
            # A stable sort of -closeness puts ties in list order: the lower lists
            # win, in one call (cheaper than selecting when there are few lists).
            candidates = np.argsort(-closeness, kind="stable")[:nprobe]
            if np.isnan(closeness[candidates[-1]]):  # NaN is sorted last and never chosen
                candidates = candidates[~np.isnan(closeness[candidates])]
            candidates = np.sort(candidates)
        else:
            candidates = at_least_kth(closeness, nprobe)
            if candidates.shape[0] > nprobe:  # ties at the cut: the lower lists win
                order = np.lexsort((candidates, -closeness[candidates]))[:nprobe]
                candidates = np.sort(candidates[order])
        chosen: NDArray[np.int64] = candidates.astype(np.int64, copy=False)
        return chosen

    def probe(self, unit_query: NDArray[np.float32], nprobe: int) -> list[tuple[int, int]] | None:
        """Row ranges ``[start, end)`` of the ``nprobe`` lists nearest ``unit_query``, merged where adjacent.

        ``None`` means "scan every row": the block has no partitions, or
        probing would read no fewer rows than a scan
        (:func:`~weftsearch.storage.ivf.worth_probing`). Lists are ranked by
        the inner product of their unit centroid with the query (ties: the
        lower list first), then visited in row order. This picks candidates;
        scoring them is the scorer's business. O(nlist * dim + nlist log nlist).
        """
        chosen = self.nearest_lists(unit_query, nprobe)
        if chosen is None or self.list_offsets is None:
            return None
        starts = self.list_offsets[chosen].astype(np.int64).tolist()
        ends = self.list_offsets[chosen + 1].astype(np.int64).tolist()
        ranges: list[tuple[int, int]] = []
        for start, end in zip(starts, ends, strict=True):
            if end == start:
                continue
            if ranges and ranges[-1][1] == start:
                ranges[-1] = (ranges[-1][0], end)
            else:
                ranges.append((start, end))
        return ranges


#: Filter masks a snapshot keeps (least recently used dropped first); each is one byte
#: per document (1 MB at a million documents), so 32 of them bound the cache at 32 MB there.
FILTER_MASKS = 32

#: Analysed query texts a :class:`QueryTerms` keeps, least recently used dropped first.
#: Analysing a SciFact query takes 7-35 us (about 10 terms, EnglishAnalyzer, this
#: shared 2-core machine), 2-3% of a BM25 ``Index.search`` today and a larger share
#: as scoring gets faster; a cached text costs a dictionary lookup and a list copy
#: (well under 1 us). It pays where texts repeat: evaluation arms and sweeps run the
#: same queries many times, and real traffic repeats its popular queries. Why 4,096:
#: an LRU smaller than a query set cycled in order misses every time (SciFact's test
#: queries are 1,109 of them), and 4,096 typical entries (about 1 KB each) are 4 MB.
QUERY_TERMS_ENTRIES = 4096

#: Texts longer than this many characters are analysed each time and never cached, so
#: one entry holds at most about 2 KB of text and 15 KB of terms, and the whole cache
#: at most about 70 MB; typical queries (under 100 characters) keep it near 4 MB.
QUERY_TERMS_MAX_TEXT = 500


class QueryTerms:
    """An analyzer's terms of query texts, cached: at most :data:`QUERY_TERMS_ENTRIES` texts (LRU).

    Sound because an analyzer is a pure function of the text (two analyzers
    with one name give the same terms, see
    :class:`~weftsearch.analysis.Analyzer`). An index keeps one for the life
    of its analyzer and shares it with every snapshot, so a query's text is
    analysed once however many snapshots or arms search it. Thread-safe
    (``functools.lru_cache``).
    """

    __slots__ = ("_analyzer", "_cached")

    def __init__(self, analyzer: Analyzer, entries: int = QUERY_TERMS_ENTRIES) -> None:
        self._analyzer = analyzer
        self._cached = functools.lru_cache(maxsize=entries)(self._analyse)

    def _analyse(self, text: str) -> tuple[str, ...]:
        return tuple(self._analyzer.analyze(text))

    def __call__(self, text: str) -> list[str]:
        """The terms of ``text`` (a new list each call). O(1) for a cached text, else the analyzer's cost."""
        if len(text) > QUERY_TERMS_MAX_TEXT:
            return list(self._analyzer.analyze(text))
        return list(self._cached(text))

    def many(self, texts: Sequence[str]) -> list[tuple[str, ...]]:
        """The terms of each of ``texts``, in order, as the cache's own tuples (no copy). O(1) if cached."""
        cached, analyzer = self._cached, self._analyzer
        return [
            cached(text) if len(text) <= QUERY_TERMS_MAX_TEXT else tuple(analyzer.analyze(text))
            for text in texts
        ]

    @property
    def analyzer(self) -> Analyzer:
        """The analyzer whose terms are cached."""
        return self._analyzer

    def cached(self) -> int:
        """How many texts are cached now (at most :data:`QUERY_TERMS_ENTRIES`)."""
        return int(self._cached.cache_info().currsize)


_NO_FIELDS: Mapping[str, FieldValue] = MappingProxyType({})


class _LazyFields(Mapping[str, FieldValue]):
    """A document's stored fields, read from its segment on first access."""

    __slots__ = ("_doc", "_fields", "_reader")

    def __init__(self, reader: SegmentReader, doc: int) -> None:
        self._reader = reader
        self._doc = doc
        self._fields: dict[str, FieldValue] | None = None

    def _load(self) -> dict[str, FieldValue]:
        if self._fields is None:
            fields = self._reader.fields(self._doc)
            if fields is None:
                raise CorruptIndexError(f"{self._reader.path}: stored document {self._doc} is damaged")
            self._fields = fields
        return self._fields

    def __getitem__(self, name: str) -> FieldValue:
        return self._load()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())

    def __repr__(self) -> str:
        return repr(self._load())


def _readonly(array: NDArray[T]) -> NDArray[T]:  # type: ignore[type-var]
    array.setflags(write=False)
    return array


class SnapshotPart:
    """One segment as a snapshot sees it: its reader, tombstones and id range."""

    __slots__ = ("_to_global", "base", "deleted", "live_locals", "n_live", "reader")

    def __init__(self, reader: SegmentReader, deleted: NDArray[np.bool_] | None, base: int) -> None:
        self.reader = reader
        self.deleted = deleted if deleted is not None and bool(deleted.any()) else None
        self.base = base
        if self.deleted is None:
            self.live_locals = np.arange(reader.n_docs, dtype=np.int64)
            self._to_global: IdArray | None = None
        else:
            self.live_locals = np.flatnonzero(~self.deleted).astype(np.int64)
            to_global = np.full(reader.n_docs, -1, dtype=np.int64)
            to_global[self.live_locals] = base + np.arange(self.live_locals.shape[0], dtype=np.int64)
            self._to_global = to_global
        self.n_live = int(self.live_locals.shape[0])

    def to_global(self, local: NDArray[np.integer]) -> IdArray:
        """Internal ids of local ids; -1 where the document is deleted."""
        if self._to_global is None:
            return local.astype(np.int64) + self.base
        mapped: IdArray = self._to_global[local]
        return mapped

    def live(self, values: NDArray[T]) -> NDArray[T]:  # type: ignore[type-var]
        """The entries of a per-document array that belong to live documents."""
        return values if self.deleted is None else values[self.live_locals]


#: A search's hits up to this many have their verdicts (and, when read, their keys) looked up
#: one by one through :class:`_KeyViews` (a few hundred ns a hit, no numpy call); more, or any
#: whose record or key was never checked, go through the segments' vectorised checks.
_KEYS_ONE_BY_ONE = 32

#: Per thread, ``(weak reference to the key views, ids)`` of the last search whose hits one
#: compiled call found sound (:meth:`Snapshot._vouch_sound`); ``_sound_ids`` of that very array
#: then skips the check. Weak: a scorer called alone leaves it set, and must not keep a closed
#: snapshot's segments mapped until the thread's next search.
_proven = threading.local()

#: On a snapshot of several segments, hits up to this many go one by one too: the vectorised
#: look-up costs per segment reached (SciFact in 10 segments, 100 hits: 313 us against 73).
_KEYS_ONE_BY_ONE_SEGMENTS = 1024


class _KeyViews:
    """A snapshot's key look-up one hit at a time: per part its base, id map and key views.

    Built once per snapshot (:meth:`Snapshot._sound_ids`), so a search pays
    no per-segment set-up: :meth:`sound` finds each id's part (by bisection
    on the bases), its local id, and checks the two verdicts its segment
    keeps (record sound, key checked: :meth:`SegmentReader.key_views`);
    ``False`` as soon as one hit has a verdict not yet known to be sound
    (the caller then takes the checking path, which records the verdicts; a
    damaged record is left out there). :meth:`read` slices the keys out of
    the tables later, when the results' keys are first read.
    """

    __slots__ = (
        "__weakref__",
        "bases",
        "compiled",
        "compiled_held",
        "compiled_ties",
        "compiled_ties_held",
        "parts",
        "table",
        "table_address",
    )

    def __init__(self, parts: Sequence[SnapshotPart]) -> None:
        self.bases = [part.base for part in parts]
        self.parts = [
            (
                part.base,
                None if part.deleted is None else memoryview(part.live_locals),  # type: ignore[arg-type]
                *part.reader.key_views(),
            )
            for part in parts
        ]
        # The same look-up for the compiled functions (weft_hits_sound, weft_ties_by_key): a row
        # of addresses per part, into the arrays the views above keep alive.
        library = compiled_bm25()
        self.compiled = None if library is None or not parts else library.hits_sound
        self.compiled_ties = None if library is None or not parts else library.ties_by_key
        # Their bindings that keep the GIL, for a search's few hits (native.bm25.HELD_MAX).
        self.compiled_held = None if library is None else library.hits_sound_held
        self.compiled_ties_held = None if library is None else library.ties_by_key_held
        self.table = np.array(
            [
                (
                    part.base,
                    part.n_live,
                    0 if live is None else part.live_locals.ctypes.data,
                    _address(state),
                    0 if decoded is not None else _address(checked),
                    _address(offsets),
                    _address(blob),
                )
                for part, (_, live, state, checked, offsets, blob, decoded) in zip(
                    parts, self.parts, strict=True
                )
            ],
            dtype=np.int64,
        ).reshape(-1, HIT_PART_FIELDS)
        self.table_address = self.table.ctypes.data

    def ties_by_key(self, ids: IdArray, scores: NDArray[np.float64], cut: int) -> IdArray | None:
        """:func:`~weftsearch.native.bm25.ties_by_key` here (``None``: not compiled, or a key unchecked)."""
        if self.compiled_ties is None:
            return None
        return ties_by_key(
            self.compiled_ties, ids, scores, cut, self.table_address, len(self.parts), self.compiled_ties_held
        )

    def sound_ids(self, ids: IdArray) -> bool:
        """:meth:`sound` of int64 ``ids`` in one compiled call (:attr:`compiled` must be set). O(len(ids))."""
        assert self.compiled is not None  # the caller checks
        found = hits_sound(self.compiled, ids, self.table_address, len(self.parts), self.compiled_held)
        return bool(found == ids.shape[0])

    def sound(self, ids: list[int]) -> bool:
        """Whether both verdicts of every one of ``ids`` (internal, in range) are known sound. O(len(ids)).

        ``True``: :meth:`read` gives their keys without a check. ``False`` as
        soon as one hit has a verdict not yet known to be sound (the caller
        then takes the checking path, which records the verdicts).
        """
        parts, bases = self.parts, self.bases
        if len(parts) == 1 and parts[0][1] is None and parts[0][6] is None:
            # One segment without deletions (the common small index): the loop at its leanest.
            base, _, state, checked, _, _, _ = parts[0]
            for doc in ids:
                local = doc - base
                if state[local] != 1 or not checked[local]:
                    return False
            return True
        single = len(parts) == 1
        for doc in ids:
            base, live, state, checked, _, _, decoded = (
                parts[0] if single else parts[bisect.bisect_right(bases, doc) - 1]
            )
            local = doc - base if live is None else live[doc - base]
            if state[local] != 1 or (decoded is None and not checked[local]):
                return False
        return True

    def checked_keys(self, ids: list[int]) -> list[str] | None:
        """The keys of ``ids`` (internal, in range) if every one was checked, else ``None``. O(len(ids)).

        Only the key verdicts count (a tie-break reads keys, not records):
        ``None`` as soon as one key is not known to be sound, and the caller
        takes :meth:`Snapshot.keys_of`, which checks and records them.
        """
        parts, bases = self.parts, self.bases
        single = len(parts) == 1
        keys: list[str] = []
        for doc in ids:
            base, live, _, checked, offsets, blob, decoded = (
                parts[0] if single else parts[bisect.bisect_right(bases, doc) - 1]
            )
            local = doc - base if live is None else live[doc - base]
            if decoded is not None:
                keys.append(str(decoded[local]))
            elif checked[local]:
                keys.append(str(blob[offsets[local] : offsets[local + 1]], "utf-8"))
            else:
                return None
        return keys

    def read(self, ids: list[int] | IdArray) -> list[str]:
        """The keys of ``ids``, which :meth:`sound` passed, in order. O(len(ids)).

        Reads only this object's views, which keep the segments' tables
        mapped: safe from any thread, and after the index closed or merged
        the segments away.
        """
        if not isinstance(ids, list):
            ids = ids.tolist()
        parts, bases = self.parts, self.bases
        if len(parts) == 1 and parts[0][1] is None and parts[0][6] is None:
            base, _, _, _, offsets, blob, _ = parts[0]
            return [str(blob[offsets[doc - base] : offsets[doc - base + 1]], "utf-8") for doc in ids]
        single = len(parts) == 1
        keys: list[str] = []
        for doc in ids:
            base, live, _, _, offsets, blob, decoded = (
                parts[0] if single else parts[bisect.bisect_right(bases, doc) - 1]
            )
            local = doc - base if live is None else live[doc - base]
            if decoded is not None:
                keys.append(str(decoded[local]))
            else:
                keys.append(str(blob[offsets[local] : offsets[local + 1]], "utf-8"))
        return keys


def _address(view: memoryview) -> int:
    """The address of a view's first byte (0 for an empty view, which nothing reads)."""
    return int(np.frombuffer(view, dtype=np.uint8).ctypes.data) if view.nbytes else 0


def _keys_in_place(
    groups: Sequence[tuple[SegmentReader, list[int], IdArray]], count: int, keep: list[bool] | None
) -> list[str]:
    """The keys of a search's kept hits, in hit order, from per-segment groups (positions, local ids)."""
    keys: list[str] = [""] * count
    for reader, positions, local in groups:
        for position, key in zip(positions, reader.keys_at(local), strict=True):
            keys[position] = key
    if keep is None:
        return keys
    return [key for key, kept in zip(keys, keep, strict=True) if kept]


class Snapshot:
    """A read-only, self-consistent view of the index at one generation.

    Built by :class:`~weftsearch.engine.index.Index`; users get one from
    ``index.snapshot()``. Every method is safe to call from many threads.
    """

    def __init__(
        self,
        *,
        generation: int,
        analyzer: Analyzer,
        vector_dim: int | None,
        segments: Sequence[tuple[SegmentReader, NDArray[np.bool_] | None]],
        query_terms: QueryTerms | None = None,
        schema: Schema | None = None,
    ) -> None:
        self._generation = generation
        self._schema = schema if schema is not None else Schema.default(analyzer.name)
        self._analyzer = analyzer
        if query_terms is None or query_terms.analyzer is not analyzer:
            query_terms = QueryTerms(analyzer)
        self._query_terms = query_terms
        self._vector_dim = vector_dim
        parts = []
        base = 0
        for reader, deleted in segments:
            part = SnapshotPart(reader, deleted, base)
            if part.n_live:
                parts.append(part)
                base += part.n_live
        self._parts = tuple(parts)
        self._bases = np.array([p.base for p in parts], dtype=np.int64)
        self._n_docs = base
        self._all_keys: tuple[str, ...] | None = None
        self._memo: dict[Hashable, object] = {}
        self._memo_lock = threading.RLock()
        # Masks by the filter's canonical string (type-strict: ``n == 1`` and ``n == true`` are
        # equal Filters, as 1 == True in Python, but not one filter), and the filter objects
        # seen lately by identity, so the scorers of one query find its mask without hashing
        # or printing the tree again (each entry holds its filter: the identity stays unique).
        self._filter_masks: collections.OrderedDict[str, NDArray[np.bool_]] = collections.OrderedDict()
        self._filter_seen: collections.OrderedDict[int, tuple[Filter, str]] = collections.OrderedDict()
        self._filter_lock = threading.Lock()
        self._statistics: CollectionStatistics | None = None
        self._key_view_cache: _KeyViews | None = None  # set by _key_views on first use

    # ------------------------------------------------------------------ identity

    @property
    def generation(self) -> int:
        """Monotonic counter of the index state this snapshot shows."""
        return self._generation

    @property
    def analyzer(self) -> Analyzer:
        """The analyzer the documents were indexed with; analyse queries with it."""
        return self._analyzer

    @property
    def schema(self) -> Schema:
        """The index's text fields (:class:`~weftsearch.schema.Schema`)."""
        return self._schema

    def query_terms(self, text: str) -> list[str]:
        """The analyzer's terms of a query ``text``, cached (see :class:`QueryTerms`).

        What ``self.analyzer.analyze(text)`` returns (a new list each call),
        from a bounded LRU cache that the index shares across its snapshots.
        O(1) for a recently seen text.
        """
        return self._query_terms(text)

    def query_terms_many(self, texts: Sequence[str]) -> list[tuple[str, ...]]:
        """:meth:`query_terms` of each of ``texts``, in order, as tuples (one call for a batch)."""
        return self._query_terms.many(texts)

    # ------------------------------------------------------------------ filters

    def field_kinds(self) -> dict[str, str]:
        """Every field the snapshot's documents have, with its type (``keyword``, ``number``, ``boolean``).

        The union over segments (deleted documents' fields included: a field's
        type stays fixed for the life of the index). O(segments), memoised.
        """
        if self._statistics is not None and self._statistics.field_kinds is not None:
            return dict(self._statistics.field_kinds)  # a shard's view: the whole collection's fields

        def build() -> dict[str, str]:
            kinds: dict[str, str] = {}
            for part in self._parts:
                for name, kind in part.reader.field_index().kinds().items():
                    kinds.setdefault(name, kind)
            return kinds

        return dict(self.memo(("snapshot.field_kinds",), build))

    def filter_mask(self, filter: Filter | str | None) -> NDArray[np.bool_] | None:
        """The live documents ``filter`` matches: a read-only mask over internal ids (``None``: no filter).

        Every scorer applies it before its top k (docs/ARCHITECTURE.md,
        "Filters"). Computed once per snapshot and filter and kept in a bounded
        cache (:data:`FILTER_MASKS` filters, least recently used dropped; a
        mask is one byte per document), keyed by the filter's canonical string
        (so ``n == 1`` and ``n == true``, equal as Python values, stay two
        filters, and the second is refused on a number field). The same filter
        object again (the several scorers of one query) is found by identity
        in O(1), without printing or hashing the tree; another object costs its
        :meth:`~weftsearch.engine.filters.Filter.to_string` (a few
        microseconds). Cost on a miss: per segment, a binary
        search and a slice per condition, and elementwise ``and``/``or``/``not``
        over the segment's documents.

        Raises:
            UnknownFieldError: the filter names a field no document has.
            FilterTypeError: it compares a field with a value of another type.
            FilterSyntaxError: a string form is malformed.

        """
        node = as_filter(filter)
        if node is None:
            return None
        with self._filter_lock:
            seen = self._filter_seen.get(id(node))
            if seen is not None and seen[0] is node:
                cached = self._filter_masks.get(seen[1])
                if cached is not None:
                    self._filter_masks.move_to_end(seen[1])
                    return cached
        key = node.to_string()  # equal strings parse to one filter: the same mask, the same verdict
        with self._filter_lock:
            cached = self._filter_masks.get(key)
            if cached is not None:
                self._filter_masks.move_to_end(key)
                self._remember_filter(node, key)
                return cached
        check_filter(node, self.field_kinds())
        mask = np.zeros(self._n_docs, dtype=np.bool_)
        for part in self._parts:
            reader = part.reader
            local = segment_mask(node, SegmentFields(reader.field_index(), reader.times()))
            mask[part.base : part.base + part.n_live] = part.live(local)
        mask.flags.writeable = False
        with self._filter_lock:
            mask = self._filter_masks.setdefault(key, mask)  # a racing thread's equal mask wins
            self._filter_masks.move_to_end(key)
            while len(self._filter_masks) > FILTER_MASKS:
                self._filter_masks.popitem(last=False)
            self._remember_filter(node, key)
        return mask

    def _remember_filter(self, node: Filter, key: str) -> None:
        """Note ``node``'s mask key by the object's identity (caller holds the lock); O(1)."""
        self._filter_seen[id(node)] = (node, key)
        self._filter_seen.move_to_end(id(node))
        while len(self._filter_seen) > FILTER_MASKS:
            self._filter_seen.popitem(last=False)

    def allowed(self, query: Any) -> NDArray[np.bool_] | None:
        """:meth:`filter_mask` of ``query.filter``: what a scorer may return for ``query`` (``None``: all)."""
        return self.filter_mask(getattr(query, "filter", None))

    @property
    def n_docs(self) -> int:
        """Number of live documents (N in BM25)."""
        return self._n_docs

    @property
    def parts(self) -> tuple[SnapshotPart, ...]:
        """The segments this snapshot reads, in id order (for scorers that work per segment)."""
        return self._parts

    def __len__(self) -> int:
        return self._n_docs

    @property
    def ids_follow_keys(self) -> bool:
        """Whether internal ids ascend as keys do (one segment or none): a tie-break by id is then by key."""
        return len(self._parts) <= 1

    # ------------------------------------------------------------------ keys

    def _split(self, ids: IdArray) -> list[tuple[int, NDArray[np.intp], IdArray]]:
        """Group ``ids`` by part: (part index, positions in ``ids``, local ids). O(len(ids))."""
        if len(self._parts) == 1:  # the common case, without the grouping (a search calls this per hit list)
            part = self._parts[0]
            return [(0, np.arange(ids.shape[0]), part.live_locals[ids - part.base])]
        which = np.searchsorted(self._bases, ids, side="right") - 1
        if ids.shape[0] <= _SPLIT_IN_PYTHON:
            # A search's hits: grouped in Python (one numpy call per group instead of
            # a unique and a comparison over all ids per group).
            grouped: dict[int, list[int]] = {}
            for position, index in enumerate(which.tolist()):
                grouped.setdefault(index, []).append(position)
            groups = []
            for index in sorted(grouped):
                positions = np.array(grouped[index], dtype=np.intp)
                part = self._parts[index]
                groups.append((index, positions, part.live_locals[ids[positions] - part.base]))
            return groups
        groups = []
        for index in np.unique(which).tolist():
            positions = np.flatnonzero(which == index)
            part = self._parts[index]
            groups.append((index, positions, part.live_locals[ids[positions] - part.base]))
        return groups

    def _check_ids(self, ids: IdArray) -> IdArray:
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= self._n_docs):
            raise UnknownKeyError(f"internal id out of range for {self._n_docs} documents")
        return ids

    def keys_of(self, ids: IdArray) -> list[str]:
        """Keys of many internal ids, in the same order. O(len(ids))."""
        if len(self._parts) > 1:
            ids = np.asarray(ids, dtype=np.int64)
            if ids.ndim == 1 and ids.shape[0] <= _KEYS_ONE_BY_ONE_SEGMENTS:
                # A few ids on several segments (a search's ties): one by one from the
                # snapshot's views once their keys were checked, no numpy call per segment.
                listed = ids.tolist()
                if listed and (min(listed) < 0 or max(listed) >= self._n_docs):
                    raise UnknownKeyError(f"internal id out of range for {self._n_docs} documents")
                found = self._key_views().checked_keys(listed)
                if found is not None:
                    return found
        ids = self._check_ids(ids)
        if len(self._parts) == 1:
            part = self._parts[0]
            return part.reader.keys_at(part.live_locals[ids - part.base])
        out = np.empty(ids.shape[0], dtype=object)
        for index, positions, local in self._split(ids):
            out[positions] = self._parts[index].reader.keys_at(local)
        return [str(key) for key in out]

    def key(self, doc_id: int) -> str:
        """The key of internal id ``doc_id``."""
        if isinstance(doc_id, bool) or not isinstance(doc_id, (int, np.integer)):
            raise UnknownKeyError(f"internal ids are integers, got {doc_id!r}")
        return self.keys_of(np.array([doc_id], dtype=np.int64))[0]

    def keys(self) -> list[str]:
        """All live keys, in id order (a new list each call).

        Resolved once per snapshot (it is immutable) and copied after: O(n)
        the first time, then one list copy with no numpy call. Why memoised
        beyond speed: numpy releases the GIL inside even tiny calls, and a
        thread that lets go of the GIL and takes it back many times a
        millisecond keeps every other thread (a committing writer among them)
        from ever forcing a switch; a loop over ``keys()`` starved a writer
        for seconds.
        """
        cached = self._all_keys
        if cached is None:
            cached = tuple(self.keys_of(np.arange(self._n_docs, dtype=np.int64)))
            self._all_keys = cached  # two racing threads store equal tuples
        return list(cached)

    def id_of(self, key: str) -> int:
        """The internal id of ``key``. Raises :class:`UnknownKeyError` if absent."""
        found = int(self.ids_of([key])[0])
        if found < 0:
            raise UnknownKeyError(f"no document with key {key!r} in this snapshot")
        return found

    def ids_of(self, keys: Sequence[str]) -> IdArray:
        """Internal ids of ``keys`` (-1 where a key is absent). O(m log n) per segment, vectorised."""
        result = np.full(len(keys), -1, dtype=np.int64)
        if not len(keys) or not self._parts:
            return result
        # numpy's str_ drops trailing NULs ("b\x00" would find "b"); no document key holds NUL
        # (Document refuses it), so such a key is absent.
        with_nul = [position for position, key in enumerate(keys) if "\x00" in key]
        wanted = np.asarray(list(keys), dtype=np.str_)
        for part in self._parts:
            stored = part.reader.keys()
            positions = np.minimum(np.searchsorted(stored, wanted), stored.shape[0] - 1)
            found = np.flatnonzero(stored[positions] == wanted)
            if found.size:
                ids = part.to_global(positions[found])
                alive = ids >= 0
                result[found[alive]] = ids[alive]
        result[with_nul] = -1
        return result

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and bool(self.ids_of([key])[0] >= 0)

    def key_rank(self, ids: IdArray) -> NDArray[np.int64]:
        """Integers that order ``ids`` as their keys order (the tie-break key).

        Within one segment, ids are numbered in key order, so the id itself is
        the rank; across segments the keys are compared. O(m log m).
        """
        ids = np.asarray(ids, dtype=np.int64)
        if self.ids_follow_keys or ids.size <= 1:
            return ids
        if ids.shape[0] <= _KEYS_ONE_BY_ONE_SEGMENTS:
            # A search's ties: ranked by a Python sort of their keys (str order is numpy's).
            found = self.keys_of(ids)
            order = sorted(range(len(found)), key=found.__getitem__)
            ranks = np.empty(len(found), dtype=np.int64)
            ranks[order] = np.arange(len(found), dtype=np.int64)
            return ranks
        keys = np.array(self.keys_of(ids), dtype=np.str_)
        ranks = np.empty(ids.shape[0], dtype=np.int64)
        ranks[np.argsort(keys, kind="stable")] = np.arange(ids.shape[0], dtype=np.int64)
        return ranks

    def document(self, doc_id: int) -> Document:
        """The stored document of internal id ``doc_id``.

        Raises:
            UnknownKeyError: ``doc_id`` out of range.
            CorruptIndexError: the stored record is damaged.

        """
        found = self.document_or_none(doc_id)
        if found is None:
            raise CorruptIndexError(f"stored document of internal id {doc_id} is damaged")
        return found

    def document_or_none(self, doc_id: int) -> Document | None:
        """The stored document of ``doc_id``, or ``None`` if its record is damaged."""
        if isinstance(doc_id, bool) or not isinstance(doc_id, (int, np.integer)):
            raise UnknownKeyError(f"internal ids are integers, got {doc_id!r}")
        ids = self._check_ids(np.array([doc_id], dtype=np.int64))
        [(index, _, local)] = self._split(ids)
        return self._parts[index].reader.document(int(local[0]))

    def damaged(self, ids: IdArray) -> NDArray[np.bool_]:
        """Which of ``ids`` have a stored record that fails its checksum (reported absent)."""
        ids = self._check_ids(ids)
        out = np.zeros(ids.shape[0], dtype=bool)
        for index, positions, local in self._split(ids):
            reader = self._parts[index].reader
            out[positions] = ~reader.records_ok(local)
        return out

    def sound_keys(self, ids: IdArray) -> tuple[NDArray[np.bool_] | None, list[str]]:
        """The keys of those of ``ids`` whose stored record is sound, and which those are.

        Returns ``(keep, keys)``: ``keep`` is ``None`` when every record passes
        its checksum (the common case; ``keys`` are then those of all ``ids``,
        in order), else a boolean mask of the sound ones and ``keys`` holds
        theirs only. What :meth:`damaged` then :meth:`keys_of` give, in one
        pass over the ids' segments. O(len(ids)).
        """
        return self._sound_keys(self._check_ids(ids))

    def _key_views(self) -> _KeyViews:
        """The snapshot's :class:`_KeyViews`, built on first use."""
        views = self._key_view_cache
        if views is None:
            # Built once (the memo's lock); every later search reads the attribute, without the
            # memo's key and factory per call. Racing threads store the same object.
            views = self.memo(("engine", "key views"), lambda: _KeyViews(self._parts))
            self._key_view_cache = views
        return views

    def _ties_by_key(self, ids: IdArray, scores: NDArray[np.float64], cut: int) -> IdArray | None:
        """``ids`` (results by score, then id) with each run of equal scores before ``cut`` in key order.

        One compiled call (``weft_ties_by_key``) reading the snapshot's key
        tables; ``None`` when the library lacks it or a member's key was not
        checked yet (the caller orders them through :meth:`keys_of`, which
        checks and records them). O(len(ids)) plus the runs' sorts.
        """
        return self._key_views().ties_by_key(ids, scores, cut) if self._parts else None

    def _sound_keys(self, ids: IdArray) -> tuple[NDArray[np.bool_] | None, list[str]]:
        """:meth:`sound_keys` of int64 ``ids`` already known to be in range (a checked stream's)."""
        keep, keys = self._sound_ids(ids)
        return keep, keys()

    def _hit_table(self) -> tuple[int, int]:
        """The address and rows of the hits' verdict table (:func:`~weftsearch.native.bm25.hits_sound`).

        ``(0, 0)`` when the compiled library lacks it or the snapshot is
        empty. The snapshot keeps the table alive. O(1) after the first call.
        """
        views = self._key_views() if self._parts else None
        if views is None or views.compiled is None:
            return 0, 0
        return views.table_address, len(views.parts)

    def _vouch_sound(self, ids: IdArray) -> None:
        """Note that one compiled call just found every one of ``ids`` sound on this snapshot's table.

        For the search tail of the same thread: :meth:`_sound_ids` of this very
        array (an engine scorer's read-only results, passed through) then reads
        their keys without calling the check again. A verdict, once sound,
        stays sound for the table's life. O(1).
        """
        _proven.found = (weakref.ref(self._key_views()), ids)

    def _sound_ids(self, ids: IdArray) -> tuple[NDArray[np.bool_] | None, Callable[[], list[str]]]:
        """The verdicts of int64 ``ids`` (in range) now, the kept ones' keys when asked: a search's hits.

        Returns ``(keep, keys)``: ``keep`` as :meth:`sound_keys` gives it,
        decided here (every record and key is checked now, so which hits
        exist, and any :class:`CorruptIndexError` a damaged key table raises,
        does not wait), and ``keys()`` the kept ids' keys in order, built
        when called. ``keys`` holds the segments' readers or their table
        views, so it may be called from any thread, any number of times
        (equal lists), and after the index closed or a merge replaced the
        segments. O(len(ids)); ``keys()`` O(len(ids)) more.
        """
        count = ids.shape[0]
        views = self._key_views()
        proven = getattr(_proven, "found", None)
        if proven is not None and proven[1] is ids and proven[0]() is views:
            _proven.found = None
            return None, functools.partial(views.read, ids)  # checked by the search's own call
        if views.compiled is not None:
            # Every hit's verdicts in one compiled call, whatever the number of segments; the
            # ids become a list only when the keys are read.
            if views.sound_ids(ids):
                return None, functools.partial(views.read, ids)
        elif count <= _KEYS_ONE_BY_ONE or (len(self._parts) > 1 and count <= _KEYS_ONE_BY_ONE_SEGMENTS):
            listed = ids.tolist()
            if views.sound(listed):
                return None, functools.partial(views.read, listed)
        if len(self._parts) == 1:
            part = self._parts[0]
            reader = part.reader
            local = ids if part.deleted is None else part.live_locals[ids]
            ok = reader.hit_verdicts(local)
            if ok is None:
                return None, functools.partial(reader.keys_at, local)
            return ok, functools.partial(reader.keys_at, local[ok])
        # Several segments: each segment's hits are checked once, records then keys.
        keep = np.ones(count, dtype=bool)
        groups: list[tuple[SegmentReader, list[int], IdArray]] = []
        for index, positions, local in self._split(ids):
            reader = self._parts[index].reader
            ok = reader.hit_verdicts(local)
            if ok is not None:
                keep[positions] = ok
                positions, local = positions[ok], local[ok]
            groups.append((reader, positions.tolist(), local))
        if bool(keep.all()):
            return None, functools.partial(_keys_in_place, groups, int(count), None)
        return keep, functools.partial(_keys_in_place, groups, int(count), keep.tolist())

    def fields_of(self, ids: IdArray) -> list[Mapping[str, FieldValue]]:
        """Stored fields of many documents, decoded only when first read. O(len(ids)).

        Cheaper than :meth:`document`: no vector copy, no links, and nothing
        decoded for a hit whose fields nobody looks at. Reading the fields of
        a damaged record raises :class:`CorruptIndexError` (search leaves such
        documents out: see :meth:`damaged`).
        """
        ids = self._check_ids(ids)
        out: list[Mapping[str, FieldValue]] = [_NO_FIELDS] * int(ids.shape[0])
        for index, positions, local in self._split(ids):
            reader = self._parts[index].reader
            for position, doc in zip(positions.tolist(), local.tolist(), strict=True):
                out[position] = _LazyFields(reader, doc)
        return out

    # ------------------------------------------------------------------ text statistics

    def _per_document(
        self, name: str, read: Callable[[SegmentReader], NDArray[Any]], dtype: type
    ) -> NDArray[Any]:
        def build() -> NDArray[Any]:
            pieces = [part.live(read(part.reader)) for part in self._parts]
            joined: NDArray[Any] = np.concatenate(pieces).astype(dtype) if pieces else np.zeros(0, dtype)
            return _readonly(joined)

        return self.memo(("engine", name), build)

    @property
    def doc_lengths(self) -> NDArray[np.int64]:
        """Number of indexed terms in each document, by internal id (read-only)."""
        return self._per_document("lengths", lambda r: r.doc_lengths(), np.int64)

    def field_lengths(self, field: str) -> NDArray[np.int64]:
        """Number of indexed terms of text field ``field`` in each document, by internal id (read-only).

        ``"text"`` is :attr:`doc_lengths`.

        Raises:
            InvalidParameterError: the index has no such text field.

        """
        if field == DEFAULT_FIELD:
            return self.doc_lengths
        self._check_field(field)
        return self._per_document(f"lengths.{field}", lambda r: r.text_field(field).doc_lengths(), np.int64)

    def field_avglen(self, field: str) -> float:
        """Mean length of text field ``field`` over live documents, computed once (0.0 when empty).

        ``"text"`` is :attr:`collection_avgdl`. On a view with a collection's
        statistics (:meth:`with_statistics`, a shard), the collection's:
        ``field_lengths[field] / n_docs``, the single index's to the bit.

        Raises:
            InvalidParameterError: the overriding statistics lack the field
                (they were gathered for another query).

        """
        if field == DEFAULT_FIELD:
            return self.collection_avgdl
        statistics = self._statistics
        if statistics is not None:
            total = None if statistics.field_lengths is None else statistics.field_lengths.get(field)
            if total is None:
                raise InvalidParameterError(f"collection statistics lack the text field {field!r}")
            return float(total / statistics.n_docs) if statistics.n_docs else 0.0

        def build() -> float:
            lengths = self.field_lengths(field)
            return float(int(lengths.sum()) / lengths.shape[0]) if lengths.shape[0] else 0.0

        return self.memo(("engine", "avglen", field), build)

    def _check_field(self, field: str) -> None:
        if field not in self._schema.names:
            raise InvalidParameterError(
                f"unknown text field {field!r}; the index has {', '.join(self._schema.names)}"
            )

    @property
    def avgdl(self) -> float:
        """Mean document length in terms over live documents (0.0 when empty)."""
        lengths = self.doc_lengths
        return float(int(lengths.sum()) / lengths.shape[0]) if lengths.shape[0] else 0.0

    def doc_freq(self, term: str) -> int:
        """Number of live documents holding the analysed ``term``."""
        return int(self.postings([term]).doc_freq[0])

    # ------------------------------------------------------------------ collection statistics

    def with_statistics(self, statistics: CollectionStatistics) -> Snapshot:
        """Return this snapshot, scoring with a whole collection's ``statistics`` (a shard of it).

        The view shares everything with this snapshot but the filter masks
        (segments, caches; O(1), no copy), so a scorer that memoises something
        derived from the statistics must put them in its memo key (BM25 keys
        its caches by the average length). Documents, ids and keys are this
        snapshot's; only the ``collection_*`` values and :attr:`latest_time`
        change.
        """
        view = copy.copy(self)
        view._statistics = statistics
        # Its own filter masks: they are checked against the collection's field kinds.
        view._filter_masks = collections.OrderedDict()
        view._filter_lock = threading.Lock()
        return view

    @property
    def statistics(self) -> CollectionStatistics | None:
        """The collection statistics given by :meth:`with_statistics`, or ``None`` (this snapshot's own)."""
        return self._statistics

    @property
    def collection_n_docs(self) -> int:
        """N for scoring: the collection's live documents (:attr:`n_docs` unless overridden)."""
        return self._n_docs if self._statistics is None else self._statistics.n_docs

    @property
    def collection_avgdl(self) -> float:
        """The average length for scoring (:attr:`avgdl`, computed once, unless overridden)."""
        if self._statistics is not None:
            return self._statistics.avgdl
        return self.memo(("engine", "avgdl"), lambda: self.avgdl)

    def collection_doc_freq(self, terms: Sequence[str], local: NDArray[np.int64]) -> NDArray[np.int64]:
        """Document frequencies of ``terms`` for scoring: ``local`` (this snapshot's) unless overridden.

        Raises:
            InvalidParameterError: the overriding statistics lack a term that
                this snapshot holds (they were gathered for another query).

        """
        if self._statistics is None:
            return local
        table = self._statistics.doc_freq
        counts = np.empty(len(terms), dtype=np.int64)
        for position, term in enumerate(terms):
            value = table.get(term)
            if value is None:
                if int(local[position]):
                    raise InvalidParameterError(f"collection statistics lack the term {term!r}")
                value = 0
            counts[position] = value
        return counts

    def fields_doc_freq(
        self, fields: Sequence[str], terms: Sequence[str], local: NDArray[np.int64]
    ) -> NDArray[np.int64]:
        """Documents holding each of ``terms`` in any of text ``fields``, for scoring.

        ``local`` (this snapshot's counts) unless the snapshot scores with a
        collection's statistics (a shard's view): then the collection's
        (:attr:`CollectionStatistics.field_doc_freq`; the default field alone
        is :meth:`collection_doc_freq`).

        Raises:
            InvalidParameterError: the overriding statistics lack the group of
                fields, or a term this snapshot holds (gathered for another query).

        """
        group = tuple(sorted(set(fields)))
        if self._statistics is None:
            return local
        if group == (DEFAULT_FIELD,):
            return self.collection_doc_freq(terms, local)
        groups = self._statistics.field_doc_freq
        table = None if groups is None else groups.get(group)
        if table is None:
            raise InvalidParameterError(f"collection statistics lack the text fields {'+'.join(group)!r}")
        counts = np.empty(len(terms), dtype=np.int64)
        for position, term in enumerate(terms):
            value = table.get(term)
            if value is None:
                if int(local[position]):
                    raise InvalidParameterError(
                        f"collection statistics lack the term {term!r} in {'+'.join(group)!r}"
                    )
                value = 0
            counts[position] = value
        return counts

    def collection_prefix_terms(self, fields: Sequence[str], prefix: str) -> int | None:
        """How many terms ``prefix`` expands to in any of text ``fields`` over the collection.

        ``None`` unless the snapshot scores with a collection's statistics
        that counted it (a shard's view): then this snapshot's own expansion
        is all there is to check.
        """
        statistics = self._statistics
        if statistics is None or statistics.prefix_terms is None:
            return None
        return statistics.prefix_terms.get((tuple(sorted(set(fields))), prefix))

    @property
    def latest_time(self) -> float | None:
        """The newest document time (POSIX seconds) of the collection, ``None`` if none has one."""
        if self._statistics is not None:
            return self._statistics.latest_time

        def build() -> float | None:
            times = self.times()
            timed = times[~np.isnan(times)]
            return float(timed.max()) if timed.size else None

        return self.memo(("engine", "latest_time"), build)

    def postings(self, terms: Sequence[str], field: str = DEFAULT_FIELD) -> Postings:
        """Postings of analysed ``terms`` in text field ``field``, concatenated in the given order.

        A term may be repeated; it is then returned twice. Each segment's
        postings of a term are read (and checksum-verified) on their own, so a
        query touches only the postings of its terms. O(total postings),
        vectorised: the Python loop runs over terms and segments, not postings.

        Raises:
            InvalidParameterError: the index has no such text field.

        """
        if field != DEFAULT_FIELD:
            self._check_field(field)
        id_runs: list[IdArray] = []
        tf_runs: list[NDArray[Any]] = []
        counts = np.zeros(len(terms), dtype=np.int64)
        for position, term in enumerate(terms):
            for part in self._parts:
                reader = part.reader if field == DEFAULT_FIELD else part.reader.text_field(field)
                local, tfs = reader.postings(term)
                if not local.size:
                    continue
                ids = part.to_global(local)
                if part.deleted is not None:
                    alive = ids >= 0
                    ids, tfs = ids[alive], tfs[alive]
                id_runs.append(ids)
                tf_runs.append(tfs)
                counts[position] += ids.shape[0]
        all_ids: IdArray = np.concatenate(id_runs) if id_runs else np.empty(0, np.int64)
        all_tfs: NDArray[np.float64] = (
            np.concatenate(tf_runs).astype(np.float64) if tf_runs else np.empty(0, np.float64)
        )
        return Postings(
            doc_freq=_readonly(counts),
            ids=_readonly(all_ids),
            term_freqs=_readonly(all_tfs),
            term_index=_readonly(np.repeat(np.arange(len(terms), dtype=np.int64), counts)),
        )

    # ------------------------------------------------------------------ vectors

    @property
    def vector_dim(self) -> int | None:
        """Width of the index's vectors, or ``None`` if no width was ever set."""
        return self._vector_dim

    def vector_blocks(self) -> list[VectorBlock]:
        """The stored vectors, one block per segment, without copying them.

        Row ids are -1 for deleted documents: skip those rows.
        """

        def build() -> list[VectorBlock]:
            blocks = []
            for part in self._parts:
                rows = part.reader.vector_rows()
                matrix = part.reader.vector_matrix()
                if not matrix.shape[0]:
                    continue
                ids = np.full(matrix.shape[0], -1, dtype=np.int64)
                has = np.flatnonzero(rows >= 0)
                ids[rows[has]] = part.to_global(has)
                lists = part.reader.vector_lists()
                centroids, offsets = (None, None) if lists is None else lists
                norms = part.reader.vector_norms()
                blocks.append(VectorBlock(_readonly(ids), matrix, centroids, offsets, norms))
            return blocks

        return self.memo(("engine", "vector_blocks"), build)

    def vectors(self) -> VectorBlock:
        """All live vectors as one float32 block, ids ascending (a copy; see :meth:`vector_blocks`)."""

        def build() -> VectorBlock:
            ids, rows = [], []
            for block in self.vector_blocks():
                keep = block.ids >= 0
                ids.append(block.ids[keep])
                rows.append(block.matrix[keep])
            if not ids:
                return VectorBlock(
                    _readonly(np.empty(0, np.int64)), np.zeros((0, self._vector_dim or 0), np.float32)
                )
            all_ids = np.concatenate(ids)
            order = np.argsort(all_ids, kind="stable")
            matrix = np.ascontiguousarray(np.concatenate(rows)[order], dtype=np.float32)
            return VectorBlock(_readonly(all_ids[order]), _readonly(matrix))

        return self.memo(("engine", "vectors"), build)

    # ------------------------------------------------------------------ links and times

    def links(self) -> sp.csr_array:
        """Resolved links as a sparse ``n x n`` 0/1 matrix: row = source, column = target.

        Links to keys absent from this snapshot, and self-links, are dropped;
        a link repeated in one document counts once. Built once per snapshot,
        O(links log n), vectorised.
        """
        self._check_links_complete()
        return self.memo(("engine", "links"), self._build_links)

    def _check_links_complete(self) -> None:
        if self._statistics is not None and not self._statistics.links_complete:
            raise PartialGraphError(
                "this snapshot is one shard of a collection and holds only part of its link graph: "
                "a scorer that reads links runs on a sharded index only through the whole-collection "
                "protocol (collection_inputs/score_inputs, docs/ARCHITECTURE.md 'Adding a scorer'), "
                "and not as another scorer's seed scorer (docs/SCALING.md, 'Graph scorers')"
            )

    def linked(self) -> sp.csr_array:
        """Links in either direction as a symmetric sparse ``n x n`` 0/1 matrix (``links`` + its transpose).

        Document i and j are linked when either links to the other. Built
        once per snapshot from :meth:`links`, O(links).
        """
        self._check_links_complete()
        return self.memo(("engine", "linked"), self._build_linked)

    def _build_linked(self) -> sp.csr_array:
        links = self.links()
        both: sp.csr_array = sp.csr_array(links + links.T)
        both.data[:] = 1.0
        return both

    def link_pairs(self) -> tuple[IdArray, list[str]]:
        """Every live document's links, unresolved: source ids and target keys, source by source.

        The raw material of :meth:`links` (which resolves the targets in this
        snapshot); a sharded index resolves its shards' pairs over the whole
        collection instead (``weftsearch.distributed``). O(links), read once
        per segment.
        """
        sources: list[IdArray] = []
        targets: list[str] = []
        for part in self._parts:
            counts, link_targets = part.reader.all_links()
            if not link_targets:
                continue
            local_sources = np.repeat(np.arange(part.reader.n_docs, dtype=np.int64), counts)
            ids = part.to_global(local_sources)
            alive = ids >= 0
            sources.append(ids[alive])
            targets.extend(target for target, kept in zip(link_targets, alive.tolist(), strict=True) if kept)
        source = np.concatenate(sources) if sources else np.empty(0, np.int64)
        return source, targets

    def _build_links(self) -> sp.csr_array:
        source, targets = self.link_pairs()
        return link_matrix(self._n_docs, source, self.ids_of(targets))

    def times(self) -> NDArray[np.float64]:
        """Document times as POSIX seconds by internal id; NaN where a document has none."""
        return self._per_document("times", lambda r: r.times(), np.float64)

    # ------------------------------------------------------------------ derived data

    def memo(self, key: Hashable, factory: Callable[[], T]) -> T:
        """Return ``factory()`` computed once per snapshot and cached under ``key``.

        Scorers use this for data they derive from the snapshot. Namespace the
        key (e.g. ``("bm25", k1, b)``) so two scorers never collide. Thread-safe:
        concurrent callers with the same key wait for one computation.
        """
        try:
            return self._memo[key]  # type: ignore[return-value]
        except KeyError:
            pass
        with self._memo_lock:
            if key not in self._memo:
                self._memo[key] = factory()
            return self._memo[key]  # type: ignore[return-value]


def link_matrix(n: int, source: IdArray, target: IdArray) -> sp.csr_array:
    """The ``n x n`` 0/1 link matrix of resolved pairs (row = source, column = target).

    Pairs with a negative end (an absent or deleted document) and self-links
    are dropped; a repeated pair counts once. Canonical CSR (sorted indices,
    no duplicates), so the same pairs give the same matrix however they were
    gathered. O(links log links).
    """
    keep = (source >= 0) & (target >= 0) & (source != target)
    data = np.ones(int(keep.sum()), dtype=np.float64)
    matrix = sp.csr_array((data, (source[keep], target[keep])), shape=(n, n))
    matrix.sum_duplicates()
    matrix.data[:] = 1.0
    return matrix


def key_positions(sorted_keys: NDArray[np.str_], keys: Sequence[str]) -> IdArray:
    """Positions of ``keys`` in ``sorted_keys`` (ascending, unique), -1 where absent. O(m log n)."""
    result = np.full(len(keys), -1, dtype=np.int64)
    if not len(keys) or not sorted_keys.shape[0]:
        return result
    wanted = np.asarray(list(keys), dtype=np.str_)
    positions = np.minimum(np.searchsorted(sorted_keys, wanted), sorted_keys.shape[0] - 1)
    found = sorted_keys[positions] == wanted
    result[found] = positions[found]
    # numpy's str_ drops trailing NULs ("b\x00" would find "b"); no document key holds one
    # (Document refuses it), so such a key is absent (as in Snapshot.ids_of).
    result[[position for position, key in enumerate(keys) if "\x00" in key]] = -1
    return result


class LinkView(Snapshot):
    """A whole collection's keys and links, without its documents: a sharded index's graph.

    A :class:`~weftsearch.distributed.ShardedIndex` builds one per cut from its
    shards' live keys and :meth:`Snapshot.link_pairs`, and runs there the
    scorers that implement the whole-collection protocol (``collection_inputs``
    and ``score_inputs``, docs/ARCHITECTURE.md "Adding a scorer"). Ids are
    positions in the sorted keys, so :attr:`ids_follow_keys` holds and
    :meth:`key_rank` is the id. :meth:`links`, :meth:`linked`, :meth:`memo`,
    :meth:`keys_of`, :meth:`ids_of` and :meth:`allowed` (the query's filter
    mask, given by :meth:`with_allowed`) answer as the single index's snapshot
    of the same documents does, up to the id numbering; everything a view does
    not hold (postings, vectors, times, stored fields, the analyzer, filter
    masks of other filters) raises :class:`InvalidParameterError` rather than
    answer for an empty collection.

    Args:
        generation: the cut this view shows.
        keys: the live keys, sorted ascending (unique).
        links: the resolved link matrix over them (:func:`link_matrix`).

    """

    def __init__(self, *, generation: int, keys: NDArray[np.str_], links: sp.csr_array) -> None:
        super().__init__(generation=generation, analyzer=SimpleAnalyzer(), vector_dim=None, segments=())
        keys.flags.writeable = False
        self._view_keys = keys
        self._n_docs = int(keys.shape[0])
        self._links = links
        self._allowed: NDArray[np.bool_] | None = None

    def with_allowed(self, mask: NDArray[np.bool_] | None) -> LinkView:
        """The view for one query: ``mask`` (over ids) is what :meth:`allowed` gives a filtered query.

        Shares the links and the memo (O(1), no copy).
        """
        view = copy.copy(self)
        view._allowed = mask
        return view

    @property
    def keys_array(self) -> NDArray[np.str_]:
        """The keys, ascending, as the numpy array the view searches (id ``i`` is ``keys_array[i]``)."""
        return self._view_keys

    @property
    def ids_follow_keys(self) -> bool:
        """Always: ids are positions in the sorted keys."""
        return True

    def keys_of(self, ids: IdArray) -> list[str]:
        """Keys of many ids, in the same order. O(len(ids))."""
        ids = self._check_ids(ids)
        return [str(key) for key in self._view_keys[ids].tolist()]

    def keys(self) -> list[str]:
        """All keys, ascending (a new list)."""
        return [str(key) for key in self._view_keys.tolist()]

    def ids_of(self, keys: Sequence[str]) -> IdArray:
        """Ids of ``keys`` (-1 where absent). O(m log n)."""
        return key_positions(self._view_keys, keys)

    def links(self) -> sp.csr_array:
        """The collection's resolved links (row = source, column = target)."""
        return self._links

    def allowed(self, query: Any) -> NDArray[np.bool_] | None:
        """The mask given by :meth:`with_allowed` for a query with a filter; ``None`` without one."""
        if getattr(query, "filter", None) is None:
            return None
        if self._allowed is None:
            raise InvalidParameterError("this link view was given no filter mask for the query's filter")
        return self._allowed

    def filter_mask(self, filter: Filter | str | None) -> NDArray[np.bool_] | None:
        """``None`` for no filter; a view cannot evaluate one (its fields are on the shards)."""
        if filter is None:
            return None
        raise self._absent("fields to filter on (use allowed(query))")

    def _absent(self, what: str) -> InvalidParameterError:
        return InvalidParameterError(
            f"a link view of a sharded collection holds keys and links only, not {what} "
            "(docs/ARCHITECTURE.md, 'Adding a scorer')"
        )

    @property
    def analyzer(self) -> Analyzer:
        """Not held: raises."""
        raise self._absent("the analyzer")

    def query_terms(self, text: str) -> list[str]:
        """Not held: raises."""
        raise self._absent("the analyzer")

    def query_terms_many(self, texts: Sequence[str]) -> list[tuple[str, ...]]:
        """Not held: raises."""
        raise self._absent("the analyzer")

    def field_kinds(self) -> dict[str, str]:
        """Not held: raises."""
        raise self._absent("fields")

    def postings(self, terms: Sequence[str], field: str = DEFAULT_FIELD) -> Postings:
        """Not held: raises."""
        raise self._absent("postings")

    def vector_blocks(self) -> list[VectorBlock]:
        """Not held: raises."""
        raise self._absent("vectors")

    def vectors(self) -> VectorBlock:
        """Not held: raises."""
        raise self._absent("vectors")

    def _per_document(
        self, name: str, read: Callable[[SegmentReader], NDArray[Any]], dtype: type
    ) -> NDArray[Any]:
        raise self._absent(f"document {name}")

    @property
    def latest_time(self) -> float | None:
        """Not held: raises."""
        raise self._absent("times")

    def document(self, doc_id: int) -> Document:
        """Not held: raises."""
        raise self._absent("stored documents")

    def document_or_none(self, doc_id: int) -> Document | None:
        """Not held: raises."""
        raise self._absent("stored documents")

    def fields_of(self, ids: IdArray) -> list[Mapping[str, FieldValue]]:
        """Not held: raises."""
        raise self._absent("stored fields")

    def damaged(self, ids: IdArray) -> NDArray[np.bool_]:
        """Not held: raises."""
        raise self._absent("stored documents")
