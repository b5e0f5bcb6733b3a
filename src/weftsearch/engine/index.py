"""The index: where documents are added, replaced and deleted, and snapshots come from.

State is a list of immutable segments, each with a tombstone mask, plus a
buffer of documents added since the last snapshot. Taking a snapshot seals
the buffer into a new in-memory segment (encoded exactly as it will be on
disk), so the same bytes are searched before and after a commit. Deletes and
upserts never touch a segment: they replace its tombstone mask (copy on
write), and a snapshot keeps the masks it was built with.

Concurrency: one writer (the directory's lock file, and a lock around the
in-memory state), any number of searching threads. A search takes the
current snapshot without waiting for anything; ``commit`` and ``merge``
encode and write their files without holding the lock writes take, and
publish the result with one atomic rename of the manifest.
"""

from __future__ import annotations

import os
import threading
import warnings
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import replace
from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
from numpy.typing import NDArray
from tqdm._monitor import TMonitor
from tqdm.auto import tqdm

from weftsearch.analysis import Analyzer, get_analyzer
from weftsearch.documents import Document
from weftsearch.embedders import (
    Embedder,
    check_embedder,
    embed_missing,
    embedder_record,
    get_embedder,
    recorded_embedder,
    run_embedder_counting,
    warn_truncated,
)
from weftsearch.engine import children
from weftsearch.engine.children import COMMIT_PRIORITIES, ChildFile
from weftsearch.engine.explaining import explain_keys
from weftsearch.engine.explanation import Explanation
from weftsearch.engine.facets import Facets, check_facet_fields, check_facet_k
from weftsearch.engine.filters import Filter
from weftsearch.engine.highlighting import snapshot_highlighter
from weftsearch.engine.inflight import SearchesInFlight
from weftsearch.engine.ingest import analyse_documents, collection_paused, resolve_schema, resolve_workers
from weftsearch.engine.merge_policy import MergePolicy
from weftsearch.engine.pacing import YieldToSearches, release_gradually
from weftsearch.engine.pages import IndexCursors, PageStart
from weftsearch.engine.protocols import Fuser, Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.query_vectors import embed_queries
from weftsearch.engine.search import (
    Highlighter,
    SearchResults,
    _as_query,
    query_facets,
    search_snapshot,
    search_snapshot_many,
)
from weftsearch.engine.snapshot import QueryTerms, Snapshot
from weftsearch.engine.stats import IndexStats, SegmentStats, file_bytes, manifest_bytes
from weftsearch.engine.warming import RecentSearches
from weftsearch.errors import (
    CorruptIndexError,
    CursorExpiredError,
    DiscardedWritesWarning,
    DuplicateKeyError,
    FieldTypeError,
    IndexClosedError,
    IndexStorageError,
    InvalidDocumentError,
    InvalidParameterError,
    ManifestRollbackError,
    UncommittedWritesError,
    UnknownKeyError,
    VectorDimensionError,
)
from weftsearch.highlight import HighlightOptions, options_of
from weftsearch.schema import DEFAULT_FIELD, Schema
from weftsearch.storage.codec import FileStamp
from weftsearch.storage.directory import (
    MANIFEST,
    IndexDirectory,
    Manifest,
    SegmentEntry,
    WriterLock,
    encode_tombstones,
    is_index_id,
    new_index_id,
    read_tombstones,
    segment_number,
)
from weftsearch.storage.fields import check_field_types
from weftsearch.storage.integrity import ScrubReport, check_segment, scrub_directory
from weftsearch.storage.segment import VECTOR_DTYPES, SegmentReader
from weftsearch.storage.segment_merge import merge_columns
from weftsearch.storage.segment_writer import (
    SegmentDocument,
    encode_columns,
    encode_segment,
    segment_columns,
    without_text,
    write_columns,
)

__all__ = ["Index", "MergePolicy", "ScrubReport"]

#: Bulk calls of at least this many documents show a progress bar (on a terminal).
PROGRESS_THRESHOLD = 2000
#: A commit whose buffer holds at least this many documents encodes it in a
#: forked child process, so searching threads keep this interpreter's GIL.
FORK_ENCODE_MIN_DOCUMENTS = 2000
#: A persistent index's ``add_many`` of more documents than this analyses and
#: writes them this many at a time, each chunk as a *run* (an uncommitted
#: segment file), and the next commit merges the runs into one segment
#: (term by term, never whole columns in memory). So a bulk build holds at
#: most one chunk's analysed documents (about 3 KB each) at a time instead of
#: the whole batch; the committed segment's bytes are the same whatever this is
#: (a merge writes the bytes of a fresh build).
FLUSH_DOCUMENTS = 50_000

_IN_MEMORY = Path("<memory>")


class _Segment:
    """A segment the index holds: reader, file name once on disk, tombstones."""

    __slots__ = (
        "committed",
        "committed_mask",
        "data",
        "deleted",
        "deletes_file",
        "deletes_identity",
        "name",
        "reader",
        "run",
    )

    def __init__(self, reader: SegmentReader, data: bytes | None, name: str | None) -> None:
        self.reader = reader
        self.data = data  # the encoded bytes while the segment lives only in memory
        self.name = name
        self.deleted = np.zeros(reader.n_docs, dtype=bool)
        self.deleted.setflags(write=False)
        self.committed_mask = self.deleted  # the mask the manifest's tombstone file holds
        self.deletes_file: str | None = None
        self.committed = False  # listed in the last manifest this index published or loaded
        self.deletes_identity = (0, 0)  # (bytes, checksum) of the tombstone file, for the manifest
        self.run = False  # a chunk of a large add_many, merged with the other runs by the next commit

    @property
    def live(self) -> int:
        return int(self.reader.n_docs - int(self.deleted.sum()))

    def tombstone(self, locals_: NDArray[np.int64]) -> None:
        mask = self.deleted.copy()
        mask[locals_] = True
        mask.setflags(write=False)
        self.deleted = mask


def _entry(segment: _Segment, name: str, deletes: str | None, mask: NDArray[np.bool_]) -> SegmentEntry:
    """The manifest entry of a segment on disk."""
    size, crc = segment.reader.identity
    return SegmentEntry(
        name, segment.reader.n_docs, deletes, int(mask.sum()), size, crc, *segment.deletes_identity
    )


def _in_memory(data: bytes) -> SegmentReader:
    return _own_reader(_IN_MEMORY, data)


def _no_other_thread() -> bool:
    """Whether no thread but this one runs (tqdm's progress monitor aside: it only sleeps and polls bars)."""
    current = threading.current_thread()
    return all(thread is current or isinstance(thread, TMonitor) for thread in threading.enumerate())


def _own_reader(path: Path, data: bytes | None = None) -> SegmentReader:
    """A reader of a segment this index (or its forked child) has just encoded: its tables are trusted.

    See :meth:`SegmentReader.trust_own_tables`: the first search of each
    term checks its checksum, not a derivation of its block table, so the
    searches right after a commit or a merge do not pay for it.
    """
    reader = SegmentReader(path, data)
    reader.trust_own_tables()
    return reader


def _check_lookup_key(key: str) -> None:
    r"""Refuse a key holding NUL, which no document has ever been allowed.

    Why here: numpy's ``str_`` drops trailing NULs, so ``"b\x00"`` would find,
    return or delete document ``"b"``. (Other characters the key rule refuses
    are still looked up: an index written before the rule may hold them, and
    they must stay readable and deletable.)
    """
    if "\x00" in key:
        raise UnknownKeyError(f"no document can have the key {key!r}: document keys never hold NUL")


class Index:
    """A hybrid-search index over :class:`Document` values.

    Implements :class:`~weftsearch.engine.searchable.Searchable`, as
    :class:`~weftsearch.distributed.ShardedIndex` does.

    Args:
        analyzer: an :class:`Analyzer` or the name of a registered one
            (``"english"`` by default). It is fixed for the life of the index.
        vector_dim: the width every document vector must have; ``None`` takes
            the width of the first vector added.
        vector_dtype: how vectors are stored: ``"float32"`` (default) or
            ``"float16"`` (half the memory and disk; scores are computed in
            float32 from the rounded vectors; docs/BENCHMARKS.md measures the
            recall cost). Fixed for the life of the index.
        merge_policy: when segments are merged (see :class:`MergePolicy`).
        background_merge: after each commit, merge in a background thread
            when the policy asks for it (otherwise merging happens only on
            :meth:`merge`). Searches never wait for it; writes wait only for
            its short install step. An error in it is raised by the next
            :meth:`commit` or :meth:`wait_for_merges`.
        store_text: keep each document's text in the index (default). With
            ``False`` the text is analysed (search, scores, keys, fields,
            links, times and vectors all work as before) but not stored:
            :meth:`get`, hits and :meth:`Snapshot.document` give ``text`` as
            the empty string ``""``. For users who keep documents elsewhere;
            docs/FORMAT.md ("Stored text") says what the text costs. Fixed for
            the life of the index (recorded in the manifest; merges keep
            it).
        commit_priority: the CPU priority of the child process that encodes a
            large commit (2,000 or more buffered documents, on systems with
            ``fork``): ``"idle"`` (default) runs it only on CPU time nothing
            else wants, so searches keep their latency during the commit; on a
            machine whose cores are all busy with other work the commit then
            waits for them. ``"normal"`` shares the CPU equally; with it, a
            commit made while no other thread runs encodes in the committing
            thread instead (the same file; a child would only add the fork's
            cost).
        embedder: an :class:`~weftsearch.embedders.Embedder`, or the name of a
            registered one (``"minilm-l6-int8"``, the offline MiniLM int8
            model of the ``embed`` extra); ``None`` (default) for none. Fixed
            for the life of the index and recorded in its manifest (name,
            width, model record); it fixes ``vector_dim``. Documents added
            without a vector then get one from their text
            (:meth:`add_many`), and a search whose ranking needs a query
            vector embeds the query's text (:meth:`search`).

    An index made with the constructor lives in memory; :meth:`create` and
    :meth:`open` tie it to a directory, and :meth:`commit` writes it there.

    **Uncommitted writes are never dropped unasked** (the rule of Python's
    ``sqlite3`` connection context). Leaving a ``with Index.create(...)`` or
    ``with Index.open(...)`` block normally commits pending writes; leaving it
    by an exception discards them (they were never committed, so the directory
    still holds the last commit), warns with :class:`DiscardedWritesWarning`
    saying how many, and lets the exception propagate. :meth:`close` with
    uncommitted writes raises :class:`UncommittedWritesError` and leaves the
    index open and unchanged, unless called as ``close(discard=True)``.
    Uncommitted writes are buffered documents, documents sealed into
    in-memory segments, deletes since the last commit, and (after
    ``create(..., overwrite=True)``) the replacement of the old index itself.
    An in-memory index has nothing to lose on close, and a read-only one no
    writes.

    **A closed index refuses every call** that reads or writes its documents
    (writes, commit, merge, search, snapshot, get, keys, ``len``, ``in``,
    refresh, scrub, ...) with :class:`IndexClosedError` naming its path. Its
    description stays readable: :attr:`path`, :attr:`readonly`,
    :attr:`closed`, :attr:`analyzer` and :attr:`vector_dim`. Snapshots and
    search results taken before the close stay valid. Once closed it holds no
    lock and writes no file, whoever opens the directory next.

    """

    def __init__(
        self,
        analyzer: Analyzer | str = "english",
        *,
        vector_dim: int | None = None,
        vector_dtype: str = "float32",
        merge_policy: MergePolicy | None = None,
        background_merge: bool = False,
        commit_priority: str = "idle",
        store_text: bool = True,
        embedder: Embedder | str | None = None,
        schema: Schema | None = None,
    ) -> None:
        self._analyzer = get_analyzer(analyzer) if isinstance(analyzer, str) else analyzer
        if not isinstance(self._analyzer, Analyzer):
            raise InvalidParameterError(f"{analyzer!r} is not an Analyzer (needs .name and .analyze)")
        self._query_terms = QueryTerms(self._analyzer)  # shared by every snapshot (bounded LRU)
        if vector_dim is not None and (
            isinstance(vector_dim, bool) or not isinstance(vector_dim, int) or vector_dim <= 0
        ):
            raise InvalidParameterError(f"vector_dim must be a positive integer, got {vector_dim!r}")
        self._embedder: Embedder | None = None
        if embedder is not None:
            self._embedder = get_embedder(embedder) if isinstance(embedder, str) else check_embedder(embedder)
            if vector_dim is not None and vector_dim != self._embedder.dim:
                raise VectorDimensionError(
                    f"vector_dim is {vector_dim} but embedder {self._embedder.name!r} makes vectors of "
                    f"{self._embedder.dim}; give one or the other"
                )
            vector_dim = self._embedder.dim
        self._vector_dim = vector_dim
        if vector_dtype not in VECTOR_DTYPES:
            raise InvalidParameterError(
                f"vector_dtype must be one of {', '.join(VECTOR_DTYPES)}, got {vector_dtype!r}"
            )
        self._vector_dtype = vector_dtype
        # Field name -> type (keyword, number, boolean), fixed by the first document that
        # has the field; None until first needed on an opened index (then read from the
        # manifest, or derived from the segments of an index written before it was recorded).
        self._field_kinds: dict[str, str] | None = {}
        if not isinstance(store_text, bool):
            raise InvalidParameterError(f"store_text must be True or False, got {store_text!r}")
        self._store_text = store_text
        self._schema, self._field_analysis = resolve_schema(schema, self._analyzer, store_text)
        if commit_priority not in COMMIT_PRIORITIES:
            raise InvalidParameterError(
                f"commit_priority must be one of {', '.join(COMMIT_PRIORITIES)}, got {commit_priority!r}"
            )
        self._commit_priority = commit_priority
        self._policy = merge_policy or MergePolicy()
        self._background_merge = bool(background_merge)
        self._merger: threading.Thread | None = None
        self._merge_error: BaseException | None = None
        self._segments: list[_Segment] = []
        self._pending: dict[str, SegmentDocument] = {}
        self._generation = 0
        self._next_segment = 1
        self._snapshot: Snapshot | None = None
        self._latest: Snapshot | None = None  # the newest complete snapshot, current or not
        # Every snapshot this index made and someone still holds: search(snapshot=...) accepts only these.
        self._made: weakref.WeakSet[Snapshot] = weakref.WeakSet()
        self._last_writer = 0  # thread id of the newest write
        self._write_lock = threading.RLock()
        self._searches = SearchesInFlight()
        # The newest distinct searches, replayed on a snapshot before a commit, merge or refresh
        # publishes it, so its first searches find its caches built.
        self._warming = RecentSearches(self._searches)
        self._fork_encode_min: int | None = FORK_ENCODE_MIN_DOCUMENTS if hasattr(os, "fork") else None
        self._flush_documents = FLUSH_DOCUMENTS
        self._commit_lock = threading.RLock()
        self._directory: IndexDirectory | None = None
        self._writer_lock: WriterLock | None = None
        self._readonly = False
        self._loaded: Manifest | None = None  # the manifest a read-only index shows
        self._committed: Manifest | None = None  # the last manifest this writer published or loaded
        self._replacing = False  # create(overwrite=True): the old index stays until the first commit
        self._closed = False
        self._index_id = ""  # the index id of the directory (docs/FORMAT.md, "Identity")
        self._cursors = IndexCursors()

    @property
    def schema(self) -> Schema:
        """The index's text fields (:class:`~weftsearch.schema.Schema`; without one, the default)."""
        return self._schema

    # ------------------------------------------------------------------ opening and closing

    @classmethod
    def create(
        cls,
        path: str | PathLike[str],
        analyzer: Analyzer | str = "english",
        *,
        vector_dim: int | None = None,
        vector_dtype: str = "float32",
        overwrite: bool = False,
        merge_policy: MergePolicy | None = None,
        background_merge: bool = False,
        commit_priority: str = "idle",
        index_id: str | None = None,
        store_text: bool = True,
        embedder: Embedder | str | None = None,
        schema: Schema | None = None,
    ) -> Index:
        """Create an empty index stored at ``path``, take its writer lock, and commit it.

        ``embedder`` (see the class docstring) is recorded in the manifest, so
        :meth:`open` finds it again by name (register a custom one with
        :func:`~weftsearch.embedders.register_embedder` in every process that
        opens the index).
        ``schema`` (:class:`~weftsearch.schema.Schema`) names the text fields
        besides ``text`` (documents give them in ``Document.text_fields``),
        each with its analyzer; it is recorded in the manifest and fixed for
        the life of the index. Its ``"text"`` field must agree with
        ``analyzer`` and ``store_text``.

        ``index_id`` (32 lowercase hex digits) names the index in its manifest
        and in every file it writes; by default 128 fresh random bits. Give
        one only for reproducible builds (docs/FORMAT.md, "Determinism"): two
        indexes with the same id cannot tell each other's files apart.

        With ``overwrite=True`` and an index already at ``path``, nothing of the
        old index is removed here: it stays whole, and is what ``open`` reads,
        until the new index's first :meth:`commit` publishes its manifest over
        the old one in one atomic rename (and then sweeps the old files). The
        new index takes the old one's writer lock at once and holds it
        throughout, names its files from numbers the old index never used, and
        commits as a later generation. A crash or error before that commit
        leaves the old index serving, unchanged (the next writer sweeps the
        unfinished files); after it, the new one. Closing without that commit
        is refused like any uncommitted write (see the class docstring).

        Raises:
            InvalidParameterError: ``index_id`` is not 32 lowercase hex digits.
            IndexStorageError: ``path`` is a file, or a non-empty directory
                (unless ``overwrite``), or cannot be written.
            IndexLockedError: another writer holds the directory.

        """
        if index_id is None:
            index_id = new_index_id()
        elif not is_index_id(index_id):
            raise InvalidParameterError(f"index_id must be 32 lowercase hex digits, got {index_id!r}")
        index = cls(
            analyzer,
            vector_dim=vector_dim,
            vector_dtype=vector_dtype,
            merge_policy=merge_policy,
            background_merge=background_merge,
            commit_priority=commit_priority,
            store_text=store_text,
            embedder=embedder,
            schema=schema,
        )
        index._index_id = index_id
        directory = IndexDirectory(Path(path))
        made = directory.prepare_new(overwrite)
        try:
            lock = WriterLock(directory.path)
        except BaseException:
            directory.remove_created(made)
            raise
        try:
            directory.lock = index._writer_lock = lock
            index._directory = directory
            start = directory.replacement_start()
            if start is None:
                index._loaded = index._committed = index._manifest([])
                directory.publish(index._committed)
                directory.sweep(index._committed)
            else:
                index._generation, index._next_segment = start
                index._replacing = True
        except BaseException:
            # A failed create must not keep the directory locked, nor leave a
            # lock file (or directories) where there was no index.
            lock.release(remove=not (directory.path / MANIFEST).exists())
            index._writer_lock = None
            index._closed = True
            directory.remove_created(made)
            raise
        return index

    @classmethod
    def open(
        cls,
        path: str | PathLike[str],
        *,
        readonly: bool = False,
        merge_policy: MergePolicy | None = None,
        background_merge: bool = False,
        commit_priority: str = "idle",
        embedder: Embedder | None = None,
    ) -> Index:
        """Open the index stored at ``path`` with the analyzer (and embedder) it was created with.

        A writer (the default) takes the directory's lock; ``readonly=True``
        takes none, refuses writes, and sees new commits after :meth:`refresh`.

        An index created with an embedder gets it from the registry by its
        recorded name, or uses ``embedder`` when given; either way its name,
        width and model record must be the recorded ones. ``embedder`` given
        for an index created without one is refused.

        Raises:
            IndexNotFoundError: no index at ``path``.
            IndexLockedError: another writer holds the directory.
            FormatVersionError: written by an unknown format version.
            CorruptIndexError: the manifest or a segment header fails its checks.
            UnknownAnalyzerError: the recorded analyzer is not registered.
            UnknownEmbedderError: the recorded embedder is not registered (the
                message names it and how to register it).
            EmbedderMismatchError: the embedder (registered or given) is not
                the recorded one: another name, width or model record.

        """
        directory = IndexDirectory(Path(path))
        directory.check_exists()
        writer_lock = None if readonly else WriterLock(directory.path)
        directory.lock = writer_lock
        try:
            manifest = directory.read_manifest()
            recorded = manifest.extra.get("embedder")
            chosen = recorded_embedder(recorded, manifest.vector_dim, embedder, directory.path)
            index = cls(
                manifest.analyzer,
                vector_dim=manifest.vector_dim,
                vector_dtype=str(manifest.extra.get("vector_dtype", "float32")),
                merge_policy=merge_policy,
                background_merge=background_merge and not readonly,
                commit_priority=commit_priority,
                store_text=manifest.extra.get("store_text", True) is not False,
                embedder=chosen,
                schema=Schema.from_dict(manifest.extra["schema"]) if "schema" in manifest.extra else None,
            )
            index._directory = directory
            index._writer_lock = writer_lock
            index._readonly = readonly
            index._index_id = manifest.index_id
            recorded = manifest.extra.get("fields")
            index._field_kinds = dict(recorded) if isinstance(recorded, dict) else None
            index._load_current(manifest)
            if not readonly:
                directory.sweep(index._manifest_of_state())
        except BaseException:
            if writer_lock is not None:
                # A lock file this call made in a directory that turned out not
                # to hold a readable index is removed again.
                writer_lock.release(remove=writer_lock.created)
            raise
        return index

    def _load_current(self, manifest: Manifest) -> None:
        """Load ``manifest``; if a file it names is gone, a newer commit swept it: reread."""
        assert self._directory is not None
        for _ in range(5):
            try:
                self._load(manifest)
                return
            except FileNotFoundError:
                newer = self._directory.read_manifest()
                if newer == manifest:
                    break
                self._check_successor(newer)
                manifest = newer
        try:
            self._load(manifest)
        except FileNotFoundError as exc:
            raise CorruptIndexError(
                f"{self._directory.path}: the manifest names a missing file ({exc})"
            ) from None

    def _manifest_of_state(self) -> Manifest:
        entries = [
            _entry(s, s.name, s.deletes_file, s.committed_mask) for s in self._segments if s.name is not None
        ]
        return self._manifest(entries)

    def _check_successor(self, manifest: Manifest) -> None:
        """Refuse a manifest that cannot follow the one this index shows: generations never go back.

        Raises:
            ManifestRollbackError: another index's manifest, an older
                generation, or the same generation with other content
                (docs/FORMAT.md, "Rollback").

        """
        seen = self._loaded
        if seen is None:
            return
        where = self._directory.path if self._directory is not None else "the index"
        if manifest.index_id != seen.index_id:
            raise ManifestRollbackError(
                f"{where}: the manifest is now index {manifest.index_id}'s; this index is {seen.index_id}"
            )
        if manifest.generation < seen.generation or (
            manifest.generation == seen.generation and manifest != seen
        ):
            raise ManifestRollbackError(
                f"{where}: the manifest went back from generation {seen.generation} to {manifest.generation} "
                "(restored from a backup or replaced); reopen the index to accept it"
            )

    def _load(self, manifest: Manifest) -> None:
        """Adopt ``manifest``'s segments, reusing readers of segments already open."""
        assert self._directory is not None
        known = {segment.name: segment for segment in self._segments if segment.name}
        segments = []
        for entry in manifest.segments:
            path = self._directory.path / entry.name
            old = known.get(entry.name)
            reader = old.reader if old is not None else SegmentReader(path)
            # Identity, counts and width before anything is sized by the file's counts.
            check_segment(reader, entry, manifest)
            if old is None and self._latest is not None:
                # A refresh: searches are served meanwhile by the snapshot this one replaces,
                # so the new reader's tables are checked here rather than by its first search.
                reader.warm()
            segment = old or _Segment(reader, None, entry.name)
            if entry.deletes is None:
                mask = np.zeros(entry.documents, dtype=bool)
                mask.setflags(write=False)
            else:
                mask = read_tombstones(
                    self._directory.path / entry.deletes,
                    entry.documents,
                    entry.deleted,
                    entry=entry,
                    index_id=manifest.index_id,
                )
            segment.deleted = segment.committed_mask = mask
            segment.deletes_file = entry.deletes
            segment.deletes_identity = (entry.deletes_size, entry.deletes_checksum)
            segment.committed = True
            segments.append(segment)
        self._segments = segments
        self._loaded = self._committed = manifest
        self._generation = manifest.generation
        self._next_segment = manifest.next_segment
        if manifest.vector_dim is not None:
            self._vector_dim = manifest.vector_dim
        self._snapshot = None

    def refresh(self) -> bool:
        """Make the newest state visible to every thread; return whether anything changed.

        A writer publishes its writes so far (as :meth:`snapshot` does for the
        writing thread). A read-only index adopts the newest commit on disk.
        """
        self._check_open()
        if not self._readonly:
            with self._write_lock:
                changed = self._latest is None or self._latest.generation != self._generation
                self._publish(warm=True)
                return changed
        assert self._directory is not None
        manifest = self._directory.read_manifest()
        if manifest == self._loaded:
            return False
        self._check_successor(manifest)
        with self._write_lock:
            self._load_current(manifest)
            self._publish(warm=True)
        return True

    def _uncommitted(self) -> tuple[int, int]:
        """(documents added or replaced, documents deleted) since the last commit (under the write lock)."""
        added = len(self._pending) + sum(s.live for s in self._segments if not s.committed)
        deleted = sum(
            int((s.deleted & ~s.committed_mask).sum())
            for s in self._segments
            if s.committed and s.deleted is not s.committed_mask
        )
        return added, deleted

    def _pending_writes(self) -> str:
        """What a commit would publish, in words; empty when nothing (a persistent writer only)."""
        if self._writer_lock is None:
            return ""  # in memory (nothing to lose) or read-only (no writes)
        with self._write_lock:
            added, deleted = self._uncommitted()
        parts = []
        if added:
            parts.append(f"{added} document{'s' if added != 1 else ''} added or replaced")
        if deleted:
            parts.append(f"{deleted} document{'s' if deleted != 1 else ''} deleted")
        if self._replacing:
            parts.append("the replacement of the index that was there")
        return ", ".join(parts)

    def close(self, *, discard: bool = False) -> None:
        """Wait for a background merge, then release the writer lock. Idempotent.

        A persistent writer with uncommitted writes (buffered or sealed
        documents, deletes since the last commit, a pending overwrite) is not
        closed: :class:`UncommittedWritesError` says what is pending and the
        index stays open and unchanged. Call :meth:`commit` first, or
        ``close(discard=True)`` to drop them (the directory keeps the last
        commit). An in-memory or read-only index just closes. Afterwards every
        call but the descriptive properties raises :class:`IndexClosedError`.

        Args:
            discard: drop uncommitted writes instead of refusing to close.

        Raises:
            UncommittedWritesError: uncommitted writes and not ``discard``.

        """
        if self._closed:
            return
        merger = self._merger
        if merger is not None and merger is not threading.current_thread():
            merger.join()
        with self._commit_lock, self._write_lock:  # no commit, merge or write is half done
            if self._closed:
                return
            pending = "" if discard else self._pending_writes()
            if pending:
                raise UncommittedWritesError(
                    f"{self.path}: not closed: uncommitted writes ({pending}); "
                    "commit() them, or close(discard=True) to drop them"
                )
            self._closed = True
            self._pending = {}
            self._segments = []
            self._snapshot = self._latest = None
            self._cursors.close()
            if self._writer_lock is not None:
                self._writer_lock.release()
                self._writer_lock = None

    @property
    def closed(self) -> bool:
        """True once :meth:`close` succeeded."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            where = "in-memory index" if self._directory is None else f"index at {self._directory.path}"
            raise IndexClosedError(f"this {where} is closed")

    def __enter__(self) -> Index:
        self._check_open()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        """Commit pending writes if the block ended normally; otherwise discard them with a warning."""
        if self._closed:
            return
        if kind is None:
            try:
                if self._pending_writes():
                    self.commit()
            except BaseException:
                self._discard_and_warn("the commit on leaving the with block failed")
                raise
            self.close()
        else:
            self._discard_and_warn(f"the with block raised {kind.__name__}")

    def _discard_and_warn(self, why: str) -> None:
        pending = self._pending_writes()
        self.close(discard=True)
        if pending:
            warnings.warn(
                DiscardedWritesWarning(f"{self.path}: {why}; uncommitted writes discarded ({pending})"),
                stacklevel=3,
            )

    @property
    def path(self) -> Path | None:
        """The directory this index commits to, or ``None`` for an in-memory index."""
        return None if self._directory is None else self._directory.path

    @property
    def index_id(self) -> str:
        """The index's id from its manifest (32 hex digits; ``""`` in memory; docs/FORMAT.md, "Identity")."""
        return self._index_id

    @property
    def readonly(self) -> bool:
        """True when opened with ``readonly=True``."""
        return self._readonly

    # ------------------------------------------------------------------ reading

    @property
    def analyzer(self) -> Analyzer:
        """The analyzer documents and queries are analysed with."""
        return self._analyzer

    @property
    def embedder(self) -> Embedder | None:
        """The embedder the index was created with (see the class docstring), or ``None``."""
        return self._embedder

    @property
    def vector_dim(self) -> int | None:
        """The width of stored vectors, or ``None`` until the first vector arrives."""
        return self._vector_dim

    @property
    def generation(self) -> int:
        """Counter bumped by every write and merge; a commit records it in the manifest.

        Never goes backwards, and no two different manifests of a directory
        carry the same number (a merge publishes the next number).
        """
        self._check_open()
        return self._generation

    @property
    def segment_count(self) -> int:
        """Number of segments (committed or sealed in memory) holding live documents."""
        self._check_open()
        return sum(1 for segment in self._segments if segment.live)

    def stats(self) -> IndexStats:
        """Counts and sizes: documents, segments (one row each), generation, vectors, bytes on disk.

        A writer's uncommitted writes are counted in the documents and
        segments (a segment not yet committed has no name), not on disk.

        Complexity: O(segments) (one ``stat`` per file); no document is read.

        Raises:
            IndexStorageError: a read-only index whose files a newer commit
                removed (call :meth:`refresh` and ask again).

        """
        directory = None if self._directory is None else self._directory.path
        # The files are measured under the lock: a merge or commit installs its state under it and
        # sweeps the files it replaced right after, so sizes taken outside it could name a file
        # that was just swept (a writer's stats then failed saying "is gone").
        with self._write_lock:
            rows = [(s.name, s.deletes_file, s.live, int(s.deleted.sum()), s.data) for s in self._segments]
            pending = len(self._pending)
            generation = self._generation
            segments = []
            for name, deletes_file, live, deleted, data in rows:
                if name is None or directory is None:
                    size = 0 if data is None else len(data)
                else:
                    size = file_bytes(directory, [name, deletes_file])
                segments.append(SegmentStats(name, live, deleted, size))
            on_disk = 0
            if directory is not None:
                on_disk = manifest_bytes(directory) + sum(s.bytes for s in segments if s.name is not None)
        return IndexStats(
            path=None if directory is None else str(directory),
            documents=sum(live for _, _, live, _, _ in rows) + pending,
            pending=pending,
            generation=generation,
            analyzer=self._analyzer.name,
            vector_dim=self._vector_dim,
            vector_dtype=self._vector_dtype,
            segments=tuple(segments),
            bytes_on_disk=on_disk,
        )

    def __len__(self) -> int:
        self._check_open()
        with self._write_lock:
            return sum(segment.live for segment in self._segments) + len(self._pending)

    def __contains__(self, key: object) -> bool:
        self._check_open()
        if not isinstance(key, str) or "\x00" in key:
            return False  # no document has such a key (and numpy would drop a trailing NUL)
        with self._write_lock:
            return key in self._pending or self._locate(key) is not None

    def _locate(self, key: str) -> tuple[_Segment, int] | None:
        for segment in self._segments:
            local = segment.reader.find(key)
            if local >= 0 and not segment.deleted[local]:
                return segment, local
        return None

    def get(self, key: str) -> Document:
        """The stored document with ``key``.

        Raises:
            UnknownKeyError: no such document (or its stored record is damaged,
                in which case the message says so; run :meth:`scrub`), or no
                document can have ``key`` (it holds NUL).

        """
        self._check_open()
        if not isinstance(key, str):
            raise UnknownKeyError(f"document keys are strings, got {key!r}")
        _check_lookup_key(key)
        with self._write_lock:
            if key in self._pending:
                return self._pending[key].document
            found = self._locate(key)
        if found is None:
            raise UnknownKeyError(f"no document with key {key!r}")
        document = found[0].reader.document(found[1])
        if document is None:
            raise UnknownKeyError(f"document {key!r} is damaged on disk and reported absent (run scrub)")
        return document

    def keys(self) -> list[str]:
        """All live keys, sorted."""
        return sorted(self.snapshot().keys())

    # ------------------------------------------------------------------ writing

    def _check_writable(self) -> None:
        self._check_open()
        if self._readonly:
            raise IndexStorageError(f"{self.path} was opened read-only")

    def add(self, document: Document) -> None:
        """Add ``document``, replacing any document with the same key (upsert)."""
        self.add_many([document], progress=False)

    def add_many(
        self, documents: Iterable[Document], *, progress: bool | None = None, workers: int | None = None
    ) -> int:
        """Add many documents at once (upsert); all or nothing.

        The whole batch is validated before any of it is applied: a repeated
        key within the batch raises :class:`DuplicateKeyError`, a vector of the
        wrong width :class:`VectorDimensionError`, an analyzer failing on a
        text :class:`~weftsearch.errors.AnalysisError` (naming the first such
        document), and the index is unchanged.

        Args:
            documents: the documents; any iterable, consumed once.
            progress: show a progress bar; ``None`` shows one for large batches
                on a terminal.
            workers: processes that analyse the batch. ``None`` (the default):
                for a batch of at least
                :data:`~weftsearch.engine.ingest.PARALLEL_MIN_DOCUMENTS`
                (2,000) documents, this process and one worker per idle CPU
                (by the load average), else one process (and one for a custom
                analyzer while other threads run); see
                :func:`~weftsearch.engine.ingest.resolve_workers`. ``1``: this
                thread only. Workers are forked (POSIX; elsewhere always one
                process) and their results are gathered in input order, so the
                index is byte-identical whatever the count.

        Returns:
            The number of documents added or replaced.

        With an embedder (see the class docstring), each document without a
        vector gets one from its text first, :data:`~weftsearch.embedders.EMBED_BATCH_SIZE`
        (256) texts per call, with a progress bar ("embedding") on long work,
        outside every lock; a document whose text is blank gets none. A
        document with its own vector keeps it: only its width can be checked
        against the embedder's (an index cannot tell which model made a
        vector of the right width). An embedder that raises or returns rows of
        the wrong shape or dtype, or NaN, refuses the whole call with
        :class:`~weftsearch.errors.EmbeddingError` and the index is unchanged.

        Raises:
            InvalidParameterError: ``workers`` is not ``None`` or a positive int.
            EmbeddingError: the embedder failed on a batch (the message names its documents).

        Complexity: O(total text length) for analysis, outside any lock,
        divided among the workers. Python's automatic cyclic garbage collection
        is paused meanwhile (see :func:`~weftsearch.engine.ingest.collection_paused`).

        """
        with collection_paused():
            return self._add_many(documents, progress, workers)

    def _add_many(self, documents: Iterable[Document], progress: bool | None, workers: int | None) -> int:
        """:meth:`add_many`'s body (the collector paused by the caller)."""
        self._check_writable()
        batch = list(documents)
        seen: set[str] = set()
        dim = self._vector_dim
        kinds = dict(self._known_field_kinds())
        known = len(kinds)
        for position, document in enumerate(batch):
            if not isinstance(document, Document):
                raise InvalidDocumentError(f"item {position} is {type(document).__name__}, not a Document")
            if document.key in seen:
                raise DuplicateKeyError(f"key {document.key!r} appears twice in one add_many call")
            seen.add(document.key)
            if document.fields:
                check_field_types(document, kinds)
            if document.text_fields:
                self._check_text_fields(document)
            if document.vector is not None:
                width = int(document.vector.shape[0])
                if dim is None:
                    dim = width
                elif width != dim:
                    raise VectorDimensionError(
                        f"document {document.key!r} has a vector of width {width}; the index holds {dim}"
                    )
        # tqdm's disable=None means "only on a terminal".
        disable = (not progress) if progress is not None else (len(batch) < PROGRESS_THRESHOLD or None)
        if self._embedder is not None:
            # Before any lock (and before the commit lock _add_in_runs takes): a slow or failing
            # model never holds up a commit, and a failed batch has changed nothing.
            batch = self._embed_documents(batch, disable, depth=1)  # add_many -> _add_many -> here
        processes = resolve_workers(workers, len(batch), self._analyzer)
        lock_fd = None if self._writer_lock is None else self._writer_lock.fileno()
        if self._directory is not None and len(batch) > self._flush_documents:
            with tqdm(total=len(batch), desc="analysing", unit="doc", disable=disable, leave=False) as bar:
                return self._add_in_runs(batch, self._directory, processes, dim, bar.update, lock_fd)
        with tqdm(total=len(batch), desc="analysing", unit="doc", disable=disable, leave=False) as bar:
            # Terms and stored records are made now, outside any lock, not in the commit.
            analysed = analyse_documents(
                self._analyzer,
                batch,
                processes,
                tick=bar.update,
                close_fds=() if lock_fd is None else (lock_fd,),
                fields=self._field_analysis,
            )
        if not analysed:
            return 0
        if not self._store_text:
            # Analysed above with the text; stored (and held until the commit) without it.
            analysed = [without_text(entry) for entry in analysed]
        with self._write_lock:
            self._check_open()  # closed by another thread meanwhile
            if self._vector_dim is not None and dim != self._vector_dim:
                raise VectorDimensionError(f"vector width changed to {dim} during add_many")
            self._vector_dim = dim
            if len(kinds) != known:
                current = self._known_field_kinds()
                for name, kind in kinds.items():
                    if current.setdefault(name, kind) != kind:  # another thread added it meanwhile
                        raise FieldTypeError(
                            f"field {name!r} became {current[name]} during add_many; this batch gives {kind}"
                        )
            self._tombstone_keys([d.document.key for d in analysed])
            for entry in analysed:
                self._pending[entry.document.key] = entry
            self._bump()
        return len(batch)

    def embed_documents(
        self, documents: Iterable[Document], *, progress: bool | None = None
    ) -> list[Document]:
        """``documents`` as :meth:`add_many` would add them: each without a vector given its text's.

        Lets a caller that serialises its writes (the server) embed before taking its own
        lock; :meth:`add_many` then finds the vectors there. Without an embedder the
        documents are returned as they are.

        Raises:
            InvalidDocumentError: an item is not a :class:`Document`.
            EmbeddingError: the embedder failed on a batch (nothing is changed).

        """
        self._check_open()
        batch = list(documents)
        for position, document in enumerate(batch):
            if not isinstance(document, Document):
                raise InvalidDocumentError(f"item {position} is {type(document).__name__}, not a Document")
        if self._embedder is None:
            return batch
        disable = (not progress) if progress is not None else (len(batch) < PROGRESS_THRESHOLD or None)
        return self._embed_documents(batch, disable)

    def _embed_documents(self, batch: list[Document], disable: bool | None, depth: int = 0) -> list[Document]:
        """``batch`` with the index embedder's vectors where it has none (:func:`embed_missing`).

        ``depth``: the frames between the public method and this call beyond one (so
        a truncation warning names the caller's line: ``add_many`` calls through
        ``_add_many``, one more).
        """
        assert self._embedder is not None
        return embed_missing(self._embedder, batch, disable, stacklevel=5 + depth)

    def _check_text_fields(self, document: Document) -> None:
        """Every named text field of ``document`` is one of the schema's.

        Raises:
            InvalidDocumentError: a field the schema lacks (the known ones named).

        """
        analyzers = self._field_analysis.analyzers
        for name in document.text_fields:
            if name not in analyzers:
                known = ", ".join(field.name for field in self._schema.named_fields) or "none besides 'text'"
                raise InvalidDocumentError(
                    f"document {document.key!r}: text field {name!r} is not in the index's schema "
                    f"(its named text fields: {known})"
                )

    def _add_in_runs(
        self,
        batch: Sequence[Document],
        directory: IndexDirectory,
        processes: int,
        dim: int | None,
        tick: Any,
        lock_fd: int | None,
    ) -> int:
        """``add_many`` of a batch over :data:`FLUSH_DOCUMENTS`: analysed and written a chunk at a time.

        Each chunk becomes a run (an uncommitted segment file, see
        :data:`FLUSH_DOCUMENTS`); the batch is applied only once every chunk
        is written (all or nothing: on any error the runs are removed and the
        index is unchanged). Holds the commit lock throughout, so no commit's
        sweep can remove a run before it is listed.
        """
        flush = self._flush_documents
        runs: list[_Segment] = []
        with self._commit_lock:
            self._check_open()
            try:
                for start in range(0, len(batch), flush):
                    analysed = analyse_documents(
                        self._analyzer,
                        batch[start : start + flush],
                        min(processes, len(batch[start : start + flush])),
                        tick=tick,
                        close_fds=() if lock_fd is None else (lock_fd,),
                        fields=self._field_analysis,
                    )
                    if not self._store_text:
                        analysed = [without_text(entry) for entry in analysed]
                    runs.append(self._write_run(directory, analysed, dim))
                    del analysed
                with self._write_lock:
                    self._check_open()  # closed by another thread meanwhile
                    if self._vector_dim is not None and dim != self._vector_dim:
                        raise VectorDimensionError(f"vector width changed to {dim} during add_many")
                    self._vector_dim = dim
                    keys = [document.key for document in batch]
                    self._tombstone_keys(keys)
                    for key in keys:
                        self._pending.pop(key, None)
                    self._segments.extend(runs)
                    self._bump()
            except BaseException:
                for run in runs:
                    assert run.name is not None
                    (directory.path / run.name).unlink(missing_ok=True)
                raise
        return len(batch)

    def _write_run(
        self, directory: IndexDirectory, analysed: Sequence[SegmentDocument], dim: int | None
    ) -> _Segment:
        """Write ``analysed`` as a run: a segment file of its own, uncommitted (see :meth:`_add_in_runs`)."""
        with self._write_lock:
            name = f"seg-{self._next_segment:06d}.wseg"
            self._next_segment += 1
        self._check_fresh_name(name)
        stamp = FileStamp(self._index_id, segment_number(name))
        pause = YieldToSearches(self._searches)
        columns = segment_columns(
            analysed,
            dim,
            self._vector_dtype,
            pause=pause,
            text_fields=self._text_field_names(),
            positions_fields=self._field_analysis.positions,
        )
        directory.write_streamed(name, lambda path: write_columns(columns, path, stamp, pause=pause))
        segment = _Segment(_own_reader(directory.path / name), None, name)
        segment.run = True
        return segment

    def _merge_runs(self, directory: IndexDirectory) -> None:
        """Merge the runs of large ``add_many`` calls, and the buffered documents, into one segment.

        Called by :meth:`commit` (under the commit lock): the committed
        segment is then the one a single build of the same documents writes,
        however the batches were cut into runs. Deletes made since apply (the
        merge drops those documents, as a fresh build would not hold them).
        """
        with self._write_lock:
            runs = [segment for segment in self._segments if segment.run]
            if not runs:
                return
            if self._pending:
                pending = list(self._pending.values())
                run = self._write_run(directory, pending, self._vector_dim)
                self._segments.append(run)
                self._pending = {}
                runs.append(run)
                self._snapshot = None
            if len(runs) == 1 and not runs[0].deleted.any():
                runs[0].run = False  # already the segment a single build writes
                return
            sources = [(segment, segment.deleted) for segment in runs]
            name = f"seg-{self._next_segment:06d}.wseg"
            self._next_segment += 1
        merged = self._merged(sources, directory, name)
        with self._write_lock:
            self._install_merged(sources, merged)

    def _tombstone_keys(self, keys: Sequence[str]) -> int:
        """Mark every live copy of ``keys`` in the segments deleted; return how many."""
        if not keys or not self._segments:
            return 0
        wanted = np.asarray(list(keys), dtype=np.str_)
        removed = 0
        for segment in self._segments:
            stored = segment.reader.keys()
            if not stored.shape[0]:
                continue
            positions = np.minimum(np.searchsorted(stored, wanted), stored.shape[0] - 1)
            hits = positions[stored[positions] == wanted].astype(np.int64)
            hits = hits[~segment.deleted[hits]]
            if hits.size:
                segment.tombstone(hits)
                removed += int(hits.size)
        return removed

    def delete(self, key: str) -> bool:
        """Delete the document with ``key``; return whether there was one.

        Raises:
            UnknownKeyError: ``key`` is not a string, or no document can have it
                (it holds NUL).

        """
        self._check_open()
        if not isinstance(key, str):
            raise UnknownKeyError(f"document keys are strings, got {key!r}")
        return self.delete_many([key]) > 0

    def delete_many(self, keys: Iterable[str]) -> int:
        """Delete every listed key that exists; return how many were deleted."""
        self._check_writable()
        if isinstance(keys, str):
            raise InvalidParameterError(f"delete_many takes a sequence of keys, not the string {keys!r}")
        wanted = list(dict.fromkeys(keys))
        for key in wanted:
            if not isinstance(key, str):
                raise UnknownKeyError(f"document keys are strings, got {key!r}")
            _check_lookup_key(key)
        with self._write_lock:
            self._check_open()
            removed = sum(1 for key in wanted if self._pending.pop(key, None) is not None)
            removed += self._tombstone_keys(wanted)
            if removed:
                self._bump()
            return removed

    def _bump(self) -> None:
        self._generation += 1
        self._last_writer = threading.get_ident()
        self._snapshot = None

    # ------------------------------------------------------------------ snapshots and search

    def _seal(self) -> None:
        """Encode the buffered documents as a new in-memory segment (under the write lock).

        Searches run on meanwhile: they take no lock, and the encoder pauses
        between slices of work so they get the GIL (``YieldToSearches``).
        """
        if self._pending:
            pause = YieldToSearches(self._searches)
            pending = self._pending
            data = encode_segment(
                list(pending.values()),
                self._vector_dim,
                self._vector_dtype,
                pause=pause,
                text_fields=self._text_field_names(),
                positions_fields=self._field_analysis.positions,
            )
            reader = _in_memory(data)
            reader.warm()
            self._segments.append(_Segment(reader, data, None))
            self._pending = {}
            release_gradually(pending, pause)

    def snapshot(self) -> Snapshot:
        """The immutable view searches read; never waits on a commit or merge.

        Visibility is near-real-time, as in Lucene: the thread that writes
        sees its own writes at once (its next call seals the buffered
        documents into an in-memory segment). Other threads see the newest
        *published* snapshot, which the writer publishes when it next calls
        ``snapshot``/``search``, :meth:`refresh`, :meth:`commit` or
        :meth:`merge`; they take it without any lock, so a search never waits
        for a writer, and never does a writer's sealing work, with one
        exception: before anything was ever published, another thread's first
        search publishes the writes so far itself (taking the write lock and
        sealing the buffer), so that an index built in one thread and searched
        from others without a :meth:`refresh` answers from what was added
        rather than from an empty view. Call :meth:`refresh` after building to
        keep that work off the first search.
        """
        if self._closed:
            self._check_open()
        current = self._snapshot
        if current is not None:
            return current
        latest = self._latest
        if latest is not None and self._last_writer != threading.get_ident():
            return latest
        with self._write_lock:
            self._check_open()
            return self._publish()

    def _publish(self, *, warm: bool = False) -> Snapshot:
        """Seal buffered documents and make a snapshot of the state (under the write lock).

        ``warm`` (commits, merges, refreshes: the snapshot every thread then
        switches to): before it is published, the newest searches are replayed
        on it (:meth:`~weftsearch.engine.warming.RecentSearches.replay`), so its
        first searches do not build its caches.
        """
        if self._snapshot is None:
            self._seal()
            snapshot = Snapshot(
                generation=self._generation,
                analyzer=self._analyzer,
                vector_dim=self._vector_dim,
                segments=[(s.reader, s.deleted) for s in self._segments],
                query_terms=self._query_terms,
                schema=self._schema,
            )
            if warm:
                self._warming.replay(snapshot)
            self._snapshot = snapshot
            self._made.add(snapshot)
            self._latest = snapshot
        return self._snapshot

    def search(
        self,
        query: Query | str,
        k: int,
        fuser: Fuser,
        *scorers: Scorer,
        depth: int | None = None,
        snapshot: Snapshot | None = None,
        offset: int = 0,
        after: str | None = None,
        highlight: bool | HighlightOptions | None = None,
        facets: Sequence[str] | None = None,
        facet_k: int = 10,
    ) -> SearchResults:
        """Search the current snapshot; see :func:`~weftsearch.engine.search.search_snapshot`.

        ``facets``: field names whose value counts over every live document the
        query's filter matches are put in ``results.facets`` (``facet_k`` values
        per field; see :meth:`facets`).

        With one scorer, its stream passes through with its own scores (the
        fuser is not called; ``results.fuser`` is ``"passthrough"``).
        ``k`` (and ``depth``) must be from 1 to :data:`~weftsearch.engine.stream.MAX_K`
        (1,000,000), else :class:`~weftsearch.errors.InvalidParameterError`.
        ``snapshot``, one this index gave out (:meth:`snapshot`), is searched
        instead of the current one: a caller that reads documents after the
        search (``snapshot.document``) then reads them from the state it
        searched, and the search still counts as one in flight (commits and
        merges yield to it). A snapshot of another index raises
        :class:`~weftsearch.errors.InvalidParameterError`.
        ``highlight``: ``True`` or :class:`~weftsearch.highlight.HighlightOptions`
        gives every hit its :attr:`~weftsearch.engine.search.Hit.highlights`
        (snippets of its stored text with the query's terms marked), computed
        when the hit is first read; an index with ``store_text=False`` gives
        each field a reason instead of snippets.

        Pages (:mod:`weftsearch.engine.pages`): ``offset=n`` returns hits
        ``n .. n + k - 1`` of the search with ``k = n + k`` (``n + k`` at most
        ``MAX_K``); ``after=results.next_cursor`` returns the ``k`` hits after
        the previous page's last one, from the snapshot generation the first
        page searched, exactly as one deeper search would rank them. An
        altered cursor, one of another index or made for another query or
        ranking raises :class:`~weftsearch.errors.InvalidCursorError`; one
        naming a generation this index no longer keeps (the last
        :data:`~weftsearch.engine.pages.CURSOR_GENERATIONS` it issued cursors
        on, or one still held as a snapshot) raises
        :class:`~weftsearch.errors.CursorExpiredError`.

        Example::

            index.search("graph retrieval", 10, RRF(), BM25Scorer(), VectorScorer())
        """
        start: PageStart | None = None
        if after is not None:
            seal = self._cursors.seal(self._index_id)
            start = seal.check(after, _as_query(query), fuser, scorers, depth, offset)
            if snapshot is not None and snapshot.generation != start.generation:
                raise CursorExpiredError(
                    f"the cursor was issued on generation {start.generation}, "
                    f"not on the snapshot given (generation {snapshot.generation})"
                )
            if snapshot is None:
                snapshot = self._cursors.snapshot(start.generation, self.snapshot, self._made)
        options = options_of(highlight)
        if snapshot is not None and not self._made_here(snapshot):
            raise InvalidParameterError(
                "snapshot must be one taken from this index with index.snapshot(), got "
                + (
                    f"a snapshot of another index (generation {snapshot.generation})"
                    if isinstance(snapshot, Snapshot)
                    else type(snapshot).__name__
                )
            )
        searched = self.snapshot() if snapshot is None else snapshot
        with self._searches:  # commits and merges yield to running searches
            asked = query  # the cursor's digest is of the query as asked, before any embedding
            if self._embedder is not None:
                [query] = embed_queries(self._embedder, [query], searched, scorers)
            if facets is not None:  # checked before any scorer runs
                check_facet_fields(facets, searched.field_kinds())
                check_facet_k(facet_k)
            results = search_snapshot(searched, query, k, fuser, scorers, depth, offset=offset, after=start)
            if facets is not None:
                results.facets = query_facets(searched, _as_query(query), facets, facet_k)
        if options is not None:
            results._highlight_with(self.highlighter(searched, query, options))
        # The query as asked (a str becomes its Query only if the cursor is read). Only full
        # results offer a cursor (SearchResults._offer_cursor): the issuer is made for those alone.
        page = int(k)
        if results._count >= page:
            results._offer_cursor(
                self._cursors.issuer(self._index_id, searched, asked, fuser, scorers, depth), page
            )
        self._warming.remember(query, k, fuser, scorers, depth)  # only searches that completed are replayed
        return results

    def highlighter(self, snapshot: Snapshot, query: Query | str, options: HighlightOptions) -> Highlighter:
        """The function giving a hit's highlights (by key) from ``snapshot``'s stored texts.

        What ``search(..., highlight=options)`` gives its hits: every text
        field of the schema highlighted with its own analyzer, a field kept
        unstored (or an index with ``store_text=False``) saying so instead of
        a snippet. A sharded index asks each shard for its hits' highlights
        through this.

        Raises:
            InvalidParameterError: ``options.fields`` names a field the index
                has not (or one whose analyzer cannot highlight).

        """
        parsed = query if isinstance(query, Query) else Query(text=query)
        analyzers = {DEFAULT_FIELD: self._analyzer, **self._field_analysis.analyzers}
        return snapshot_highlighter(
            snapshot,
            parsed,
            options,
            store_text=self._store_text,
            analyzers=analyzers,
            unstored=self._field_analysis.unstored,
        )

    def explain(
        self,
        query: Query | str,
        key: str,
        fuser: Fuser,
        *scorers: Scorer,
        depth: int | None = None,
        snapshot: Snapshot | None = None,
    ) -> Explanation:
        """Why ``key`` ranks where it does for ``query`` (Elasticsearch's ``_explain``): :meth:`explain_many`.

        Example::

            print(index.explain("graph retrieval", "doc-7", RRF(), BM25Scorer(), VectorScorer()))
        """
        return self.explain_many(query, [key], fuser, *scorers, depth=depth, snapshot=snapshot)[0]

    def explain_many(
        self,
        query: Query | str,
        keys: Sequence[str],
        fuser: Fuser,
        *scorers: Scorer,
        depth: int | None = None,
        snapshot: Snapshot | None = None,
    ) -> list[Explanation]:
        """Each of ``keys``' :class:`~weftsearch.engine.explanation.Explanation` for this search, in order.

        The root is the document's fused score (or the one stream's score) and
        its rank, 0 when it is not among the top ``depth`` results; one child
        per stream (rank, raw score, contribution); under a stream, its
        scorer's breakdown when the scorer offers ``explain`` (the BM25
        scorer's: per query term, idf, tf per field, length norm; per clause
        of a parsed query). ``snapshot`` (one this index gave out) explains the
        hits of a search made on it. See :mod:`weftsearch.engine.explaining`.

        Raises:
            UnknownKeyError: a key the snapshot lacks.
            InvalidParameterError: more than 1,000 keys, or what :meth:`search` refuses.

        O(one search to ``depth`` (100 by default)) plus the breakdowns.

        """
        if snapshot is not None and not self._made_here(snapshot):
            raise InvalidParameterError("snapshot must be one taken from this index with index.snapshot()")
        searched = self.snapshot() if snapshot is None else snapshot
        with self._searches:
            [query] = embed_queries(self._embedder, [query], searched, scorers)
            return explain_keys(searched, query, keys, fuser, scorers, depth)

    def facets(
        self,
        query: Query | Filter | str | None,
        fields: Sequence[str],
        k: int = 10,
        *,
        top: int | None = None,
        fuser: Fuser | None = None,
        scorers: Sequence[Scorer] = (),
        snapshot: Snapshot | None = None,
    ) -> Facets:
        """How many documents hold each value of ``fields``, over what ``query`` matches.

        ``query``: a :class:`Query` (its filter), a filter (a ``Filter`` or its
        string form: a ``str`` here is a filter, not query text) or ``None``
        (every live document). ``top=N`` counts over the top ``N`` hits of the
        Query's ranking by ``scorers`` fused by ``fuser`` instead. Returns field
        -> ``[(value, count), ...]``: at most ``k`` (1 to 10,000) values, count
        descending then value ascending; counts are exact, over live documents
        only, each document once per distinct value it holds. Keyword, boolean,
        number (integral values as ``int``) and list fields facet.

        Example::

            index.facets("year >= 2000", ["tags", "year"], k=5)
            # {"tags": [("ml", 41), ("ir", 17), ...], "year": [(2021, 12), ...]}

        Raises:
            UnknownFieldError: a field no document has (text and vectors are no fields).
            InvalidParameterError: bad ``k``, ``top`` or field list.
            InvalidFilterError: the filter is malformed or does not fit the fields.

        """
        self._check_open()
        if snapshot is not None and not self._made_here(snapshot):
            raise InvalidParameterError("snapshot must be one taken from this index with index.snapshot()")
        with self._searches:
            searched = self.snapshot() if snapshot is None else snapshot
            return query_facets(searched, query, fields, k, top=top, fuser=fuser, scorers=scorers)

    def _made_here(self, snapshot: object) -> bool:
        """Whether ``snapshot`` is a :class:`Snapshot` this index made. O(1)."""
        return isinstance(snapshot, Snapshot) and snapshot in self._made

    def search_many(
        self,
        queries: Sequence[Query | str],
        k: int,
        fuser: Fuser,
        *scorers: Scorer,
        depth: int | None = None,
        threads: int | None = None,
        facets: Sequence[str] | None = None,
        facet_k: int = 10,
    ) -> list[SearchResults]:
        """Search one snapshot for many queries: one :class:`SearchResults` per query, in order.

        Every query reads the same snapshot (taken once, at the call), so the
        batch sees one state of the index even while writers commit. Each
        result equals what :meth:`search` returns for that query on that
        snapshot, whatever ``threads`` is; see
        :func:`~weftsearch.engine.search.search_snapshot_many` for the
        optional ``score_many`` batch method a scorer may offer, and the
        errors. The batch counts as one search in flight (commits and merges
        yield to it).

        Example::

            batch = index.search_many(["graph retrieval", "bm25"], 10, RRF(), BM25Scorer(), threads=2)

        Args:
            queries: :class:`Query` objects or strings (query text).
            k: hits wanted per query (1 to ``MAX_K``).
            fuser: merges each query's streams; not called for one scorer.
            *scorers: one or more scorers.
            depth: candidates asked of each scorer per query; ``None`` means ``max(k, 100)``,
                or ``k`` with one scorer.
            threads: ``None``/1 for this thread, or a pool of that many threads
                (at most :data:`~weftsearch.engine.search.MAX_THREADS`).
            facets: as :meth:`search`'s, for each query (its own filter), on the
                batch's snapshot. One count per query: O(documents its filter matches) each.
            facet_k: values per facet field (1 to 10,000).

        """
        with self._searches:  # commits and merges yield to running searches
            searched = self.snapshot()
            if facets is not None:  # checked before any scorer runs
                check_facet_fields(facets, searched.field_kinds())
                check_facet_k(facet_k)
            queries = embed_queries(self._embedder, queries, searched, scorers)
            many = search_snapshot_many(searched, queries, k, fuser, scorers, depth, threads)
            if facets is not None:
                for query, results in zip(queries, many, strict=True):
                    results.facets = query_facets(searched, _as_query(query), facets, facet_k)
            return many

    def embed_query(self, text: str) -> NDArray[np.float32]:
        """The vector of query ``text`` from the index's embedder (one float32 row of ``vector_dim``).

        Raises:
            InvalidParameterError: the index has no embedder.
            EmbeddingError: the embedder failed.

        """
        if self._embedder is None:
            raise InvalidParameterError(
                "this index has no embedder (create it with embedder=...); give the query's vector"
            )
        rows, cut = run_embedder_counting(self._embedder, [text], f"the query text {text!r:.80}")
        warn_truncated(self._embedder, [0] if cut[0] else [], [], "query text", stacklevel=3)
        row: NDArray[np.float32] = rows[0]
        return row

    # ------------------------------------------------------------------ commit

    def _manifest_extra(self) -> dict[str, Any]:
        # Recorded only when it differs from the default, so float32 manifests
        # (and those that store text, and an index without fields) keep the bytes they always had.
        extra: dict[str, Any] = {}
        if self._vector_dtype != "float32":
            extra["vector_dtype"] = self._vector_dtype
        if not self._store_text:
            extra["store_text"] = False
        kinds = self._known_field_kinds()
        if kinds:
            extra["fields"] = dict(sorted(kinds.items()))
        if self._embedder is not None:
            extra["embedder"] = embedder_record(self._embedder)
        if self._schema.named_fields or self._schema.default_field.positions:
            extra["schema"] = self._schema.to_dict()
        return extra

    def _text_field_names(self) -> tuple[str, ...]:
        """The named text fields, in schema order: each has ``tf.N.`` sections in every segment."""
        return tuple(field.name for field in self._schema.named_fields)

    @property
    def store_text(self) -> bool:
        """Whether document text is stored (``False``: hits and :meth:`get` give ``text`` as ``""``)."""
        return self._store_text

    def _known_field_kinds(self) -> dict[str, str]:
        """Field name -> type for the whole index (the live dict; callers copy before changing)."""
        kinds = self._field_kinds
        if kinds is None:  # an index written before the manifest recorded them
            kinds = {}
            for segment in self._segments:
                for name, kind in segment.reader.field_index().kinds().items():
                    kinds.setdefault(name, kind)
            self._field_kinds = kinds
        return kinds

    def field_kinds(self) -> dict[str, str]:
        """Every field the index has seen, with its type: ``keyword``, ``number`` or ``boolean``.

        A field's type is fixed by the first document that has it (a later
        document giving it another type is refused with
        :class:`~weftsearch.errors.FieldTypeError`), and recorded in the
        manifest at commit. Filters check against it.
        """
        self._check_open()
        return dict(self._known_field_kinds())

    def _manifest(self, entries: Sequence[SegmentEntry]) -> Manifest:
        return Manifest(
            generation=self._generation,
            analyzer=self._analyzer.name,
            vector_dim=self._vector_dim,
            segments=tuple(entries),
            next_segment=self._next_segment,
            extra=self._manifest_extra(),
            index_id=self._index_id,
        )

    def _check_fresh_name(self, name: str) -> None:
        """A commit never writes over a file the published manifest names (docs/FORMAT.md, "Identity").

        Raises:
            CorruptIndexError: ``name`` is listed already (a damaged ``next_segment``).

        """
        listed = self._committed
        if listed is not None and any(name in (e.name, e.deletes) for e in listed.segments):
            raise CorruptIndexError(
                f"{self._directory.path if self._directory else ''}: refusing to write {name}: "
                "the manifest lists it already (its next_segment or generation is damaged)"
            )

    def commit(self) -> int:
        """Make every write so far durable; return the generation committed.

        Writes only what changed since the last commit: one new segment file
        for the documents added since (if any) and a tombstone file for each
        segment whose deletes changed. Searches run on throughout; writes wait.

        Raises:
            IndexStorageError: the index has no path, is read-only, or a write
                failed (the previous commit is then intact and still what
                ``open`` reads; nothing in memory is lost).
            IndexClosedError: the index is closed.
            IndexLockedError: this writer no longer holds the directory's
                lock (its lock file was deleted or replaced); nothing is written.

        """
        self._check_open()
        if self._directory is None:
            raise IndexStorageError("this index lives in memory; use Index.create(path) to persist")
        self._check_writable()
        self._raise_merge_error()
        directory = self._directory
        with self._commit_lock:
            self._check_open()
            self._merge_runs(directory)
            self._encode_pending_in_child(directory)
            with self._write_lock:
                self._seal()
                committed = self._committed
                if (
                    committed is not None
                    and self._generation <= committed.generation
                    and (any(self._uncommitted()) or self._replacing)
                ):
                    self._generation = committed.generation + 1  # never reuse a published number
                plan = []
                next_segment = self._next_segment
                for segment in self._segments:
                    name = segment.name
                    if name is None:
                        name = f"seg-{next_segment:06d}.wseg"
                        next_segment += 1
                    plan.append((segment, name, segment.deleted))
                generation = self._generation
                dim = self._vector_dim
            entries = []
            installs = []
            for segment, name, mask in plan:
                deleted = int(mask.sum())
                if deleted == segment.reader.n_docs:
                    continue  # nothing live: the segment leaves the manifest
                identity = segment.reader.identity
                if segment.name is None:
                    assert segment.data is not None
                    self._check_fresh_name(name)
                    identity = directory.write_stamped(
                        name, segment.data, FileStamp(self._index_id, segment_number(name))
                    )
                deletes = segment.deletes_file
                deletes_identity = segment.deletes_identity
                if mask is not segment.committed_mask:
                    deletes, deletes_identity = None, (0, 0)
                    if deleted:
                        deletes = f"{name[:-5]}.del-{generation:06d}"
                        self._check_fresh_name(deletes)
                        deletes_identity = directory.write_stamped(
                            deletes,
                            encode_tombstones(mask),
                            FileStamp(self._index_id, segment_number(name), generation),
                        )
                entries.append(
                    SegmentEntry(name, segment.reader.n_docs, deletes, deleted, *identity, *deletes_identity)
                )
                installs.append((segment, name, mask, deletes, deletes_identity))
            manifest = Manifest(
                generation=generation,
                analyzer=self._analyzer.name,
                vector_dim=dim,
                segments=tuple(entries),
                next_segment=next_segment,
                extra=self._manifest_extra(),
                index_id=self._index_id,
            )
            directory.publish(manifest)
            # Same bytes, now from the file: searches see identical data. The
            # new readers are opened and warmed before the lock, so neither
            # writers nor the first searches of the next snapshot wait on that.
            from_file = {}
            for segment, name, _, _, _ in installs:
                if segment.name is None:
                    reader = _own_reader(directory.path / name)
                    reader.warm()
                    from_file[id(segment)] = reader
            with self._write_lock:
                for segment, name, mask, deletes, deletes_identity in installs:
                    if segment.name is None:
                        segment.reader = from_file[id(segment)]
                        segment.data = None
                        segment.name = name
                    segment.committed_mask = mask
                    segment.deletes_file = deletes
                    segment.deletes_identity = deletes_identity
                    segment.committed = True
                self._loaded = self._committed = manifest
                self._replacing = False
                live = {id(segment) for segment, *_ in installs}
                self._segments = [s for s in self._segments if id(s) in live or s.live]
                self._next_segment = next_segment
                self._publish(warm=True)
            directory.sweep(manifest)
        self._after_commit()
        return generation

    def _encode_pending_in_child(self, directory: IndexDirectory) -> None:
        """Move a large buffer into a segment encoded by a child process (see ``commit``).

        At ``commit_priority="normal"`` with no other thread running, the same
        file is written in this thread (:func:`~weftsearch.engine.children.encode_here`).

        Writes made while the child works stay correct: a buffered document
        replaced or deleted meanwhile is tombstoned in the new segment, and
        new documents stay buffered for the in-thread seal that follows. If the
        child fails, nothing changes and the commit encodes in this thread
        (which then reports the error, e.g. a full disk, as usual).
        """
        threshold = self._fork_encode_min
        with self._write_lock:
            if threshold is None or len(self._pending) < threshold:
                return
            buffer = self._pending
            batch = dict(buffer)
            generation = self._generation
            dim = self._vector_dim
            name = f"seg-{self._next_segment:06d}.wseg"
        self._check_fresh_name(name)
        encoding = (
            list(batch.values()),
            dim,
            self._vector_dtype,
            self._child_file(directory, name),
            self._text_field_names(),
            self._field_analysis.positions,
        )
        if self._commit_priority == "normal" and _no_other_thread():
            # No thread to keep the GIL for and no priority to lower: a child would only add
            # the fork and its copy-on-write of the buffer. The same file, written here.
            written = children.encode_here(*encoding, YieldToSearches(self._searches))
        else:
            written = children.encode_in_child(*encoding)
        # The list of the batch's documents must go before the batch is released
        # gradually below: while it holds them, popping the batch frees nothing,
        # and the list's own end (this function's return) would free 20,000
        # analysed documents in one GIL-held call (120-260 ms on SciFact).
        del encoding
        if not written:
            return
        try:
            segment = _Segment(_own_reader(directory.path / name), None, name)
        except (CorruptIndexError, IndexStorageError, FileNotFoundError):
            return
        segment.reader.warm()  # here, before any search can reach it
        with self._write_lock:
            if self._pending is buffer and self._generation == generation:
                # No write since the batch was taken (every write bumps the
                # generation; a seal swaps the dict): the buffer is the batch,
                # so no per-document check is needed.
                self._pending = {}
            else:
                late = [key for key, entry in batch.items() if self._pending.get(key) is not entry]
                for key, entry in batch.items():
                    if self._pending.get(key) is entry:
                        del self._pending[key]
                if late:
                    positions = np.searchsorted(segment.reader.keys(), np.asarray(late, dtype=np.str_))
                    segment.tombstone(positions.astype(np.int64))
            self._segments.append(segment)
            self._next_segment += 1
            self._snapshot = None
        del buffer
        release_gradually(batch, YieldToSearches(self._searches))

    def _after_commit(self) -> None:
        """Start a background merge if the policy wants one and none is running."""
        if not self._background_merge or (self._merger is not None and self._merger.is_alive()):
            return
        if not self._policy.select([s.live for s in self._segments]):
            return

        def run() -> None:
            try:
                self.merge()
            except BaseException as exc:  # surfaced by the next commit / wait_for_merges
                self._merge_error = exc

        self._merger = threading.Thread(target=run, name="weft-search-merge", daemon=True)
        self._merger.start()

    def wait_for_merges(self) -> None:
        """Block until a background merge in progress ends; re-raise its error, if any."""
        self._check_open()
        merger = self._merger
        if merger is not None:
            merger.join()
        self._raise_merge_error()

    def _raise_merge_error(self) -> None:
        error, self._merge_error = self._merge_error, None
        if error is not None:
            raise error

    # ------------------------------------------------------------------ merge

    def merge(self, *, force: bool = False) -> int:
        """Merge segments as the merge policy says (``force``: all into one); return how many.

        Rankings are unchanged by a merge, scores to the bit: each document
        keeps its postings, length and vector, and collection statistics are
        over live documents only.

        A persistent index merges **committed** segments only, as of the last
        commit (deletes committed by then are dropped from the merged copy),
        and publishes the last committed manifest with the merged segments
        replaced, as the next generation. The caller's uncommitted writes stay
        theirs: buffered documents, documents sealed into in-memory segments
        and deletes since the last commit are neither merged nor published,
        stay visible to this index's own searches, and are published by the
        next :meth:`commit` (an uncommitted delete of a merged document is
        carried over as a tombstone on the merged copy). An in-memory index
        merges all its segments.

        Raises:
            IndexClosedError: the index is closed.
            IndexStorageError: read-only, or a write failed (the last commit
                is then intact; nothing in memory changed).

        """
        self._check_writable()
        with self._commit_lock:
            self._check_open()
            if self._directory is None:
                return self._merge_in_memory(force)
            return self._merge_committed(self._directory, force)

    def _chosen(
        self, candidates: Sequence[_Segment], masks: Sequence[NDArray[np.bool_]], force: bool
    ) -> list[int]:
        """Positions among ``candidates`` (live as ``masks`` say) to merge now."""
        live = [int(s.reader.n_docs - int(mask.sum())) for s, mask in zip(candidates, masks, strict=True)]
        if force:
            chosen = [p for p, n in enumerate(live) if n]
            if len(chosen) <= 1 and not any(masks[p].any() for p in chosen):
                return []
            return chosen
        return self._policy.select(live)

    def _merged(
        self,
        sources: Sequence[tuple[_Segment, NDArray[np.bool_]]],
        directory: IndexDirectory | None,
        name: str,
    ) -> _Segment:
        """The merged segment of ``sources`` (each with the mask of documents to drop)."""
        pause = YieldToSearches(self._searches)
        if directory is None:
            columns = merge_columns([(s.reader, ~mask) for s, mask in sources], pause=pause)
            data = encode_columns(columns, pause=pause)
            merged = _Segment(_in_memory(data), data, None)
        else:
            self._check_fresh_name(name)
            target = self._child_file(directory, name)
            if not self._merge_forked(sources, target):
                # Written section by section: the merged file is never whole in memory;
                # the merged postings wait on disk.
                columns = merge_columns(
                    [(s.reader, ~mask) for s, mask in sources], pause=pause, spill=directory.path
                )
                directory.write_streamed(
                    name, lambda path: write_columns(columns, path, target.stamp, pause=pause)
                )
            merged = _Segment(_own_reader(directory.path / name), None, name)
        merged.reader.warm()  # here, before any search can reach it
        return merged

    def _child_file(self, directory: IndexDirectory, name: str) -> ChildFile:
        """Segment ``name`` as a forked child writes it: this index's stamp, commit priority and lock."""
        lock_fd = None if self._writer_lock is None else self._writer_lock.fileno()
        stamp = FileStamp(self._index_id, segment_number(name))
        return ChildFile(directory, name, stamp, self._commit_priority, lock_fd)

    def _merge_forked(self, sources: Sequence[tuple[_Segment, NDArray[np.bool_]]], target: ChildFile) -> bool:
        """Write the merged segment ``target.name`` from a forked child; ``False``: merge in this thread.

        Like a large commit's encoding (:meth:`_encode_pending_in_child`): a
        merge of at least ``FORK_ENCODE_MIN_DOCUMENTS`` live documents runs in
        a child process at the commit priority, so searching threads keep this
        interpreter's GIL and (at ``"idle"``) the CPU; measured on 2 cores, a
        forced merge in the writer's thread raised search p99 inside its window
        several times over (docs/BENCHMARKS.md, "Commit under load"). Same
        bytes as the merge in this thread. If the child fails (no process to
        spare, a damaged source, a full disk), the caller merges in its own
        thread, which reports the error as usual.
        """
        threshold = self._fork_encode_min
        live = sum(int(segment.reader.n_docs - int(mask.sum())) for segment, mask in sources)
        if threshold is None or live < threshold:
            return False
        named = [(segment.name, mask) for segment, mask in sources if segment.name is not None]
        if len(named) != len(sources):
            return False  # an uncommitted source (never chosen for a committed merge)
        return children.merge_in_child(named, target)

    def _install_merged(
        self, sources: Sequence[tuple[_Segment, NDArray[np.bool_]]], merged: _Segment
    ) -> None:
        """Replace ``sources`` by ``merged`` in the state (under the write lock)."""
        # Deletes the merge did not apply (made after the masks were taken, or
        # not committed yet) apply to the merged copy, uncommitted.
        late = [
            key
            for segment, mask in sources
            for key in segment.reader.keys()[segment.deleted & ~mask].tolist()
        ]
        if late:
            positions = np.searchsorted(merged.reader.keys(), np.asarray(late, dtype=np.str_))
            merged.tombstone(positions.astype(np.int64))
        chosen_ids = {id(segment) for segment, _ in sources}
        first = min(p for p, s in enumerate(self._segments) if id(s) in chosen_ids)
        remaining = [s for s in self._segments if id(s) not in chosen_ids]
        remaining.insert(min(first, len(remaining)), merged)
        self._segments = remaining
        self._snapshot = None

    def _merge_in_memory(self, force: bool) -> int:
        with self._write_lock:
            self._seal()
            candidates = list(self._segments)
            chosen = self._chosen(candidates, [s.deleted for s in candidates], force)
            if not chosen:
                return 0
            sources = [(candidates[p], candidates[p].deleted) for p in chosen]
        merged = self._merged(sources, None, "")
        with self._write_lock:
            self._install_merged(sources, merged)
            self._generation += 1
            self._publish(warm=True)
        return len(sources)

    def _merge_committed(self, directory: IndexDirectory, force: bool) -> int:
        with self._write_lock:
            base = self._committed
            if base is None or self._replacing:
                return 0  # nothing of this index is committed yet
            candidates = [s for s in self._segments if s.committed]
            chosen = self._chosen(candidates, [s.committed_mask for s in candidates], force)
            if not chosen:
                return 0
            sources = [(candidates[p], candidates[p].committed_mask) for p in chosen]
            name = f"seg-{self._next_segment:06d}.wseg"
            self._next_segment += 1
            next_segment = self._next_segment
            # The merged manifest gets a number of its own; if the state in
            # memory holds uncommitted writes it is another state, so it moves
            # one further (the caller's next commit records at least that).
            generation = self._generation + 1
            self._generation = generation + (1 if any(self._uncommitted()) else 0)
            self._snapshot = None
        merged = self._merged(sources, directory, name)
        merged.committed = True
        replaced = {segment.name for segment, _ in sources}
        entries: list[SegmentEntry] = []
        for entry in base.segments:
            if entry.name not in replaced:
                entries.append(entry)
            elif entry.name == sources[0][0].name:
                entries.append(_entry(merged, name, None, merged.committed_mask))
        manifest = replace(base, generation=generation, segments=tuple(entries), next_segment=next_segment)
        directory.publish(manifest)
        with self._write_lock:
            self._install_merged(sources, merged)
            self._loaded = self._committed = manifest
            if any(self._uncommitted()):
                self._generation = max(self._generation, generation + 1)
            self._publish(warm=True)
            # Files written but not committed yet (a forked encoder's segment
            # whose commit failed) are the caller's: the sweep keeps them.
            unpublished = tuple(
                SegmentEntry(s.name, s.reader.n_docs) for s in self._segments if s.name and not s.committed
            )
        directory.sweep(replace(manifest, segments=manifest.segments + unpublished))
        return len(sources)

    # ------------------------------------------------------------------ integrity

    def scrub(self) -> ScrubReport:
        """Read every byte of the committed index and check it; report what is damaged.

        The storage-level scrub (:func:`weftsearch.storage.integrity.scrub_directory`):
        the manifest, every file it names (and that each is this index's own),
        and every other file named like an index file, one message per problem.
        """
        self._check_open()
        if self._directory is None:
            return ScrubReport(0, 0, ())
        try:
            return scrub_directory(self._directory.path)
        except IndexStorageError as exc:
            return ScrubReport(0, 0, (str(exc),))
