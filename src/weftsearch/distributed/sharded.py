"""ShardedIndex: documents split by key over N shards, searched with the single index's results.

The coordinator (this module) owns no documents. It routes each write to the
shard that holds the key (:func:`~weftsearch.distributed.sharding.shard_of`),
records which shard generations belong together (the *cut*), and searches in
three phases over one cut:

1. **statistics**: every shard reports N, the total length, its newest time,
   its fields and the df of every query term; the coordinator sums them into
   one :class:`~weftsearch.engine.snapshot.CollectionStatistics`.
2. **streams**: every shard scores the queries on its snapshot *with those
   statistics* (``Snapshot.with_statistics``), so each document gets the score
   the single index gives it, to the bit, and returns each scorer's best
   ``depth`` candidates as keys and scores. The coordinator merges each
   scorer's streams in the canonical order (score descending, key ascending)
   and cuts them to ``depth``: the single index's stream, since a document in
   the global top ``depth`` is in its own shard's top ``depth``.
3. **fusion and fetch**: the fuser runs once, here, over the merged streams
   (ids are positions in the sorted union of candidate keys, so id order is
   key order); the hits' stored fields are then read from their shards.

A scorer implementing the optional whole-collection protocol
(``collection_inputs``/``score_inputs``, :mod:`weftsearch.engine.protocols`),
such as the graph scorers, is not sent to the shards: in phase 2 the shards
score the input streams it names (merged here into global streams, as any
stream) and the masks of the batch's filters, and the scorer runs once per
query here, on a :class:`~weftsearch.engine.snapshot.LinkView` of the whole
collection built from the shards' keys and links once per cut.

No scorer or fuser is named here: the coordinator calls them through their
protocols, as the engine does. See docs/SCALING.md for the consistent cut, the
exactness argument and the failure model.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray
from tqdm.auto import tqdm

from weftsearch._atomic import write_atomic
from weftsearch.documents import Document, FieldValue
from weftsearch.embedders import Embedder, check_embedder, embed_missing, get_embedder, match_record
from weftsearch.engine.explaining import (
    check_keys_count,
    check_scorers,
    explanation_trees,
    scorer_breakdown,
)
from weftsearch.engine.explanation import Explanation
from weftsearch.engine.facets import (
    Facets,
    add_facet_counts,
    check_facet_fields,
    check_facet_k,
    top_facets,
)
from weftsearch.engine.filters import Filter, as_filter, check_filter
from weftsearch.engine.pages import CursorSeal, PageStart, check_offset
from weftsearch.engine.protocols import Fuser, Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.query_vectors import embed_query_texts
from weftsearch.engine.search import (
    MAX_THREADS,
    Fused,
    SearchResults,
    _as_query,
    _check_call,
    canonical_stream,
    explain_fused,
    fuse_candidates,
    page_of,
    stream_labels,
)
from weftsearch.engine.snapshot import CollectionStatistics, LinkView, key_positions, link_matrix
from weftsearch.engine.stats import IndexStats, SegmentStats
from weftsearch.engine.stream import PlanValue, Stream, check_k, order_by_score
from weftsearch.errors import (
    CorruptIndexError,
    CursorExpiredError,
    DuplicateKeyError,
    FormatVersionError,
    IndexClosedError,
    IndexExistsError,
    IndexNotFoundError,
    IndexStorageError,
    InvalidDocumentError,
    InvalidParameterError,
    ScorerOutputError,
    ShardedCutError,
    ShardUnavailableError,
    UnknownKeyError,
)
from weftsearch.highlight import FieldHighlight, HighlightOptions, options_of
from weftsearch.querylang import Node, PhraseNode, PrefixNode, TermNode, tree_texts
from weftsearch.schema import DEFAULT_FIELD, Schema
from weftsearch.storage.directory import IndexDirectory, is_index_id, new_index_id
from weftsearch.storage.fields import check_field_types
from weftsearch.storage.files import read_regular
from weftsearch.storage.integrity import ScrubReport, scrub_directory

from .records import COUNTER_LIMIT, ShardBinding, exact_keys, identifier, integer, read_binding, seal, unseal
from .shard import (
    CutRef,
    FieldRequest,
    InputRequest,
    LocalShard,
    PrefixRequest,
    ShardLinks,
    ShardStatistics,
    ShardStream,
    _shard_stream,
)
from .sharding import HASH_NAME, MAX_SHARDS, check_shards, shard_of

__all__ = [
    "RECORD",
    "ShardGroup",
    "LocalShards",
    "ShardedIndex",
    "ShardedResults",
    "is_sharded",
    "local_shards",
    "record_index_id",
    "scrub_sharded",
]

#: The sharded commit record's file name in the sharded index's directory.
RECORD = "SHARDS"
_FORMAT = "weft-search-sharded"
#: Version 2 sealed the record with a CRC32C and bound every shard to its slot (``SHARD``).
_VERSION = 2
#: Documents sent to a shard per call while bulk adding (the progress bar moves per call).
_ADD_CHUNK = 2_000
#: A read-only refresh reads the record this many times while a writer is between shard commits.
_ADOPT_ATTEMPTS = 3


def shard_name(number: int) -> str:
    """The name (and directory) of shard ``number``: ``shard-0000``, ``shard-0001``, ..."""
    return f"shard-{number:04d}"


class ShardGroup(Protocol):
    """The shards of a sharded index, however they run (this process, Ray actors).

    ``call`` runs one method on some shards (concurrently where it can) and
    returns each shard's result, or the :class:`ShardUnavailableError` that
    says it could not be reached; any other error (bad input) is raised.
    """

    @property
    def names(self) -> tuple[str, ...]:
        """The shards' names, in shard order."""
        ...

    def call(self, method: str, arguments: Mapping[int, tuple[Any, ...]], *, read: bool) -> dict[int, Any]:
        """Call ``method`` on each shard in ``arguments``; ``read``: idempotent, so retried."""
        ...

    def close(self) -> None:
        """Release the shards (their indexes close; uncommitted writes are discarded)."""
        ...


class LocalShards:
    """Shards in this process, called one after another (no concurrency: one process, one writer)."""

    def __init__(self, shards: Sequence[LocalShard]) -> None:
        self._shards = list(shards)

    @property
    def names(self) -> tuple[str, ...]:
        """The shards' names, in shard order."""
        return tuple(shard.name for shard in self._shards)

    def call(self, method: str, arguments: Mapping[int, tuple[Any, ...]], *, read: bool) -> dict[int, Any]:
        """Call ``method`` on each shard; a :class:`ShardUnavailableError` is returned, not raised."""
        results: dict[int, Any] = {}
        for number, args in arguments.items():
            try:
                results[number] = getattr(self._shards[number], method)(*args)
            except ShardUnavailableError as error:
                results[number] = error
        return results

    def close(self) -> None:
        """Close every shard's index."""
        for shard in self._shards:
            shard.close()


#: Makes the shard group of a sharded index: ``(directories, create options or None, readonly)``.
ShardFactory = Callable[[Sequence[Path], Mapping[str, Any] | None, bool], ShardGroup]


def local_shards(
    directories: Sequence[Path], options: Mapping[str, Any] | None, readonly: bool
) -> ShardGroup:
    """The default :data:`ShardFactory`: every shard an :class:`Index` in this process.

    If one shard cannot be created or opened (a missing directory, another
    writer's lock), the ones opened before it are closed again.
    """
    shards: list[LocalShard] = []
    try:
        for path in directories:
            made = LocalShard.create(path.name, path, options) if options is not None else None
            shards.append(made or LocalShard.open(path.name, path, readonly))
    except BaseException:
        for shard in shards:
            shard.close()
        raise
    return LocalShards(shards)


class ShardedResults(SearchResults):
    """:class:`SearchResults` of a sharded search, saying which shards (if any) did not answer.

    Attributes:
        missing_shards: names of the shards whose documents are absent; empty
            unless the search was called with ``allow_partial=True``.

    """

    __slots__ = ("_owner", "_refs", "missing_shards")

    missing_shards: tuple[str, ...]
    #: The shards' states the search read (what its highlights are read from).
    _refs: tuple[CutRef, ...]
    #: The id of the sharded index searched (what ``explain_many(snapshot=...)`` checks).
    _owner: str

    @property
    def partial(self) -> bool:
        """Whether some shard did not answer (its documents are missing and the statistics lack it)."""
        return bool(self.missing_shards)


@dataclass(frozen=True, slots=True)
class _Cut:
    number: int
    refs: tuple[CutRef, ...]


class _Candidates:
    """One query's candidates over the shards: ids are positions in their sorted keys.

    The :class:`~weftsearch.engine.search.IdSpace` the engine's search tail
    fuses and checks in (so id order is key order), and what resolves the
    fused ids to keys and fields once the shards sent the hits' fields.
    """

    ids_follow_keys = True

    def __init__(self, keys: Sequence[str]) -> None:
        self.keys = keys

    @property
    def n_docs(self) -> int:
        """How many candidates: ids run from 0 to ``n_docs - 1``."""
        return len(self.keys)

    @staticmethod
    def key_rank(ids: NDArray[np.int64]) -> NDArray[np.int64]:
        """The ids themselves: they are key ranks."""
        return ids

    def sound_keys(
        self, fields: Mapping[str, Mapping[str, FieldValue] | None], ids: NDArray[np.int64]
    ) -> tuple[NDArray[np.bool_] | None, list[str]]:
        """Which ``ids`` their shard still reported (with fields), and their keys, in order."""
        keys = [self.keys[doc] for doc in ids.tolist()]
        keep = [fields.get(key) is not None for key in keys]
        if all(keep):
            return None, keys
        return np.array(keep, dtype=np.bool_), [key for key, kept in zip(keys, keep, strict=True) if kept]

    def fields_of(
        self, fields: Mapping[str, Mapping[str, FieldValue] | None], ids: NDArray[np.int64]
    ) -> list[Mapping[str, FieldValue]]:
        """The stored fields of the kept ``ids``, in order."""
        return [fields[self.keys[doc]] or {} for doc in ids.tolist()]


def _whole_collection(scorer: Scorer) -> bool:
    """Whether ``scorer`` implements the optional whole-collection protocol (protocols.py)."""
    return callable(getattr(scorer, "collection_inputs", None)) and callable(
        getattr(scorer, "score_inputs", None)
    )


@dataclass(frozen=True, slots=True)
class _CollectionPlan:
    """What a batch's whole-collection scorers need from the shards, asked in the streams phase.

    Attributes:
        scorers, labels: the search's scorers and their stream labels.
        whole: the columns whose scorer runs here, on the collection's link view.
        on_shards: the other columns, in order (the scorers the shards run).
        requests: every input stream asked for (label, scorer, query, count).
        inputs: per (row, whole column), its requests' positions, in order.
        filters: the distinct filters of the batch's queries (canonical strings).
        filter_of: per row with a filter, its position in ``filters``.

    """

    scorers: tuple[Scorer, ...]
    labels: tuple[str, ...]
    whole: frozenset[int]
    on_shards: tuple[int, ...]
    requests: tuple[InputRequest, ...]
    inputs: Mapping[tuple[int, int], tuple[int, ...]]
    filters: tuple[str, ...]
    filter_of: Mapping[int, int]

    @classmethod
    def of(cls, batch: Sequence[Query], scorers: Sequence[Scorer], labels: Sequence[str]) -> _CollectionPlan:
        """The plan of ``batch`` (no requests nor filters when no scorer is a whole-collection one).

        Raises:
            ScorerOutputError: a scorer's ``collection_inputs`` broke the protocol.

        """
        whole = frozenset(n for n, scorer in enumerate(scorers) if _whole_collection(scorer))
        requests: list[InputRequest] = []
        inputs: dict[tuple[int, int], tuple[int, ...]] = {}
        filters: dict[str, int] = {}
        filter_of: dict[int, int] = {}
        if whole:
            for row, query in enumerate(batch):
                for column in sorted(whole):
                    asked = _checked_inputs(scorers[column], labels[column], query)
                    inputs[(row, column)] = tuple(range(len(requests), len(requests) + len(asked)))
                    requests.extend(
                        (f"{labels[column]} input {n}", scorer, seen, count)
                        for n, (scorer, seen, count) in enumerate(asked)
                    )
                node = as_filter(query.filter)
                if node is not None:
                    filter_of[row] = filters.setdefault(node.to_string(), len(filters))
        return cls(
            tuple(scorers),
            tuple(labels),
            whole,
            tuple(n for n in range(len(scorers)) if n not in whole),
            tuple(requests),
            inputs,
            tuple(filters),
            filter_of,
        )


def _checked_inputs(scorer: Scorer, label: str, query: Query) -> list[tuple[Scorer, Query, int]]:
    """``scorer.collection_inputs(query)``, checked: (Scorer, Query, count >= 1) triples."""
    optional: Any = scorer  # the optional protocol: not in Scorer's type (its answer is checked below)
    asked = optional.collection_inputs(query)
    if not isinstance(asked, Sequence):
        raise ScorerOutputError(f"scorer {label!r}: collection_inputs returned {type(asked).__name__}")
    checked = []
    for entry in asked:
        if (
            not isinstance(entry, tuple)
            or len(entry) != 3
            or not isinstance(entry[0], Scorer)
            or not isinstance(entry[1], Query)
            or isinstance(entry[2], bool)
            or not isinstance(entry[2], int)
            or entry[2] < 1
        ):
            raise ScorerOutputError(
                f"scorer {label!r}: collection_inputs gave {entry!r}, not (Scorer, Query, count >= 1)"
            )
        checked.append((entry[0], entry[1], entry[2]))
    return checked


@dataclass(slots=True)
class _LinkTable:
    """The collection's link graph at one cut, and where each shard's documents sit in it.

    Attributes:
        cut: the cut it was built for.
        view: the :class:`LinkView` (sorted keys, resolved links).
        ids: per shard, the view id of each of the shard's ids (its keys' positions).
        missing: shards that did not answer (only with ``allow_partial``; then not cached).
        seconds: how long the build took here (the shards' calls included).

    """

    cut: int
    view: LinkView
    ids: dict[int, NDArray[np.int64]]
    missing: frozenset[int] = frozenset()
    seconds: float = 0.0

    @classmethod
    def build(cls, cut: int, parts: Mapping[int, ShardLinks]) -> _LinkTable:
        """Join the shards' keys and links: sort every key once, resolve every target by binary search.

        O(N log N + E log N) for N documents and E links, vectorised.
        """
        started = time.perf_counter()
        numbers = sorted(parts)
        keys = [np.asarray(parts[n][0], dtype=np.str_) for n in numbers]
        every = np.concatenate(keys) if keys else np.empty(0, np.str_)
        order = np.argsort(every, kind="stable")
        rank = np.empty(every.shape[0], dtype=np.int64)
        rank[order] = np.arange(every.shape[0], dtype=np.int64)
        ids: dict[int, NDArray[np.int64]] = {}
        start = 0
        for n, shard_keys in zip(numbers, keys, strict=True):
            ids[n] = rank[start : start + shard_keys.shape[0]]
            start += shard_keys.shape[0]
        ordered = every[order]
        sources = [ids[n][np.asarray(parts[n][1], dtype=np.int64)] for n in numbers]
        targets = [key_positions(ordered, parts[n][2]) for n in numbers]
        source = np.concatenate(sources) if sources else np.empty(0, np.int64)
        target = np.concatenate(targets) if targets else np.empty(0, np.int64)
        view = LinkView(generation=cut, keys=ordered, links=link_matrix(ordered.shape[0], source, target))
        return cls(cut, view, ids, seconds=time.perf_counter() - started)


class ShardedIndex:
    """An index split over shards by key, searched with the single index's results to the bit.

    Implements :class:`~weftsearch.engine.searchable.Searchable`, as
    :class:`~weftsearch.Index` does: the server, the LangChain retriever and
    evaluation take either.

    Make one with :meth:`create` or :meth:`open`; ``shards=`` names how the
    shards run (:func:`local_shards`, the default, or
    :func:`weftsearch.distributed.ray_shard.ray_shards`). One coordinator
    writes; searches may run from many threads. Writes become visible to
    searches at :meth:`commit` (durable) or :meth:`refresh` (not durable).

    Complexity per search: two round trips to every shard (statistics, then
    streams) plus one to the shards holding hits (fields); the coordinator
    merges ``shards x depth`` candidates per scorer, O(S d log(S d)).
    """

    def __init__(
        self,
        path: Path,
        group: ShardGroup,
        cut: _Cut,
        durable_cut: int,
        readonly: bool,
        index_id: str,
        shard_ids: Sequence[str],
    ) -> None:
        self._path = path
        self._index_id = index_id
        self._shard_ids = tuple(shard_ids)
        self._group = group
        self._names = group.names
        self._cut = cut
        self._durable_cut = durable_cut
        self._next_cut = cut.number + 1
        self._readonly = readonly
        self._dirty = False
        # Writes since the last cut (committed or refreshed): refresh() makes a new cut only then.
        self._unpublished = False
        self._field_kinds: dict[str, str] = {}
        self._schema = Schema.default()
        self._vector_dim: int | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._cursor_seal: CursorSeal | None = None
        self._embedder: Embedder | None = None
        # The collection's link table, for whole-collection scorers: built at the first such
        # search of a cut, kept for that cut only (a new cut replaces it).
        self._links: _LinkTable | None = None
        self._links_lock = threading.Lock()

    # ------------------------------------------------------------------ making one

    @classmethod
    def create(
        cls,
        path: str | PathLike[str],
        shards: int,
        *,
        factory: ShardFactory | None = None,
        **options: Any,
    ) -> ShardedIndex:
        """Create an empty sharded index at ``path``: ``shards`` index directories and the record.

        Args:
            path: a directory that must not exist yet or be empty.
            shards: number of shards, 1 to 4096. Fixed for the life of the index.
            factory: how the shards run (default :func:`local_shards`).
            **options: :meth:`Index.create`'s keywords (``analyzer``,
                ``vector_dim``, ``store_text``, ...), the same for every shard;
                but ``index_id`` names the sharded index (its ``SHARDS`` record),
                and each shard index gets an id of its own (derived from the
                given one: a build with a fixed id is byte-identical).
                ``embedder`` (an :class:`~weftsearch.Embedder` or a registered
                name) is recorded by every shard; the coordinator embeds the
                documents without a vector before sending them to their shards
                (a failed batch reaches none), and query text once per search
                when a scorer needs a query vector (:meth:`search_many`).

        Each shard's directory gets its ``SHARD`` record (this sharded index's
        id, its slot, the shard count), then ``SHARDS`` records every shard's
        index id: :meth:`open` refuses a shard that is not in its place.

        Raises:
            IndexExistsError: ``path`` holds something already.
            InvalidParameterError: a bad shard count or ``index_id``.

        """
        count = check_shards(shards)
        given = options.pop("index_id", None)
        identity = new_index_id() if given is None else given
        if not is_index_id(identity):
            raise InvalidParameterError(f"index_id must be 32 lowercase hex digits, got {identity!r}")
        asked = options.get("embedder")
        embedder: Embedder | None = None
        if asked is not None:  # checked before anything is made (each shard checks it again)
            embedder = get_embedder(asked) if isinstance(asked, str) else check_embedder(asked)
        root = Path(path)
        if root.exists() and (not root.is_dir() or any(root.iterdir())):
            raise IndexExistsError(f"{root}: exists and is not an empty directory")
        root.mkdir(parents=True, exist_ok=True)
        directories = [root / shard_name(number) for number in range(count)]
        # A caller's fixed id reaches the shards, which derive their own ids from it.
        shard_options = dict(options) if given is None else {**options, "index_id": given}
        group = (factory or local_shards)(directories, shard_options, False)
        try:
            bound = group.call("bind", {n: (identity, n, count) for n in range(count)}, read=False)
            missing = [value for value in bound.values() if isinstance(value, ShardUnavailableError)]
            if missing:
                raise missing[0]
            shard_ids = [str(bound[n]) for n in range(count)]
        except BaseException:
            group.close()
            raise
        index = cls(root, group, _Cut(0, ()), 0, False, identity, shard_ids)
        index._embedder = embedder
        index._schema = index._gather_schema()
        index.commit()
        return index

    @classmethod
    def open(
        cls,
        path: str | PathLike[str],
        *,
        readonly: bool = False,
        factory: ShardFactory | None = None,
        repair: bool = False,
    ) -> ShardedIndex:
        """Open the sharded index at ``path`` at its recorded cut.

        Args:
            path: the directory :meth:`create` made.
            readonly: open every shard read-only (no writer locks, no writes).
            factory: how the shards run (default :func:`local_shards`).
            repair: when the shards are not at the recorded generations (a
                writer stopped between committing its shards and recording
                the cut), record their current generations as the cut instead
                of refusing. The shards that committed keep that commit; the
                others never received it (docs/SCALING.md, "Consistent cut").

        Raises:
            IndexNotFoundError: no record at ``path``, or a shard's directory is missing (named).
            FormatVersionError: a record of another version (rebuild the sharded index).
            CorruptIndexError: the record is damaged or edited, or a shard is not the one the
                record lists in its place: copied from another slot, swapped, from another
                sharded index, an extra ``shard-NNNN`` directory (the message names it).
            ShardedCutError: the shards are not at the recorded generations.
            UnknownEmbedderError: the shards record an embedder not registered here.
            EmbedderMismatchError: the registered embedder of that name is not the recorded one.

        A sharded index created with an embedder gets it from the registry by
        the name its shards record (as :meth:`Index.open` does).

        """
        root = Path(path)
        record = _read_record(root)
        count = record["shards"]
        _refuse_extra_shards(root, count)
        group = (factory or local_shards)([root / shard_name(n) for n in range(count)], None, readonly)
        try:
            described = group.call("describe", {n: () for n in range(count)}, read=True)
            generations = []
            for number in range(count):
                found = described[number]
                if isinstance(found, ShardUnavailableError):
                    raise found
                _check_shard(root, record, number, found[3], found[4])
                generations.append(int(found[2]))
            wanted = record["generations"]
            behind = [
                f"{shard_name(n)} at generation {generations[n]}, recorded {wanted[n]}"
                for n in range(count)
                if generations[n] != wanted[n]
            ]
            if behind and not (repair and not readonly):
                raise ShardedCutError(
                    f"{root / RECORD}: shards are not at the recorded cut {record['cut']}: "
                    + "; ".join(behind)
                    + " (a writer stopped between shard commits; open with repair=True to record them)"
                )
            number = int(record["cut"])
            refs = tuple(CutRef(number, generation, True) for generation in generations)
            index = cls(
                root, group, _Cut(number, refs), number, readonly, record["index_id"], record["shard_ids"]
            )
            if behind:
                index._dirty = True
                index.commit()
            else:
                index._pin_all(index._cut, "stage")
            index._field_kinds = index._gather_field_kinds()
            index._schema = index._gather_schema()
            index._embedder = index._recorded_embedder()
            return index
        except BaseException:
            group.close()
            raise

    def _recorded_embedder(self) -> Embedder | None:
        """The embedder every shard records (the same one), from the registry; ``None`` without.

        Raises:
            CorruptIndexError: two shards record different embedders (or one none).
            ShardUnavailableError: a shard could not be reached.

        """
        found = self._group.call("embedder_record", {n: () for n in range(len(self._names))}, read=True)
        self._raise_missing(found)
        records = [found[n] for n in range(len(self._names))]
        for number, record in enumerate(records):
            if record != records[0]:
                raise CorruptIndexError(
                    f"{self._path}: {self._names[0]} records embedder {records[0]!r} but "
                    f"{self._names[number]} records {record!r}; the shards of one index share one embedder"
                )
        if records[0] is None:
            return None
        return match_record(get_embedder(records[0]["name"]), records[0], self._path)

    # ------------------------------------------------------------------ state

    @property
    def schema(self) -> Schema:
        """The text fields of every shard (:class:`~weftsearch.schema.Schema`; create's ``schema=``)."""
        return self._schema

    @property
    def embedder(self) -> Embedder | None:
        """The embedder the shards record (see :meth:`create`), or ``None``."""
        return self._embedder

    @property
    def path(self) -> Path:
        """The sharded index's directory."""
        return self._path

    @property
    def index_id(self) -> str:
        """The sharded index's id (32 hex digits), kept in its commit record and every shard's.

        Files beside the record (the server's ranking profiles) name it as their owner; each
        shard's ``SHARD`` record names it too. Made at :meth:`create`, kept for the index's life.
        """
        return self._index_id

    @property
    def record_name(self) -> str:
        """The file name of the commit record in :attr:`path`: ``SHARDS``."""
        return RECORD

    def recorded_index_id(self) -> str:
        """The sharded index id the ``SHARDS`` record on disk names now (read again, fully checked).

        A server watches it: another id means the directory now holds another sharded index.

        Raises:
            IndexNotFoundError, FormatVersionError, CorruptIndexError: the record is gone or damaged.

        """
        return record_index_id(self._path)

    @property
    def shards(self) -> tuple[str, ...]:
        """The shards' names, in shard order (shard ``i`` holds the keys with ``shard_of(key, n) == i``)."""
        return self._names

    @property
    def cut(self) -> int:
        """The number of the cut searches read now (the record's, or a later :meth:`refresh`)."""
        return self._cut.number

    @property
    def generation(self) -> int:
        """:attr:`cut`, under the name every :class:`~weftsearch.engine.searchable.Searchable` gives it."""
        return self._cut.number

    @property
    def vector_dim(self) -> int | None:
        """The width of the shards' vectors, ``None`` while none holds any.

        Asked of the shards (one round trip each, :meth:`stats`) until known,
        then kept: an index's vector width never changes once set.
        """
        if self._vector_dim is None:
            self._vector_dim = self.stats().vector_dim
        return self._vector_dim

    def shard_of(self, key: str) -> str:
        """The name of the shard that holds ``key``."""
        return self._names[shard_of(key, len(self._names))]

    @property
    def readonly(self) -> bool:
        """Whether the shards were opened read-only (writes raise)."""
        return self._readonly

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def get(self, key: str) -> Document:
        """The stored document with ``key`` at the current cut (what searches see), from its shard.

        Raises:
            UnknownKeyError: no such document at the cut (or its record is damaged).
            ShardUnavailableError: its shard could not be reached.

        """
        self._check_open()
        if not isinstance(key, str):
            raise UnknownKeyError(f"document keys are strings, got {key!r}")
        number = shard_of(key, len(self._names))
        cut = self._cut
        found = self._group.call("get", {number: (cut.refs[number], key)}, read=True)
        self._raise_missing(found)
        document = found[number]
        if document is None:
            raise UnknownKeyError(f"no document with key {key!r} (in shard {self._names[number]!r})")
        assert isinstance(document, Document)
        return document

    def shard_stats(self) -> dict[str, IndexStats]:
        """:meth:`Index.stats` of every shard, by name (each shard's current state).

        Raises:
            ShardUnavailableError: a shard could not be reached.

        """
        self._check_open()
        found = self._group.call("stats", {n: () for n in range(len(self._names))}, read=True)
        self._raise_missing(found)
        return {self._names[n]: found[n] for n in range(len(self._names))}

    def stats(self) -> IndexStats:
        """The shards' :meth:`Index.stats` summed; segments named ``shard-NNNN/seg-...``.

        ``generation`` is the cut searches read, ``path`` the sharded index's
        directory.

        Raises:
            ShardUnavailableError: a shard could not be reached.
            CorruptIndexError: the shards disagree on the analyzer or the vector
                type or width (they were created with the same options, so they never do).

        """
        parts = self.shard_stats()
        analyzers = {s.analyzer for s in parts.values()}
        dtypes = {s.vector_dtype for s in parts.values()}
        widths = {s.vector_dim for s in parts.values() if s.vector_dim is not None}
        if len(analyzers) != 1 or len(dtypes) != 1 or len(widths) > 1:
            raise CorruptIndexError(
                f"{self._path}: the shards disagree on analyzer {sorted(analyzers)}, "
                f"vector type {sorted(dtypes)} or vector width {sorted(widths)}"
            )
        return IndexStats(
            path=str(self._path),
            documents=sum(s.documents for s in parts.values()),
            pending=sum(s.pending for s in parts.values()),
            generation=self.cut,
            analyzer=analyzers.pop(),
            vector_dim=widths.pop() if widths else None,
            vector_dtype=dtypes.pop(),
            segments=tuple(
                SegmentStats(
                    None if segment.name is None else f"{name}/{segment.name}",
                    segment.documents,
                    segment.deleted,
                    segment.bytes,
                )
                for name, s in parts.items()
                for segment in s.segments
            ),
            bytes_on_disk=sum(s.bytes_on_disk for s in parts.values()),
        )

    def _check_open(self) -> None:
        """Every call but the descriptive properties refuses a closed index, as :class:`Index` does."""
        if self._closed:
            raise IndexClosedError(f"{self._path}: this sharded index is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self._readonly:
            raise InvalidParameterError(f"{self._path}: the sharded index is read-only")

    def _gather_field_kinds(self) -> dict[str, str]:
        kinds: dict[str, str] = {}
        found = self._group.call("field_kinds", {n: () for n in range(len(self._names))}, read=True)
        for number in range(len(self._names)):
            value = found[number]
            if isinstance(value, ShardUnavailableError):
                raise value
            for name, kind in value.items():
                kinds.setdefault(name, kind)
        return kinds

    def _gather_schema(self) -> Schema:
        """The shards' schema (every shard's the same).

        Raises:
            CorruptIndexError: two shards record different schemas (named).

        """
        found = self._group.call("schema", {n: () for n in range(len(self._names))}, read=True)
        self._raise_missing(found)
        first = found[0]
        for number in range(1, len(self._names)):
            if found[number] != first:
                raise CorruptIndexError(
                    f"{self._path}: {self._names[number]} has another text field schema than "
                    f"{self._names[0]} ({', '.join(found[number].names)} against {', '.join(first.names)})"
                )
        schema: Schema = first
        return schema

    def _raise_missing(self, results: Mapping[int, Any]) -> None:
        missing = [value for value in results.values() if isinstance(value, ShardUnavailableError)]
        if missing:
            names = tuple(name for error in missing for name in error.shards)
            raise ShardUnavailableError("; ".join(str(error) for error in missing), names)

    # ------------------------------------------------------------------ writes

    def add_many(self, documents: Iterable[Document], *, progress: bool | None = None) -> int:
        """Add (upsert) documents, each to the shard its key hashes to; return how many.

        The batch is checked whole first (a repeated key, a field of another
        type than the index's, a text field the schema lacks), then sent to
        the shards in chunks of 2,000 documents with a progress bar (``None``: on a terminal for large
        batches). A shard refusing its part (a bad vector width) leaves the
        earlier chunks applied in memory: :meth:`commit` nothing, or
        :meth:`close` to discard them.
        """
        self._check_writable()
        batch = list(documents)
        seen: set[str] = set()
        kinds = dict(self._field_kinds)
        parts: list[list[Document]] = [[] for _ in self._names]
        for document in batch:
            if not isinstance(document, Document):
                raise InvalidParameterError(f"add_many takes Documents, got {type(document).__name__}")
            if document.key in seen:
                raise DuplicateKeyError(f"key {document.key!r} appears twice in the batch")
            seen.add(document.key)
            check_field_types(document, kinds)
            self._check_text_fields(document)
        show = progress if progress is not None else None
        if self._embedder is not None:
            # Here, before any shard gets a document: a failed embedding batch reaches no shard.
            quiet = show is False or (show is None and len(batch) < 10_000)
            batch = embed_missing(self._embedder, batch, quiet or None, stacklevel=4)
        for document in batch:
            parts[shard_of(document.key, len(self._names))].append(document)
        with tqdm(
            total=len(batch),
            desc="indexing",
            unit="doc",
            disable=show is False or (show is None and len(batch) < 10_000),
        ) as bar:
            start = 0
            while any(start < len(part) for part in parts):
                calls = {
                    number: (part[start : start + _ADD_CHUNK],)
                    for number, part in enumerate(parts)
                    if start < len(part)
                }
                self._dirty = self._unpublished = True
                results = self._group.call("add_many", calls, read=False)
                self._raise_missing(results)
                bar.update(sum(len(args[0]) for args in calls.values()))
                start += _ADD_CHUNK
        self._field_kinds = kinds
        return len(batch)

    def _check_text_fields(self, document: Document) -> None:
        """Every named text field of ``document`` is the schema's (as :meth:`Index.add_many` checks).

        Raises:
            InvalidDocumentError: a field the schema lacks (the known ones named).

        """
        known = {field.name for field in self._schema.named_fields}
        for name in document.text_fields:
            if name not in known:
                listed = ", ".join(field.name for field in self._schema.named_fields) or "none besides 'text'"
                raise InvalidDocumentError(
                    f"document {document.key!r}: text field {name!r} is not in the index's schema "
                    f"(its named text fields: {listed})"
                )

    def add(self, document: Document) -> None:
        """Add (upsert) one document."""
        self.add_many([document], progress=False)

    def delete(self, key: str) -> bool:
        """Delete ``key`` from its shard; whether it was there (as :meth:`Index.delete`)."""
        return self.delete_many([key]) > 0

    def delete_many(self, keys: Iterable[str]) -> int:
        """Delete ``keys`` from their shards; return how many were present."""
        self._check_writable()
        parts: list[list[str]] = [[] for _ in self._names]
        for key in keys:
            parts[shard_of(key, len(self._names))].append(key)
        calls = {number: (part,) for number, part in enumerate(parts) if part}
        if not calls:
            return 0
        self._dirty = self._unpublished = True
        results = self._group.call("delete_many", calls, read=False)
        self._raise_missing(results)
        return int(sum(results.values()))

    def merge(self, *, force: bool = False) -> int:
        """Merge each shard's segments (``force``: into one each), commit the new cut; return the merges."""
        self._check_writable()
        results = self._group.call("merge", {n: (force,) for n in range(len(self._names))}, read=False)
        self._raise_missing(results)
        self._dirty = True
        self.commit()
        return int(sum(results.values()))

    def _pin_all(self, cut: _Cut, method: str) -> tuple[CutRef, ...]:
        results = self._group.call(method, {n: (cut.number,) for n in range(len(self._names))}, read=False)
        self._raise_missing(results)
        durable = method == "commit" or all(ref.durable for ref in cut.refs)
        return tuple(CutRef(cut.number, int(results[n]), durable) for n in range(len(self._names)))

    def commit(self) -> int:
        """Commit every shard, then record the cut; return the cut's number.

        Each shard commits on its own (with its own crash safety), and only
        then is the record replaced (atomically: a temporary file, fsync,
        rename), so the record never names a generation a shard has not made
        durable. Searches read the previous cut until the record is written.
        """
        self._check_writable()
        with self._lock:
            number = self._next_cut
            self._next_cut += 1
            refs = self._pin_all(_Cut(number, ()), "commit")
            record: dict[str, Any] = {
                "format": _FORMAT,
                "version": _VERSION,
                "hash": HASH_NAME,
                "shards": len(self._names),
                "cut": number,
                "generations": [ref.generation for ref in refs],
                "index_id": self._index_id,
                "shard_ids": list(self._shard_ids),
            }
            write_atomic(self._path / RECORD, _encode_record(record))
            previous = self._cut.number
            self._cut = _Cut(number, refs)
            self._links = None  # the old cut's link table: rebuilt for the new cut when asked
            self._durable_cut = number
            self._dirty = self._unpublished = False
            self._group.call(
                "release", {n: ((previous, number),) for n in range(len(self._names))}, read=False
            )
            return number

    def refresh(self) -> int:
        """Make the writes so far visible to searches without committing; return the cut searches read.

        A new cut is made only when something was added or deleted since the
        last cut (commit or refresh); otherwise the current cut is kept and its
        number returned, as :meth:`Index.refresh <weftsearch.Index.refresh>`
        changes nothing when nothing changed.

        A shard actor that restarts cannot serve such a cut (it reopens its
        last commit): searches then fail naming it until the next commit.

        A read-only sharded index instead adopts the newest cut a writer
        recorded, as a read-only :class:`Index` adopts the newest commit: it
        re-reads the record, has every shard adopt its last commit, and
        publishes the record's cut only when every shard is at the recorded
        generation; until then searches read the previous cut, whole, which
        stays pinned (docs/SCALING.md, "Consistent cut"). Returns the cut
        searches read afterwards (the same number when nothing changed, or
        when the writer was between shard commits: a shard already past the
        record is tried again, then the current cut kept).

        Raises:
            ShardedCutError: (read-only) the record names a generation a shard
                does not have, or a cut older than the one read now.
            CorruptIndexError: (read-only) the record is damaged.

        """
        if self._readonly and not self._closed:
            return self._adopt()
        self._check_writable()
        with self._lock:
            if not self._unpublished:
                return self._cut.number
            number = self._next_cut
            self._next_cut += 1
            results = self._group.call("stage", {n: (number,) for n in range(len(self._names))}, read=False)
            self._raise_missing(results)
            previous = self._cut
            refs = tuple(
                CutRef(
                    number,
                    int(results[n]),
                    previous.refs[n].durable and int(results[n]) == previous.refs[n].generation,
                )
                for n in range(len(self._names))
            )
            self._cut = _Cut(number, refs)
            self._links = None
            self._unpublished = False
            self._group.call(
                "release", {n: ((previous.number, number),) for n in range(len(self._names))}, read=False
            )
            return number

    def _adopt(self) -> int:
        """:meth:`refresh` of a read-only sharded index: the newest recorded cut, whole, or the current."""
        everyone = range(len(self._names))
        with self._lock:
            for _ in range(_ADOPT_ATTEMPTS):
                record = _read_record(self._path)
                number = int(record["cut"])
                if number == self._cut.number:
                    return number
                if (
                    record["shards"] != len(self._names)
                    or number < self._cut.number
                    or record["index_id"] != self._index_id
                    or tuple(record["shard_ids"]) != self._shard_ids
                ):
                    raise ShardedCutError(
                        f"{self._path / RECORD}: records cut {number} of {record['shards']} shards of "
                        f"sharded index {record['index_id']}; this reader holds cut {self._cut.number} of "
                        f"{len(self._names)} of {self._index_id} (the index was replaced: open it again)"
                    )
                wanted = [int(generation) for generation in record["generations"]]
                found = self._group.call("adopt", {n: (number, wanted[n]) for n in everyone}, read=True)
                if any(isinstance(value, ShardUnavailableError) for value in found.values()) or any(
                    int(found[n]) != wanted[n] for n in everyone
                ):
                    self._group.call("unpin", {n: (number,) for n in everyone}, read=False)
                self._raise_missing(found)
                behind = [n for n in everyone if int(found[n]) < wanted[n]]
                if behind:
                    raise ShardedCutError(
                        f"{self._path / RECORD}: cut {number} names generations the shards do not have: "
                        + "; ".join(
                            f"{self._names[n]} at generation {found[n]}, recorded {wanted[n]}" for n in behind
                        )
                        + f"; still reading cut {self._cut.number}"
                    )
                if all(int(found[n]) == wanted[n] for n in everyone):
                    previous = self._cut.number
                    self._cut = _Cut(number, tuple(CutRef(number, wanted[n], True) for n in everyone))
                    self._durable_cut = number
                    self._next_cut = number + 1
                    self._links = None
                    self._group.call("release", {n: ((previous, number),) for n in everyone}, read=False)
                    return number
                # A shard is past the record: the writer has committed shards again and is about
                # to record that cut. Read the record again.
            return self._cut.number

    def close(self) -> None:
        """Release the shards (uncommitted writes are discarded). Idempotent."""
        if not self._closed:
            self._closed = True
            self._group.close()

    def __enter__(self) -> ShardedIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ search

    def search(
        self,
        query: Query | str,
        k: int,
        fuser: Fuser,
        *scorers: Scorer,
        depth: int | None = None,
        allow_partial: bool = False,
        offset: int = 0,
        after: str | None = None,
        facets: Sequence[str] | None = None,
        facet_k: int = 10,
        highlight: bool | HighlightOptions | None = None,
    ) -> ShardedResults:
        """Search every shard at the current cut; the single index's results for the same documents.

        Arguments as :meth:`Index.search`, pages (``offset``, ``after``)
        included (:mod:`weftsearch.engine.pages`), except which state a cursor
        may name: a sharded index keeps no older cuts for cursors, so a cursor
        issued on another cut than the current one raises
        :class:`~weftsearch.errors.CursorExpiredError`. ``facets``: :meth:`facets`
        of the query, in ``results.facets``. ``highlight``: each hit's
        highlights as one index gives them, read from the hit's shard at the
        cut searched (:meth:`LocalShard.highlights`), computed at the search
        (one call per shard), not when a hit is first read. ``allow_partial``: when a shard
        cannot be reached, return the other shards' results with
        :attr:`ShardedResults.missing_shards` naming it (scored with the
        statistics of the shards that answered) instead of raising; partial
        results offer no :attr:`~SearchResults.next_cursor` (their ranking is
        not the collection's).

        Raises:
            ShardUnavailableError: a shard could not be reached (and
                ``allow_partial`` is False); the message names it and its node.

        """
        self._check_open()
        options = options_of(highlight)
        if facets is not None:  # checked before any shard searches
            check_facet_fields(facets, self._field_kinds)
            check_facet_k(facet_k)
        start: PageStart | None = None
        if after is not None:
            start = self._cursors().check(after, _as_query(query), fuser, scorers, depth, offset)
            self._check_cut(start.generation, self._cut.number)
        page = check_k(k)
        skip = check_offset(offset if start is None else start.position, page)
        results = self.search_many(
            [query], skip + page, fuser, *scorers, depth=depth, allow_partial=allow_partial
        )[0]
        if start is not None:
            self._check_cut(start.generation, results.generation)
        if skip or start is not None:
            paged = page_of(results, skip, page, start)
            assert isinstance(paged, ShardedResults)  # _sliced keeps the class
            paged.missing_shards = results.missing_shards
            paged._refs = results._refs
            paged._owner = results._owner
            results = paged
        if options is not None:
            table = _shard_highlights(self, results, _as_query(query), options, allow_partial)
            results._highlight_with(table.__getitem__)
        if not results.partial:
            issue = self._cursors().issuer(results.generation, _as_query(query), fuser, scorers, depth)
            results._offer_cursor(issue, page)
        if facets is not None:
            results.facets = self.facets(_as_query(query), facets, facet_k, allow_partial=allow_partial)
        return results

    def _cursors(self) -> CursorSeal:
        """The seal of this sharded index's cursors (keyed by its index id)."""
        seal = self._cursor_seal
        if seal is None:
            seal = self._cursor_seal = CursorSeal(self._index_id)
        return seal

    @staticmethod
    def _check_cut(issued: int, searched: int) -> None:
        if issued != searched:
            raise CursorExpiredError(
                f"the cursor was issued on cut {issued}; this sharded index reads cut {searched} and "
                "keeps no older cut for cursors: search again from the first page"
            )

    def facets(
        self,
        query: Query | Filter | str | None,
        fields: Sequence[str],
        k: int = 10,
        *,
        allow_partial: bool = False,
    ) -> Facets:
        """:meth:`Index.facets <weftsearch.Index.facets>` over every shard: each shard counts, the counts add.

        Exact, and equal to one index's facets over the same documents. Counts
        over the filter's matches only (no ``top``: a ranking's top hits
        would need the fused ranking first). With ``allow_partial``, a shard
        that cannot be reached is left out of the counts.

        Raises:
            ShardUnavailableError: a shard could not be reached (and not ``allow_partial``).

        """
        self._check_open()
        names = check_facet_fields(fields, self._field_kinds)
        k = check_facet_k(k)
        node = as_filter(query.filter if isinstance(query, Query) else query)
        if node is not None:
            check_filter(node, self._field_kinds)
        cut = self._cut
        arguments = {n: (cut.refs[n], node, names) for n in range(len(self._names))}
        found = self._group.call("facet_counts", arguments, read=True)
        missing = self._missing(found, allow_partial)
        return top_facets(add_facet_counts(found[n] for n in sorted(found) if n not in missing), k)

    def search_many(
        self,
        queries: Sequence[Query | str],
        k: int,
        fuser: Fuser,
        *scorers: Scorer,
        depth: int | None = None,
        threads: int | None = None,
        allow_partial: bool = False,
        facets: Sequence[str] | None = None,
        facet_k: int = 10,
    ) -> list[ShardedResults]:
        """:meth:`search` for each of ``queries``, one cut for all: two calls per shard for the batch.

        ``threads`` is checked as :meth:`Index.search_many <weftsearch.Index.search_many>`
        checks it and otherwise unused: the shards search the batch concurrently.
        ``facets``: :meth:`facets` of each query (one call per shard each).
        """
        self._check_open()
        if facets is not None:  # checked before any shard searches
            check_facet_fields(facets, self._field_kinds)
            check_facet_k(facet_k)
        answered = self._search_many(queries, k, fuser, scorers, depth, threads, allow_partial)
        if facets is not None:
            for query, results in zip(queries, answered, strict=True):
                results.facets = self.facets(_as_query(query), facets, facet_k, allow_partial=allow_partial)
        return answered

    def explain(
        self,
        query: Query | str,
        key: str,
        fuser: Fuser,
        *scorers: Scorer,
        depth: int | None = None,
        snapshot: ShardedResults | None = None,
    ) -> Explanation:
        """Why ``key`` ranks where it does for ``query``: :meth:`explain_many` of one key."""
        return self.explain_many(query, [key], fuser, *scorers, depth=depth, snapshot=snapshot)[0]

    def explain_many(
        self,
        query: Query | str,
        keys: Sequence[str],
        fuser: Fuser,
        *scorers: Scorer,
        depth: int | None = None,
        snapshot: ShardedResults | None = None,
    ) -> list[Explanation]:
        """Each of ``keys``' explanation, the tree one :class:`~weftsearch.Index` of the same documents gives.

        :meth:`Index.explain_many <weftsearch.Index.explain_many>`'s answer,
        node for node and value for value: one search to ``depth`` over every
        shard gives the root (the fused score) and each stream's rank and
        contribution; each scorer's own breakdown (its optional ``explain``)
        is computed on the key's shard with the collection statistics that
        search scored with (:meth:`LocalShard.explain`), so idf's ``n`` and
        ``N`` and the average lengths are the collection's. A whole-collection
        scorer (a graph scorer) is explained here, on the link view it scored
        on, when it offers ``explain`` (the graph scorers do not).

        Args:
            query: a :class:`~weftsearch.engine.query.Query` or plain text.
            keys: the documents to explain (at most 1,000), in the order answered.
            fuser: as :meth:`search`.
            *scorers: as :meth:`search`.
            depth: candidates per stream (``None``: 100, as one index explains).
            snapshot: the results of a search of this sharded index, to explain
                at the cut they read (as one index explains a snapshot it gave
                out); ``None``: the current cut. The shards keep a cut until the
                second cut after it, then the call names the shard that lost it.

        Raises:
            UnknownKeyError: a key the cut lacks (named).
            InvalidParameterError: more than 1,000 keys, no scorer, what
                :meth:`search` refuses, or a ``snapshot`` that is not a whole
                search of this index.
            ShardUnavailableError: a shard could not be reached.

        O(one sharded search to ``depth``) plus one call per shard holding keys.

        """
        self._check_open()
        keys = list(keys)
        check_keys_count(keys)
        for key in keys:
            if not isinstance(key, str):
                raise UnknownKeyError(f"document keys are strings, got {key!r}")
        check_scorers(scorers)
        cut = self._cut if snapshot is None else self._cut_of(snapshot)
        wanted = 100 if depth is None else depth  # one index's default, so the same search
        _, depth = _check_call(wanted, fuser, scorers, wanted)
        [parsed] = self._embed_queries([_as_query(query)], cut, scorers)
        [results], statistics, views = self._search_cut(cut, [parsed], depth, fuser, scorers, depth, False)
        breakdowns = self._breakdowns(cut, parsed, keys, scorers, statistics, views.get(0))
        return explanation_trees(keys, results, stream_labels(scorers), depth, breakdowns)

    def _cut_of(self, results: object) -> _Cut:
        """The cut ``results`` (a whole search of this sharded index) read.

        Raises:
            InvalidParameterError: not a :class:`ShardedResults` of this index, or a partial one.

        """
        if not isinstance(results, ShardedResults) or getattr(results, "_owner", None) != self._index_id:
            raise InvalidParameterError(
                "snapshot must be the results of a search of this sharded index (it names the cut read), "
                f"got {type(results).__name__}"
            )
        if results.partial:
            raise InvalidParameterError(
                f"snapshot is a partial search (shards {', '.join(results.missing_shards)} missing): its "
                "scores are not the collection's, so they cannot be explained"
            )
        return _Cut(results.generation, results._refs)

    def _breakdowns(
        self,
        cut: _Cut,
        query: Query,
        keys: Sequence[str],
        scorers: Sequence[Scorer],
        statistics: CollectionStatistics,
        view: LinkView | None,
    ) -> list[list[Explanation] | None]:
        """Per scorer, its breakdown of each of ``keys`` (``None``: it offers none).

        The scorers the shards run explain there (one call per shard holding
        keys, with ``statistics``); a whole-collection scorer explains here on
        ``view``, the link view it ran on.

        Raises:
            UnknownKeyError: the first of ``keys`` its shard lacks at ``cut``.

        """
        count = len(self._names)
        whole = [_whole_collection(scorer) for scorer in scorers]
        on_shards = [scorer for scorer, here in zip(scorers, whole, strict=True) if not here]
        wanted: dict[int, list[str]] = {}
        for key in keys:
            wanted.setdefault(shard_of(key, count), []).append(key)
        arguments = {n: (cut.refs[n], query, on_shards, part, statistics) for n, part in wanted.items()}
        found = self._group.call("explain", arguments, read=True) if arguments else {}
        self._raise_missing(found)
        absent = {key for answer in found.values() for key in answer[0]}
        for key in keys:
            if key in absent:
                number = shard_of(key, count)
                raise UnknownKeyError(
                    f"no document with key {key!r} at cut {cut.number} (in shard {self._names[number]!r})"
                )
        rows: list[tuple[int, int]] = []
        seen = {n: 0 for n in wanted}
        for key in keys:
            number = shard_of(key, count)
            rows.append((number, seen[number]))
            seen[number] += 1
        out: list[list[Explanation] | None] = []
        at = 0
        for scorer, here in zip(scorers, whole, strict=True):
            if here:
                out.append(None if view is None else scorer_breakdown(scorer, view, query, view.ids_of(keys)))
                continue
            parts = {n: found[n][1][at] for n in found}
            at += 1
            # One scorer object went to every shard: it offers explain on all or on none.
            if any(part is None for part in parts.values()):
                out.append(None)
                continue
            out.append([parts[n][position] for n, position in rows])
        return out

    def _search_many(
        self,
        queries: Sequence[Query | str],
        k: int,
        fuser: Fuser,
        scorers: Sequence[Scorer],
        depth: int | None,
        threads: int | None,
        allow_partial: bool,
    ) -> list[ShardedResults]:
        """:meth:`search_many` without facets."""
        k, depth = _check_call(k, fuser, scorers, depth)
        if threads is not None and (
            isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS
        ):
            raise InvalidParameterError(
                f"threads must be an integer from 1 to {MAX_THREADS}, got {threads!r}"
            )
        batch = [_as_query(query, position) for position, query in enumerate(queries)]
        if not batch:
            return []
        cut = self._cut
        batch = self._embed_queries(batch, cut, scorers)
        return self._search_cut(cut, batch, k, fuser, scorers, depth, allow_partial)[0]

    def _search_cut(
        self,
        cut: _Cut,
        batch: list[Query],
        k: int,
        fuser: Fuser,
        scorers: Sequence[Scorer],
        depth: int,
        allow_partial: bool,
    ) -> tuple[list[ShardedResults], CollectionStatistics, dict[int, LinkView]]:
        """The three phases over ``cut`` for checked, embedded queries.

        Returns the results, the collection statistics every shard scored
        with and, per query with a whole-collection scorer, the link view it
        ran on: what :meth:`explain_many` explains the scores with.
        """
        everyone = range(len(self._names))
        labels = stream_labels(scorers)
        graph: _LinkTable | None = None
        answers: Mapping[int, Any] = {}
        plan = _CollectionPlan.of(batch, scorers, labels)
        texts = sorted(
            {query.text for query in batch if query.text}
            | {request[2].text for request in plan.requests if request[2].text}
            # A tree's words are analysed one by one (the query text holds its syntax).
            | {text for query in batch if query.tree is not None for text in tree_texts(query.tree)}
        )
        pairs = [(query, scorers[column]) for query in batch for column in plan.on_shards]
        pairs += [(request[2], request[1]) for request in plan.requests]
        fields, prefixes = _field_requests(pairs)
        found = self._group.call(
            "statistics", {n: (cut.refs[n], texts, fields, prefixes) for n in everyone}, read=True
        )
        missing = self._missing(found, allow_partial)
        live = [n for n in everyone if n not in missing]
        statistics = _combine([found[n] for n in live], len(self._names))
        on_shards = [scorers[column] for column in plan.on_shards]
        if plan.whole:
            graph = self._link_table(cut, allow_partial, live)
            missing |= graph.missing
            live = [n for n in live if n not in missing]
            arguments = {
                n: (cut.refs[n], batch, on_shards, depth, statistics, plan.requests, plan.filters)
                for n in live
            }
            answers = self._group.call("search_inputs", arguments, read=True)
            missing |= self._missing(answers, allow_partial)
            live = [n for n in live if n not in missing]
            streams = {n: answers[n][0] for n in live}
        else:
            streams = self._group.call(
                "search", {n: (cut.refs[n], batch, on_shards, depth, statistics) for n in live}, read=True
            )
            missing |= self._missing(streams, allow_partial)
            live = [n for n in live if n not in missing]
        names = [self._names[n] for n in live]
        merged = []
        # Per query, the link view (with its filter's mask) its whole-collection scorers ran on.
        views: dict[int, LinkView] = {}
        for row in range(len(batch)):
            columns: list[list[tuple[str | None, ShardStream]]] = []
            for column in range(len(scorers)):
                if column in plan.whole:
                    assert graph is not None  # built above whenever plan.whole
                    stream, views[row] = self._collection_stream(
                        graph, plan, answers, live, batch[row], row, column, depth
                    )
                    columns.append([(None, stream)])
                else:
                    at = plan.on_shards.index(column)
                    columns.append([(name, streams[n][row][at]) for name, n in zip(names, live, strict=True)])
            merged.append(self._merge(columns, k, depth, fuser))
        results = self._fetch(
            cut, merged, labels, depth, tuple(self._names[n] for n in sorted(missing)), allow_partial
        )
        return results, statistics, views

    def _embed_queries(self, batch: list[Query], cut: _Cut, scorers: Sequence[Scorer]) -> list[Query]:
        """``batch`` with text and no vector given their text's vector, once, here, when a scorer needs one.

        Whether one does is a scorer's ``missing_input`` on a snapshot, which
        the shards hold: they are asked (one round trip) only when the index
        has an embedder and a query has text but no vector. A shard that does
        not answer is left to the search that follows to report.
        """
        embedder = self._embedder
        todo = [i for i, query in enumerate(batch) if query.vector is None and query.text.strip()]
        if embedder is None or not todo:
            return batch
        if not any(callable(getattr(scorer, "missing_input", None)) for scorer in scorers):
            return batch  # no scorer says what it lacks (BM25 alone): no round trip to ask
        probe = batch[todo[0]]
        arguments = {n: (cut.refs[n], list(scorers), probe) for n in range(len(self._names))}
        answers = self._group.call("needs_query_vector", arguments, read=True)
        if not any(answer is True for answer in answers.values()):
            return batch
        return embed_query_texts(embedder, batch, todo)

    def _link_table(self, cut: _Cut, allow_partial: bool, live: Sequence[int]) -> _LinkTable:
        """The collection's link table at ``cut``: built from every shard once per cut, then cached.

        With shards missing (``allow_partial``), a table of the ``live``
        shards only, built for that search and never cached: a partial
        search walks the links of the documents it scores, as if the
        missing shards' documents did not exist (the statistics say so too).
        """
        with self._links_lock:
            cached = self._links
            whole = len(live) == len(self._names)
            if whole and cached is not None and cached.cut == cut.number:
                return cached
            found = self._group.call("links", {n: (cut.refs[n],) for n in live}, read=True)
            missing = self._missing(found, allow_partial)
            table = _LinkTable.build(cut.number, {n: found[n] for n in found if n not in missing})
            table.missing = frozenset(missing)
            if whole and not missing:
                self._links = table
            return table

    def _collection_stream(
        self,
        graph: _LinkTable,
        plan: _CollectionPlan,
        answers: Mapping[int, Any],
        live: Sequence[int],
        query: Query,
        row: int,
        column: int,
        depth: int,
    ) -> tuple[ShardStream, LinkView]:
        """A whole-collection scorer's stream for one query, run here on the collection's link view.

        Returned with that view (the query's filter mask set), which explains the stream.
        """
        view = graph.view
        mask = None
        if query.filter is not None:
            position = plan.filter_of[row]
            mask = np.zeros(view.n_docs, np.bool_)
            for n in live:
                mask[graph.ids[n]] = answers[n][2][position]
        query_view = view.with_allowed(mask)
        inputs = []
        for request in plan.inputs[(row, column)]:
            count = plan.requests[request][3]
            keys = [key for n in live for key in answers[n][1][request][0]]
            scores = (
                np.concatenate([answers[n][1][request][1] for n in live]).astype(np.float64, copy=False)
                if live
                else np.empty(0, np.float64)
            )
            ids = query_view.ids_of(keys)
            present = ids >= 0  # every live key of the cut is in its table; a key of no table is dropped
            ids, scores = ids[present], scores[present]
            order = order_by_score(ids, scores, query_view)[:count]
            inputs.append(Stream(ids[order], scores[order]))
        label = plan.labels[column]
        scorer = plan.scorers[column]
        optional: Any = scorer  # the optional protocol (its stream is checked below)
        produced = optional.score_inputs(query_view, query, depth, inputs)
        stream = canonical_stream(produced, query_view, depth, label, query_view.allowed(query))
        return _shard_stream(query_view, stream), query_view

    def _missing(self, results: Mapping[int, Any], allow_partial: bool) -> set[int]:
        missing = {n for n, value in results.items() if isinstance(value, ShardUnavailableError)}
        if missing and not allow_partial:
            self._raise_missing({n: results[n] for n in missing})
        return missing

    def _merge(
        self,
        columns: Sequence[Sequence[tuple[str | None, ShardStream]]],
        k: int,
        depth: int,
        fuser: Fuser,
    ) -> tuple[_Candidates, list[Stream], Fused]:
        """Each scorer's stream merged from its parts (shards', or the coordinator's own), then fused.

        ``columns``: per scorer, its parts as (shard name, stream); the name
        ``None`` marks the one stream a whole-collection scorer made here.
        The fusion is the engine's own tail (:func:`fuse_candidates`: one
        stream passed through, the fuser's output checked as for one index).
        """
        space = _Candidates(sorted({key for parts in columns for _, stream in parts for key in stream[0]}))
        position = {key: index for index, key in enumerate(space.keys)}
        merged: list[Stream] = []
        for parts in columns:
            keys = [key for _, stream in parts for key in stream[0]]
            ids = np.fromiter((position[key] for key in keys), dtype=np.int64, count=len(keys))
            scores = (
                np.concatenate([stream[1] for _, stream in parts]).astype(np.float64, copy=False)
                if parts
                else np.empty(0, np.float64)
            )
            order = order_by_score(ids, scores, space)[:depth]
            # Cut short on any shard is cut short for the collection (never a silent
            # "complete"); the plan keeps each shard's under its name (see _combined_plan).
            complete = all(stream[2] for _, stream in parts)
            if len(parts) == 1 and parts[0][0] is None:
                plan = parts[0][1][3]  # made here, whole: its own plan
            else:
                plan = _combined_plan([(str(name), stream[3]) for name, stream in parts])
            merged.append(Stream(ids[order], scores[order], plan=plan, complete=complete))
        return space, merged, fuse_candidates(fuser, merged, k, space)

    def _fetch(
        self,
        cut: _Cut,
        merged: Sequence[tuple[_Candidates, list[Stream], Fused]],
        labels: Sequence[str],
        depth: int,
        missing: tuple[str, ...],
        allow_partial: bool,
    ) -> list[ShardedResults]:
        """The hits' fields from their shards (one call per shard for the batch), then the engine's tail."""
        count = len(self._names)
        wanted: list[list[str]] = [[] for _ in range(count)]
        for space, _, fused in merged:
            for doc in fused.ids.tolist():
                key = space.keys[doc]
                wanted[shard_of(key, count)].append(key)
        fields: dict[str, dict[str, FieldValue] | None] = {}
        calls = {n: (cut.refs[n], keys) for n, keys in enumerate(wanted) if keys}
        found = self._group.call("fields", calls, read=True)
        absent = self._missing(found, allow_partial)
        for number, (_, keys) in calls.items():
            if number in absent:
                continue
            for key, row in zip(keys, found[number], strict=True):
                fields[key] = row
        missing = tuple(sorted(set(missing) | {self._names[n] for n in absent}))
        results: list[ShardedResults] = []
        for space, streams, fused in merged:
            result = explain_fused(
                fused,
                streams,
                labels,
                depth,
                generation=cut.number,
                sound_keys=functools.partial(space.sound_keys, fields),
                fields=functools.partial(space.fields_of, fields),
                results_type=ShardedResults,
            )
            assert isinstance(result, ShardedResults)  # _from_arrays builds its own class
            result.missing_shards = missing
            result._refs = cut.refs
            result._owner = self._index_id
            results.append(result)
        return results


def _shard_highlights(
    index: ShardedIndex,
    results: ShardedResults,
    query: Query,
    options: HighlightOptions,
    allow_partial: bool,
) -> dict[str, Mapping[str, FieldHighlight]]:
    """Every hit's highlights, from its shard at the cut searched: one call per shard, at the search.

    Every shard is asked (one without hits only checks ``options``), so bad
    options raise as one index raises them, hits or none. Computed now, not
    when a hit is read as one index does: a shard keeps a cut only until the
    next two are made. A hit whose shard did not answer (``allow_partial``)
    says so in its highlights.
    """
    count = len(index._names)
    wanted: dict[int, list[str]] = {n: [] for n in range(count)}
    for key in results.keys:
        wanted[shard_of(key, count)].append(key)
    refs = results._refs
    arguments = {n: (refs[n], query, options, keys) for n, keys in wanted.items()}
    found = index._group.call("highlights", arguments, read=True)
    missing = index._missing(found, allow_partial)
    table: dict[str, Mapping[str, FieldHighlight]] = {}
    for number, keys in wanted.items():
        if number in missing:
            reason = f"shard {index._names[number]!r} did not answer"
            rows: list[Mapping[str, FieldHighlight]] = [
                {name: FieldHighlight(name, reason=reason) for name in options.fields}
            ] * len(keys)
        else:
            rows = found[number]
        table.update(zip(keys, rows, strict=True))
    return table


def _combined_plan(plans: Sequence[tuple[str, dict[str, PlanValue] | None]]) -> dict[str, PlanValue] | None:
    """One plan for a stream merged from its shards': each shard's entries under its name.

    ``{"shards": 2, "shard-0000.path": "exact", "shard-0000.rows_scanned": 812, ...}``:
    kept apart, not summed, because a plan's entries mix settings (``nprobe``)
    with counts and the engine does not know which is which. ``None`` when no
    shard described its plan. O(entries).
    """
    present = [(name, plan) for name, plan in plans if plan is not None]
    if not present:
        return None
    combined: dict[str, PlanValue] = {"shards": len(present)}
    for name, plan in present:
        for entry, value in plan.items():
            combined[f"{name}.{entry}"] = value
    return combined


def _scored_fields(scorer: Scorer) -> tuple[str, ...] | None:
    """The text fields a scorer scores together (``BM25Scorer(fields=...)``'s, sorted), ``None`` if none.

    Read from a ``fields`` mapping of names, as :class:`~weftsearch.BM25Scorer`
    has; the coordinator imports no scorer.
    """
    fields = getattr(scorer, "fields", None)
    if isinstance(fields, Mapping) and fields and all(isinstance(name, str) for name in fields):
        return tuple(sorted(fields))
    return None


def _leaf_texts(node: Node) -> list[tuple[str | None, str, bool]]:
    """Every ``(field, text, is a prefix)`` of ``node`` (``None``: the default field).

    Words and phrase words are analysed into scored terms; a prefix is kept
    as typed (it scores a constant, but its expansion is bounded).
    """
    if isinstance(node, TermNode):
        return [(node.field, node.text, False)]
    if isinstance(node, PhraseNode):
        return [(node.field, word, False) for word in node.terms]
    if isinstance(node, PrefixNode):
        return [(node.field, node.prefix, True)]
    return [leaf for clause in (*node.must, *node.should, *node.must_not) for leaf in _leaf_texts(clause)]


def _field_requests(pairs: Sequence[tuple[Query, Scorer]]) -> tuple[list[FieldRequest], list[PrefixRequest]]:
    """The per-field statistics the shards must gather for each (query, scorer) searched.

    A ``field:word`` leaf needs the word's df in that field; an unfielded word
    under a scorer of several fields (BM25F) its df in any of them. The default
    field alone is the statistics' ``doc_freq`` (gathered for every text). A
    prefix needs its expansion in the same fields (the default one included),
    so that its bound holds over the collection, not per shard.
    """
    groups: dict[tuple[str, ...], set[str]] = {}
    prefixes: set[PrefixRequest] = set()
    for query, scorer in pairs:
        scored = _scored_fields(scorer)
        if query.tree is None:
            leaves: list[tuple[str | None, str, bool]] = [(None, query.text, False)] if query.text else []
        else:
            leaves = _leaf_texts(query.tree)
        for field, text, prefix in leaves:
            if prefix:
                prefixes.add(((field,) if field is not None else scored or (DEFAULT_FIELD,), text))
                continue
            group = (field,) if field is not None else scored
            if group is not None and group != (DEFAULT_FIELD,):
                groups.setdefault(group, set()).add(text)
    return [(group, sorted(texts)) for group, texts in sorted(groups.items())], sorted(prefixes)


def _combine(parts: Sequence[ShardStatistics], shards: int) -> CollectionStatistics:
    """The collection's statistics from its shards' (sums; the newest time; the union of fields)."""
    doc_freq: dict[str, int] = {}
    kinds: dict[str, str] = {}
    latest: float | None = None
    lengths: dict[str, int] = {}
    groups: dict[tuple[str, ...], dict[str, int]] = {}
    prefixes: dict[tuple[tuple[str, ...], str], set[str]] = {}
    for part in parts:
        for asked, terms in part.prefix_terms.items():
            prefixes.setdefault(asked, set()).update(terms)
        for term, count in part.doc_freq.items():
            doc_freq[term] = doc_freq.get(term, 0) + count
        for name, length in part.field_lengths.items():
            lengths[name] = lengths.get(name, 0) + length
        for group, table in part.field_doc_freq.items():
            into = groups.setdefault(group, {})
            for term, count in table.items():
                into[term] = into.get(term, 0) + count
        for name, kind in part.field_kinds.items():
            kinds.setdefault(name, kind)
        if part.latest_time is not None and (latest is None or part.latest_time > latest):
            latest = part.latest_time
    return CollectionStatistics(
        n_docs=sum(part.n_docs for part in parts),
        total_length=sum(part.total_length for part in parts),
        doc_freq=doc_freq,
        latest_time=latest,
        field_kinds=kinds,
        links_complete=len(parts) == 1 and shards == 1,
        field_lengths=lengths,
        field_doc_freq=groups,
        prefix_terms={asked: len(terms) for asked, terms in prefixes.items()},
    )


_RECORD_KEYS = frozenset(
    {"format", "version", "hash", "index_id", "shards", "cut", "generations", "shard_ids"}
)


def _encode_record(record: Mapping[str, Any]) -> bytes:
    return seal(record)


def record_index_id(root: Path) -> str:
    """The sharded index id its ``SHARDS`` record at ``root`` names (the record fully checked).

    Raises:
        IndexNotFoundError, FormatVersionError, CorruptIndexError: as :func:`_read_record`.

    """
    return str(_read_record(root)["index_id"])


def _read_record(root: Path) -> dict[str, Any]:
    """The sharded commit record at ``root``: checksum, every field's type and range checked.

    Raises:
        IndexNotFoundError: no record at ``root``.
        FormatVersionError: a record of another version (version 1 had no checksum and no
            shard identities: rebuild such an index).
        CorruptIndexError: damaged, edited, or an impossible value (the message names the field).

    """
    target = root / RECORD
    try:
        raw = read_regular(target)  # a FIFO, device or link is refused, never waited on
    except FileNotFoundError:
        raise IndexNotFoundError(f"{root}: no sharded index here (no {RECORD} file)") from None
    except OSError as error:
        raise CorruptIndexError(f"{target}: cannot be read ({error})") from None
    try:
        legacy = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        legacy = None
    if isinstance(legacy, dict) and legacy.get("format") == _FORMAT and legacy.get("version") == 1:
        raise FormatVersionError(
            f"{target}: sharded index format version 1 (no checksum, shards not bound to their slots); "
            f"this code reads version {_VERSION}: rebuild the sharded index"
        )
    record = unseal(raw, target)
    if record.get("format") != _FORMAT:
        raise CorruptIndexError(f"{target}: not a {_FORMAT} record")
    if record.get("version") != _VERSION:
        raise FormatVersionError(
            f"{target}: sharded index format version {record.get('version')!r}; this code reads "
            f"version {_VERSION}"
        )
    exact_keys(record, _RECORD_KEYS, target)
    if record["hash"] != HASH_NAME:
        raise CorruptIndexError(f"{target}: keys hashed by {record['hash']!r}, this version uses {HASH_NAME}")
    shards = integer(record, "shards", 1, MAX_SHARDS + 1, target)
    integer(record, "cut", 0, COUNTER_LIMIT, target)
    identifier(record, "index_id", target)
    for name in ("generations", "shard_ids"):
        if not isinstance(record[name], list) or len(record[name]) != shards:
            raise CorruptIndexError(f"{target}: {name} must be a list of {shards} entries (one per shard)")
    for number in range(shards):
        integer({"generation": record["generations"][number]}, "generation", 0, COUNTER_LIMIT, target)
        identifier({f"shard_ids[{number}]": record["shard_ids"][number]}, f"shard_ids[{number}]", target)
    if len(set(record["shard_ids"])) != shards:
        raise CorruptIndexError(f"{target}: two shards have the same index id")
    return record


def _refuse_extra_shards(root: Path, count: int) -> None:
    """Refuse a ``shard-*`` entry in ``root`` beyond the record's ``count`` shards (an extra shard).

    Only what the coordinator's machine sees of ``root`` is listed: a shard
    kept on another node is checked by its own ``SHARD`` record instead.
    """
    expected = {shard_name(number) for number in range(count)}
    try:
        extra = sorted(
            entry.name
            for entry in root.iterdir()
            if entry.name.startswith("shard-") and entry.name not in expected
        )
    except OSError as error:
        raise CorruptIndexError(f"{root}: cannot be listed ({error})") from None
    if extra:
        raise CorruptIndexError(
            f"{root / extra[0]}: a shard directory {RECORD} does not list (it records {count} shards: "
            f"shard-0000 to {shard_name(count - 1)})"
        )


def _check_shard(
    root: Path, record: Mapping[str, Any], number: int, index_id: str, binding: ShardBinding | None
) -> None:
    """Refuse shard ``number`` unless it is the one ``record`` lists in its place.

    Its ``SHARD`` record must name this sharded index, this slot and this
    shard count, and its index id (its manifest's) must be both that record's
    and the one ``SHARDS`` lists for the slot. O(1).
    """
    where = root / shard_name(number)
    count = record["shards"]
    if binding is None:
        raise CorruptIndexError(
            f"{where}: has no SHARD record, so nothing says it belongs here (not a shard of a "
            "sharded index, or made before shards had one: rebuild the sharded index)"
        )
    if binding.sharded_id != record["index_id"]:
        raise CorruptIndexError(
            f"{where}: is a shard of sharded index {binding.sharded_id}, not of this one "
            f"{record['index_id']} (a shard from another sharded index)"
        )
    if binding.shards != count:
        raise CorruptIndexError(
            f"{where}: belongs to a sharded index of {binding.shards} shards; {RECORD} lists {count}"
        )
    if binding.slot != number:
        raise CorruptIndexError(
            f"{where}: is {shard_name(binding.slot)} of this sharded index, found in the place of "
            f"{shard_name(number)} (copied or swapped shard directories)"
        )
    if binding.index_id != index_id or record["shard_ids"][number] != index_id:
        raise CorruptIndexError(
            f"{where}: holds index {index_id}; its SHARD record names {binding.index_id} and {RECORD} "
            f"lists {record['shard_ids'][number]} (index files copied in from another shard or index)"
        )


def is_sharded(path: str | PathLike[str]) -> bool:
    """Whether ``path`` is a sharded index's directory (it holds a ``SHARDS`` record)."""
    return (Path(path) / RECORD).is_file()


def scrub_sharded(path: str | PathLike[str]) -> ScrubReport:
    """Scrub a sharded index without opening it: its record, every shard's place, every shard's files.

    The ``SHARDS`` record (checksum, fields), an extra ``shard-*`` entry, and
    per listed shard its ``SHARD`` record and index id (as :meth:`ShardedIndex.open`
    checks them) and :func:`~weftsearch.storage.scrub_directory` of its
    directory (every file read in full). One message per problem. Shards on
    another machine than this one are reported missing.

    Raises:
        IndexNotFoundError: no ``SHARDS`` record at ``path``.

    """
    root = Path(path)
    try:
        record = _read_record(root)
    except (CorruptIndexError, FormatVersionError) as error:
        return ScrubReport(files=0, bytes=0, problems=(str(error),))
    problems: list[str] = []
    files = total = 0
    try:
        _refuse_extra_shards(root, record["shards"])
    except CorruptIndexError as error:
        problems.append(str(error))
    for number in range(record["shards"]):
        where = root / shard_name(number)
        try:
            identity = IndexDirectory(where).read_manifest().index_id
            _check_shard(root, record, number, identity, read_binding(where))
        except (IndexStorageError, OSError) as error:
            problems.append(str(error))
        try:
            report = scrub_directory(where)
        except IndexStorageError as error:
            if str(error) not in problems:
                problems.append(str(error))
            continue
        files, total = files + report.files, total + report.bytes
        problems.extend(report.problems)
    return ScrubReport(files=files, bytes=total, problems=tuple(problems))
