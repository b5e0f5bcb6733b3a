"""One shard: an ordinary index directory, and the calls a coordinator makes on it.

:class:`LocalShard` runs in the caller's process; ``weftsearch.distributed.ray_shard``
runs the same class inside a Ray actor. Every call takes and returns plain,
picklable values (documents, keys, numpy arrays, the caller's scorer objects),
so the two are interchangeable and the coordinator never knows which it holds.

A shard keeps the snapshot of each *cut* the coordinator has published (see
:class:`CutRef`) until told to release it, so every phase of a search reads
the same state of every shard, even while the coordinator commits the next
cut. Reads are idempotent: a retried call returns the same answer.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from weftsearch._atomic import write_atomic
from weftsearch.analysis import get_analyzer
from weftsearch.documents import Document, FieldValue
from weftsearch.embedders import embedder_record
from weftsearch.engine.explaining import scorer_breakdown
from weftsearch.engine.explanation import Explanation
from weftsearch.engine.facets import FacetCounts, count_facets
from weftsearch.engine.filters import Filter, SegmentFields, segment_mask
from weftsearch.engine.index import Index
from weftsearch.engine.protocols import Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.query_vectors import needs_query_vector
from weftsearch.engine.search import score_queries, stream_labels
from weftsearch.engine.snapshot import CollectionStatistics, QueryTerms, Snapshot
from weftsearch.engine.stats import IndexStats
from weftsearch.engine.stream import PlanValue, Stream
from weftsearch.errors import InvalidParameterError, ShardUnavailableError
from weftsearch.highlight import FieldHighlight, HighlightOptions
from weftsearch.querylang import MAX_PREFIX_TERMS
from weftsearch.schema import DEFAULT_FIELD, Schema
from weftsearch.storage.directory import IndexDirectory

from .records import SHARD_RECORD, ShardBinding, encode_binding, read_binding


def shard_index_id(sharded_id: str, name: str) -> str:
    """The index id of shard ``name`` of the sharded index ``sharded_id``.

    The first 32 hex digits of SHA-256 over both: deterministic (a sharded
    build with a fixed id writes the same bytes every time) and distinct per
    shard, so a shard copied over its sibling is caught by its id.
    """
    return hashlib.sha256(f"{sharded_id}/{name}".encode()).hexdigest()[:32]


__all__ = [
    "CutRef",
    "FieldRequest",
    "PrefixRequest",
    "ShardBreakdowns",
    "ShardStatistics",
    "ShardStreams",
    "ShardLinks",
    "ShardInputs",
    "LocalShard",
]


@dataclass(frozen=True, slots=True)
class CutRef:
    """Which state of a shard a read is for.

    Attributes:
        number: the coordinator's cut number (unique for the life of the coordinator).
        generation: the shard's generation in that cut.
        durable: whether that generation is the shard's last commit on disk,
            so that a restarted shard, which reopens its directory, can serve it.

    """

    number: int
    generation: int
    durable: bool


@dataclass(frozen=True, slots=True)
class ShardStatistics:
    """One shard's part of the collection statistics (the first phase of a search).

    Attributes:
        n_docs: live documents.
        total_length: the sum of their lengths in terms.
        latest_time: the newest document time, ``None`` if none has one.
        doc_freq: live documents holding each analysed term of the queries asked about.
        field_kinds: the shard's fields and their types.
        field_lengths: the total length of each named text field asked about
            (:data:`FieldRequest`), over live documents.
        field_doc_freq: per group of text fields asked about (a sorted tuple
            of names), live documents holding each analysed term in any field
            of the group.
        prefix_terms: per (group, prefix) asked about, the dictionary terms
            the prefix expands to in any field of the group (at most
            ``MAX_PREFIX_TERMS + 1``: enough to tell "too many").

    """

    n_docs: int
    total_length: int
    latest_time: float | None
    doc_freq: dict[str, int]
    field_kinds: dict[str, str]
    field_lengths: dict[str, int] = field(default_factory=dict)
    field_doc_freq: dict[tuple[str, ...], dict[str, int]] = field(default_factory=dict)
    prefix_terms: dict[tuple[tuple[str, ...], str], list[str]] = field(default_factory=dict)


#: One query's candidates from one scorer on one shard: keys and scores, best first, whether
#: the scorer found every candidate it could (:attr:`Stream.complete`: ``False`` when a budget
#: cut it short) and its plan (:attr:`Stream.plan`).
ShardStream = tuple[list[str], NDArray[np.float64], bool, dict[str, PlanValue] | None]
#: A shard's answer to a batch: per query, one :data:`ShardStream` per scorer.
ShardStreams = list[list[ShardStream]]
#: A shard's part of the link table: its live keys in id order, and every link of a live
#: document as (source id, target key), unresolved (:meth:`Snapshot.link_pairs`).
ShardLinks = tuple[list[str], NDArray[np.int64], list[str]]
#: :meth:`LocalShard.search_inputs`' answer: the batch's streams (as :meth:`LocalShard.search`),
#: one stream per input request, and one filter mask (over the shard's ids) per filter asked.
ShardInputs = tuple[ShardStreams, list[ShardStream], list[NDArray[np.bool_]]]
#: :meth:`LocalShard.explain`'s answer: the keys the cut lacks (then no breakdowns), else per scorer
#: one explanation per key, ``None`` for a scorer without ``explain``.
ShardBreakdowns = tuple[list[str], list[list[Explanation] | None]]
#: A request for per-field statistics: a group of text fields (a sorted tuple of names; one
#: field for a ``field:term`` leaf, BM25F's fields for its ``combined_fields`` df) and the
#: query texts whose terms' df in any field of the group the coordinator needs.
FieldRequest = tuple[tuple[str, ...], Sequence[str]]
#: A request for a prefix's expansion over a group of text fields: (group, prefix as typed).
PrefixRequest = tuple[tuple[str, ...], str]
#: A request for an input stream of a whole-collection scorer: its label (for errors), the
#: scorer, the query it sees and how many candidates.
InputRequest = tuple[str, Scorer, Query, int]


class LocalShard:
    """A shard in this process: one :class:`~weftsearch.engine.index.Index` directory.

    Args:
        name: the shard's name in errors and records (``"shard-0001"``).
        index: the shard's index (a writer unless the sharded index is read-only).
        node: where it runs, for errors (``"local"`` here).

    """

    def __init__(self, name: str, index: Index, node: str = "local") -> None:
        self._name = name
        self._index = index
        self._node = node
        self._pinned: dict[int, Snapshot] = {}

    @classmethod
    def create(cls, name: str, path: str | PathLike[str], options: Mapping[str, Any]) -> LocalShard:
        """Create the shard's index at ``path`` (``options``: :meth:`Index.create`'s keywords).

        An ``index_id`` in ``options`` names the sharded index: the shard's own
        id is derived from it and ``name`` (:func:`shard_index_id`), so a sharded
        build with a fixed id is byte-identical, yet no two shards share an id.
        """
        keywords = dict(options)
        if "index_id" in keywords:
            keywords["index_id"] = shard_index_id(str(keywords["index_id"]), name)
        return cls(name, Index.create(path, **keywords))

    @classmethod
    def open(cls, name: str, path: str | PathLike[str], readonly: bool = False) -> LocalShard:
        """Open the shard's index at ``path`` from its last commit."""
        return cls(name, Index.open(path, readonly=readonly))

    @property
    def name(self) -> str:
        """The shard's name."""
        return self._name

    def describe(self) -> tuple[str, str, int, str, ShardBinding | None]:
        """``(name, node, committed generation, index id, binding)``: where the shard runs and what it is.

        ``index id`` is the shard index's own (its manifest's); ``binding`` its
        ``SHARD`` record (:func:`~weftsearch.distributed.records.read_binding`,
        ``None`` when it has none). Read here, where the shard runs, since its
        directory may be on another machine than the coordinator's.

        Raises:
            CorruptIndexError: the ``SHARD`` record is damaged (named).

        """
        path = self._directory()
        identity = IndexDirectory(path).read_manifest().index_id
        return self._name, self._node, self._index.generation, identity, read_binding(path)

    def bind(self, sharded_id: str, slot: int, shards: int) -> str:
        """Write the shard's ``SHARD`` record: it is slot ``slot`` of ``shards`` of ``sharded_id``.

        Called once, when the sharded index is created (atomically: temporary
        file, fsync, rename). Returns the shard index's own id, which the
        coordinator records in ``SHARDS``.
        """
        path = self._directory()
        identity = IndexDirectory(path).read_manifest().index_id
        write_atomic(path / SHARD_RECORD, encode_binding(ShardBinding(sharded_id, slot, shards, identity)))
        return identity

    def _directory(self) -> Path:
        path = self._index.path
        if path is None:  # pragma: no cover - a shard is always a directory index
            raise InvalidParameterError(f"shard {self._name!r} has no directory")
        return path

    # ------------------------------------------------------------------ writes

    def add_many(self, documents: Sequence[Document]) -> int:
        """Add (upsert) ``documents``, all or nothing; return how many."""
        return self._index.add_many(documents, progress=False)

    def delete_many(self, keys: Sequence[str]) -> int:
        """Delete ``keys``; return how many were present."""
        return self._index.delete_many(keys)

    def merge(self, force: bool) -> int:
        """Merge segments (``force``: into one); return how many merges ran."""
        return self._index.merge(force=force)

    def commit(self, cut: int) -> int:
        """Commit, pin the committed state as cut ``cut``, and return its generation."""
        self._index.commit()
        return self._pin(cut)

    def stage(self, cut: int) -> int:
        """Pin the current (possibly uncommitted) state as cut ``cut``; return its generation."""
        return self._pin(cut)

    def _pin(self, cut: int) -> int:
        snapshot = self._index.snapshot()
        self._pinned[cut] = snapshot
        return snapshot.generation

    def adopt(self, cut: int, generation: int) -> int:
        """A read-only shard: adopt the newest commit on disk; pin it as cut ``cut`` if it is ``generation``.

        Returns the generation found (the coordinator publishes the cut only
        when every shard found its recorded one). The cuts pinned before stay
        pinned. Idempotent.

        Raises:
            InvalidParameterError: the shard is writable (a writer makes its cuts itself).

        """
        if not self._index.readonly:
            raise InvalidParameterError(
                f"shard {self._name!r} is writable: only a read-only shard adopts commits"
            )
        self._index.refresh()
        snapshot = self._index.snapshot()
        if snapshot.generation == generation:
            self._pinned[cut] = snapshot
        return snapshot.generation

    def unpin(self, cut: int) -> None:
        """Forget the pinned cut ``cut`` only (a cut that was not published)."""
        self._pinned.pop(cut, None)

    def release(self, keep: Sequence[int]) -> None:
        """Forget every pinned cut but ``keep`` (their segments are unmapped once unused)."""
        for number in [n for n in self._pinned if n not in keep]:
            del self._pinned[number]

    def close(self) -> None:
        """Close the shard's index (uncommitted writes are discarded)."""
        self._pinned.clear()
        if not self._index.closed:
            self._index.close(discard=True)

    # ------------------------------------------------------------------ reads

    def _snapshot(self, cut: CutRef) -> Snapshot:
        pinned = self._pinned.get(cut.number)
        if pinned is not None:
            return pinned
        # Not pinned here: a restarted shard, which reopened its last commit. That
        # state serves the cut only if it is the cut's, to the generation.
        if cut.durable:
            snapshot = self._index.snapshot()
            if snapshot.generation == cut.generation:
                self._pinned[cut.number] = snapshot
                return snapshot
        raise ShardUnavailableError(
            f"shard {self._name!r} on node {self._node} does not hold cut {cut.number} "
            f"(generation {cut.generation}{'' if cut.durable else ', never committed'}); "
            f"it holds generation {self._index.generation}",
            (self._name,),
        )

    def embedder_record(self) -> dict[str, Any] | None:
        """The embedder its index records (:func:`~weftsearch.embedders.embedder_record`), or ``None``."""
        embedder = self._index.embedder
        return None if embedder is None else embedder_record(embedder)

    def needs_query_vector(self, cut: CutRef, scorers: Sequence[Scorer], query: Query) -> bool:
        """Whether a scorer of ``scorers`` says (``missing_input``) that ``query`` lacks a query vector here.

        Asked by a coordinator with an embedder before it embeds query text: a
        scorer's inputs are read from a snapshot, which only the shards hold.
        """
        return needs_query_vector(scorers, self._snapshot(cut), query)

    def statistics(
        self,
        cut: CutRef,
        texts: Sequence[str],
        fields: Sequence[FieldRequest] = (),
        prefixes: Sequence[PrefixRequest] = (),
    ) -> ShardStatistics:
        """Return the shard's N, total length, latest time, fields, and df of every term of ``texts``.

        ``fields``: per-field statistics (:data:`FieldRequest`): each named
        field's total length and, per group, the df of the texts' terms in any
        of its fields. A field the index lacks is left out (the scorer names it
        when it searches). ``prefixes``: each prefix's dictionary terms in any
        field of its group, so the coordinator counts a prefix's expansion over
        every shard (:data:`PrefixRequest`). O(postings of the terms asked
        about + prefixes x segments x MAX_PREFIX_TERMS).
        """
        snapshot = self._snapshot(cut)
        terms = sorted({term for text in texts for term in snapshot.query_terms(text)})
        counts = snapshot.postings(terms).doc_freq if terms else np.zeros(0, np.int64)
        lengths: dict[str, int] = {}
        groups: dict[tuple[str, ...], dict[str, int]] = {}
        known = set(snapshot.schema.names)
        for group, group_texts in fields:
            if not group or not known.issuperset(group):
                continue
            for name in group:
                if name != DEFAULT_FIELD and name not in lengths:
                    # O(documents) once per snapshot, not per search.
                    lengths[name] = snapshot.memo(
                        ("shard.field_total", name), functools.partial(_field_total, snapshot, name)
                    )
            analyse = _group_analysis(snapshot, group)
            found = sorted({term for text in group_texts for term in analyse(text)})
            table = groups.setdefault(group, {})
            table.update(zip(found, _any_field_doc_freq(snapshot, group, found), strict=True))
        return ShardStatistics(
            n_docs=snapshot.n_docs,
            total_length=int(snapshot.doc_lengths.sum()),
            latest_time=snapshot.latest_time,
            doc_freq={term: int(count) for term, count in zip(terms, counts.tolist(), strict=True)},
            field_kinds=snapshot.field_kinds(),
            field_lengths=lengths,
            field_doc_freq=groups,
            prefix_terms={
                (group, prefix): _prefix_terms(snapshot, group, prefix)
                for group, prefix in prefixes
                if group and known.issuperset(group)
            },
        )

    def search(
        self,
        cut: CutRef,
        queries: Sequence[Query],
        scorers: Sequence[Scorer],
        depth: int,
        statistics: CollectionStatistics,
    ) -> ShardStreams:
        """Each query's checked, canonical stream from each scorer, with the collection's ``statistics``.

        The streams the engine's own search would fuse (``score_queries``: a
        scorer's ``score_many`` once for the batch, or ``score`` per query,
        then the contract checks), as keys and scores.
        """
        return _streams(self._snapshot(cut).with_statistics(statistics), queries, scorers, depth)

    def search_inputs(
        self,
        cut: CutRef,
        queries: Sequence[Query],
        scorers: Sequence[Scorer],
        depth: int,
        statistics: CollectionStatistics,
        requests: Sequence[InputRequest],
        filters: Sequence[Filter | str],
    ) -> ShardInputs:
        """:meth:`search`, plus what the coordinator's whole-collection scorers read, in one call.

        ``requests``: each input stream a whole-collection scorer asked for
        (``collection_inputs``), scored like any stream, cut to its own
        count. ``filters``: each filter whose mask over this shard's ids the
        coordinator needs (checked against the collection's field kinds), in
        the id order of :meth:`links`' keys.
        """
        # One view for the streams and the inputs: what a scorer memoises on it is shared.
        view = self._snapshot(cut).with_statistics(statistics)
        streams = _streams(view, queries, scorers, depth)
        # One score_queries call per (scorer, count), so a scorer's score_many sees the batch.
        groups: dict[tuple[int, int], list[int]] = {}
        for position, (_, scorer, _, count) in enumerate(requests):
            groups.setdefault((id(scorer), count), []).append(position)
        answered: list[ShardStream | None] = [None] * len(requests)
        for positions in groups.values():
            label, scorer, _, count = requests[positions[0]]
            column = score_queries(scorer, label, view, [requests[p][2] for p in positions], count)
            for position, stream in zip(positions, column, strict=True):
                answered[position] = _shard_stream(view, stream)
        masks = []
        for condition in filters:
            mask = view.filter_mask(condition)
            masks.append(np.ones(view.n_docs, np.bool_) if mask is None else np.asarray(mask, np.bool_))
        return streams, [stream for stream in answered if stream is not None], masks

    def explain(
        self,
        cut: CutRef,
        query: Query,
        scorers: Sequence[Scorer],
        keys: Sequence[str],
        statistics: CollectionStatistics,
    ) -> ShardBreakdowns:
        """Each scorer's own breakdown of this shard's ``keys`` at ``cut``, with the collection's statistics.

        The view the shard searched with (:meth:`search`), so a breakdown's
        idf, N and average lengths are the collection's and its value is the
        document's score in the stream. Per scorer, one explanation per key
        (:func:`~weftsearch.engine.explaining.scorer_breakdown`; ``None`` for
        a scorer without ``explain``). A key the cut lacks makes the answer
        ``(absent keys, [])`` for the coordinator to name.

        O(the scorers' breakdowns of ``keys``).
        """
        view = self._snapshot(cut).with_statistics(statistics)
        ids = view.ids_of(list(keys))
        absent = [key for key, found in zip(keys, ids.tolist(), strict=True) if found < 0]
        if absent:
            return absent, []
        return [], [scorer_breakdown(scorer, view, query, ids) for scorer in scorers]

    def links(self, cut: CutRef) -> ShardLinks:
        """The shard's part of the collection's link table at ``cut`` (:data:`ShardLinks`).

        O(documents + links); the coordinator asks once per cut.
        """
        snapshot = self._snapshot(cut)
        sources, targets = snapshot.link_pairs()
        return snapshot.keys(), sources, targets

    def fields(self, cut: CutRef, keys: Sequence[str]) -> list[dict[str, FieldValue] | None]:
        """The stored fields of ``keys`` (``None`` for a key whose stored record is damaged)."""
        snapshot = self._snapshot(cut)
        ids = snapshot.ids_of(keys)
        keep, _ = snapshot.sound_keys(ids)
        rows = snapshot.fields_of(ids)
        return [
            dict(row) if keep is None or bool(keep[position]) else None for position, row in enumerate(rows)
        ]

    def highlights(
        self, cut: CutRef, query: Query, options: HighlightOptions, keys: Sequence[str]
    ) -> list[Mapping[str, FieldHighlight]]:
        """The highlights of ``keys`` (the shard's hits) at ``cut``, as :meth:`Index.search` gives them.

        Each key's stored text fields read from the cut's snapshot and marked
        by :meth:`Index.highlighter <weftsearch.Index.highlighter>`. With no
        keys, only ``options`` are checked against the index's text fields.

        Raises:
            InvalidParameterError: ``options`` names a field the index lacks.

        """
        highlight = self._index.highlighter(self._snapshot(cut), query, options)
        return [highlight(key) for key in keys]

    def facet_counts(self, cut: CutRef, filter: Filter | None, fields: Sequence[str]) -> FacetCounts:
        """Every value of ``fields`` with the number of the shard's live documents ``filter`` matches.

        The coordinator checked ``filter`` and ``fields`` against the whole
        collection's fields; a field this shard lacks matches none of its
        documents (so the filter is evaluated here without the shard's own
        check, which would refuse a field only other shards have).
        """
        snapshot = self._snapshot(cut)
        mask = None
        if filter is not None:
            mask = np.zeros(snapshot.n_docs, dtype=np.bool_)
            for part in snapshot.parts:
                local = segment_mask(filter, SegmentFields(part.reader.field_index(), part.reader.times()))
                mask[part.base : part.base + part.n_live] = part.live(local)
        return count_facets(snapshot, mask, list(fields))

    def field_kinds(self) -> dict[str, str]:
        """The shard's fields and their types (the index's record)."""
        return self._index.field_kinds()

    def schema(self) -> Schema:
        """The shard index's text fields (its manifest's :class:`~weftsearch.schema.Schema`)."""
        return self._index.schema

    def get(self, cut: CutRef, key: str) -> Document | None:
        """The stored document with ``key`` at ``cut``, ``None`` when absent (or its record is damaged).

        Complexity: O(log n) per segment (one key lookup), one record read.
        """
        snapshot = self._snapshot(cut)
        doc_id = int(snapshot.ids_of([key])[0])
        return None if doc_id < 0 else snapshot.document_or_none(doc_id)

    def stats(self) -> IndexStats:
        """:meth:`Index.stats` of the shard's index (its current state, uncommitted writes included)."""
        return self._index.stats()


def _group_analysis(snapshot: Snapshot, group: tuple[str, ...]) -> Callable[[str], list[str]]:
    """How a query text is analysed for ``group``: one named field by its own analyzer, else the query's.

    As the BM25 scorer analyses: a ``field:term`` leaf by its field's
    analyzer; the default field, and BM25F's several fields (which must share
    the query's analyzer, or the scorer refuses them), by the index's.
    """
    if len(group) == 1 and group[0] != DEFAULT_FIELD:
        name = group[0]
        terms: QueryTerms = snapshot.memo(
            ("shard.field_terms", name),
            lambda: QueryTerms(get_analyzer(snapshot.schema.field(name).analyzer)),
        )
        return terms
    return snapshot.query_terms


def _field_total(snapshot: Snapshot, name: str) -> int:
    """The total length of text field ``name`` over the snapshot's live documents."""
    return int(snapshot.field_lengths(name).sum())


def _prefix_terms(snapshot: Snapshot, group: tuple[str, ...], prefix: str) -> list[str]:
    """The terms ``prefix`` expands to in any field of ``group``, at most ``MAX_PREFIX_TERMS + 1``.

    Folded per field as the BM25 scorer folds it: lower-cased, unless the
    field's analyzer keeps case (it gives ``"Q"`` back as ``["Q"]``).
    """
    expanded: set[str] = set()
    for name in group:
        folded = prefix if _group_analysis(snapshot, (name,))("Q") == ["Q"] else prefix.lower()
        for part in snapshot.parts:
            expanded.update(part.reader.text_field(name).terms_with_prefix(folded, MAX_PREFIX_TERMS))
    return sorted(expanded)[: MAX_PREFIX_TERMS + 1]


def _any_field_doc_freq(snapshot: Snapshot, group: tuple[str, ...], terms: list[str]) -> list[int]:
    """Live documents holding each of ``terms`` in any field of ``group`` (a union per term, vectorised)."""
    if not terms:
        return []
    if len(group) == 1:
        return [int(count) for count in snapshot.postings(terms, group[0]).doc_freq.tolist()]
    n_docs = np.int64(max(snapshot.n_docs, 1))
    keys = []
    for name in group:
        postings = snapshot.postings(terms, name)
        keys.append(postings.term_index * n_docs + postings.ids)
    pairs = np.unique(np.concatenate(keys))
    return [int(count) for count in np.bincount(pairs // n_docs, minlength=len(terms)).tolist()]


def _streams(view: Snapshot, queries: Sequence[Query], scorers: Sequence[Scorer], depth: int) -> ShardStreams:
    """Each query's checked, canonical stream from each scorer on ``view``, as keys and scores."""
    labels = stream_labels(scorers)
    columns = [
        score_queries(scorer, label, view, queries, depth)
        for scorer, label in zip(scorers, labels, strict=True)
    ]
    return [[_shard_stream(view, column[row]) for column in columns] for row in range(len(queries))]


def _shard_stream(view: Snapshot, stream: Stream) -> ShardStream:
    """``stream`` as a shard sends it: keys for ids (the coordinator has no ids), flag and plan kept."""
    plan = stream.plan
    return (
        view.keys_of(stream.ids),
        np.asarray(stream.scores, np.float64),
        stream.complete,
        None if plan is None else dict(plan),
    )
