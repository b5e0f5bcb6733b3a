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

import contextlib
import ctypes
import gc
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
from numpy.typing import NDArray
from tqdm.auto import tqdm

from weftsearch.analysis import Analyzer, get_analyzer
from weftsearch.engine.documents import Document
from weftsearch.engine.protocols import Fuser, Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.search import SearchResults, search_snapshot
from weftsearch.engine.snapshot import Snapshot
from weftsearch.errors import (
    CorruptIndexError,
    DuplicateKeyError,
    IndexStorageError,
    InvalidDocumentError,
    InvalidParameterError,
    UnknownKeyError,
    VectorDimensionError,
)
from weftsearch.storage.directory import (
    IndexDirectory,
    Manifest,
    SegmentEntry,
    WriterLock,
    encode_tombstones,
    read_tombstones,
)
from weftsearch.storage.segment import (
    VECTOR_DTYPES,
    SegmentDocument,
    SegmentReader,
    encode_columns,
    encode_segment,
    merge_columns,
    stored_record,
)

__all__ = ["Index", "MergePolicy", "ScrubReport"]

#: Bulk calls of at least this many documents show a progress bar (on a terminal).
PROGRESS_THRESHOLD = 2000
#: A commit whose buffer holds at least this many documents encodes it in a
#: forked child process, so searching threads keep this interpreter's GIL.
FORK_ENCODE_MIN_DOCUMENTS = 2000


def _die_with_parent(parent: int) -> None:
    """In a forked child: ask the kernel to kill us when the parent dies (Linux)."""
    try:
        libc = ctypes.CDLL(None)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


#: CPU priorities a commit's child encoder may run at (see ``Index``).
COMMIT_PRIORITIES = ("idle", "normal")


def _lower_priority(priority: str) -> None:
    """In a forked child: take only the CPU time searches leave (best effort).

    ``SCHED_IDLE`` rather than a nice value, because a sleeping search thread
    that wakes preempts an idle-class task at once, where a niced one waits for
    the scheduler's next tick: measured on 2 cores, search p99 during a commit
    was 1.12-1.43x outside with SCHED_IDLE, 1.47-1.48x at nice 19, 1.65-1.77x
    at nice 10 (docs/BENCHMARKS.md). An unprivileged process cannot leave the
    idle class again, which is harmless here: the child exits after one segment.
    """
    if priority == "normal":
        return
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (OSError, AttributeError):  # not Linux: the lowest nice value instead
        with contextlib.suppress(OSError):
            os.nice(19)


def _encode_in_child(
    documents: Sequence[SegmentDocument],
    dim: int | None,
    dtype: str,
    directory: IndexDirectory,
    name: str,
    priority: str = "idle",
) -> bool:
    """Encode and write a segment in a forked child; return whether it succeeded.

    The child shares the parent's memory copy-on-write, so nothing is pickled;
    it writes the file under its final name (unpublished, so invisible and
    swept if we die) and exits without running any of the parent's handlers.
    The parent waits in ``waitpid``, which releases the GIL.
    """
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError:
        return False  # no process to spare: the caller encodes in its own thread
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            _die_with_parent(parent)
            _lower_priority(priority)
            # A collection here would walk (and so copy-on-write) the parent's
            # whole heap; the child makes no cycles that matter and exits soon.
            gc.disable()
            directory.write_file(name, encode_segment(documents, dim, dtype))
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


#: Seconds of work a committing or merging thread does between two rests
#: while searches run (the longest a search waits for it at a time).
_WORK_SLICE_S = 0.00025
#: Seconds it then rests, so that searching threads take the GIL: the writer
#: gets at most a fifth of the interpreter while searches run.
_REST_S = 0.001
#: Documents freed between two pauses when a sealed buffer is dropped.
_FREE_SLICE = 32


class _SearchesInFlight:
    """How many ``Index.search`` calls are running now, in any thread. Thread-safe."""

    __slots__ = ("_count", "_lock")

    def __init__(self) -> None:
        self._count = 0
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        with self._lock:
            self._count += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._count -= 1

    def __bool__(self) -> bool:
        return self._count > 0


class _YieldToSearches:
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

    def __init__(self, searches: _SearchesInFlight) -> None:
        self._searches = searches
        self._since = time.perf_counter()

    def __call__(self) -> None:
        now = time.perf_counter()
        if now - self._since >= _WORK_SLICE_S:
            if self._searches:
                time.sleep(_REST_S)
            self._since = time.perf_counter()


def _release_gradually(entries: dict[str, SegmentDocument], pause: _YieldToSearches) -> None:
    """Drop the last references to ``entries`` a slice at a time, pausing between slices.

    Freeing a dict of many analysed documents in one go is a single C call
    that holds the GIL throughout (tens of milliseconds for 20,000 documents).
    """
    while entries:
        for _ in range(min(_FREE_SLICE, len(entries))):
            entries.popitem()
        pause()


_IN_MEMORY = Path("<memory>")


@dataclass(frozen=True, slots=True)
class MergePolicy:
    """Size-tiered merging: segments of similar size are merged ``factor`` at a time.

    A segment of n live documents sits in tier ``floor(log(n) / log(factor))``
    (tier 0 below ``factor`` documents). When some tier holds ``factor`` or
    more segments, the ``factor`` smallest of the lowest such tier are merged
    into one, which lands a tier up. Each document is therefore rewritten
    O(log_factor N) times over the life of an index, and a search touches at
    most ``(factor - 1)`` segments per tier.

    Attributes:
        factor: segments per tier before they merge (>= 2; 10 by default).

    """

    factor: int = 10

    def __post_init__(self) -> None:
        if isinstance(self.factor, bool) or not isinstance(self.factor, int) or self.factor < 2:
            raise InvalidParameterError(f"merge factor must be an integer >= 2, got {self.factor!r}")

    def tier(self, documents: int) -> int:
        """The tier of a segment with ``documents`` live documents."""
        # Integer division, not logarithms: log(1000) / log(10) is 2.9999999999999996.
        tier = 0
        while documents >= self.factor:
            documents //= self.factor
            tier += 1
        return tier

    def select(self, sizes: Sequence[int]) -> list[int]:
        """Positions of the segments to merge next (empty when none need merging)."""
        tiers: dict[int, list[int]] = {}
        for position, size in enumerate(sizes):
            tiers.setdefault(self.tier(size), []).append(position)
        for tier in sorted(tiers):
            members = tiers[tier]
            if len(members) >= self.factor:
                smallest = sorted(members, key=lambda p: (sizes[p], p))[: self.factor]
                return sorted(smallest)
        return []


@dataclass(frozen=True, slots=True)
class ScrubReport:
    """What ``Index.scrub`` checked and what it found damaged.

    Attributes:
        files: files read in full.
        bytes: bytes read.
        problems: one message per damaged file, section, posting list or record.

    """

    files: int
    bytes: int
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """True when nothing is damaged."""
        return not self.problems


class _Segment:
    """A segment the index holds: reader, file name once on disk, tombstones."""

    __slots__ = ("committed_mask", "data", "deleted", "deletes_file", "name", "reader")

    def __init__(self, reader: SegmentReader, data: bytes | None, name: str | None) -> None:
        self.reader = reader
        self.data = data  # the encoded bytes while the segment lives only in memory
        self.name = name
        self.deleted = np.zeros(reader.n_docs, dtype=bool)
        self.deleted.setflags(write=False)
        self.committed_mask = self.deleted  # the mask the manifest's tombstone file holds
        self.deletes_file: str | None = None

    @property
    def live(self) -> int:
        return int(self.reader.n_docs - int(self.deleted.sum()))

    def tombstone(self, locals_: NDArray[np.int64]) -> None:
        mask = self.deleted.copy()
        mask[locals_] = True
        mask.setflags(write=False)
        self.deleted = mask


def _in_memory(data: bytes) -> SegmentReader:
    return SegmentReader(_IN_MEMORY, data)


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
        commit_priority: the CPU priority of the child process that encodes a
            large commit (2,000 or more buffered documents, on systems with
            ``fork``): ``"idle"`` (default) runs it only on CPU time nothing
            else wants, so searches keep their latency during the commit; on a
            machine whose cores are all busy with other work the commit then
            waits for them. ``"normal"`` shares the CPU equally.

    An index made with the constructor lives in memory; :meth:`create` and
    :meth:`open` tie it to a directory, and :meth:`commit` writes it there.

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
    ) -> None:
        self._analyzer = get_analyzer(analyzer) if isinstance(analyzer, str) else analyzer
        if not isinstance(self._analyzer, Analyzer):
            raise InvalidParameterError(f"{analyzer!r} is not an Analyzer (needs .name and .analyze)")
        if vector_dim is not None and (
            isinstance(vector_dim, bool) or not isinstance(vector_dim, int) or vector_dim <= 0
        ):
            raise InvalidParameterError(f"vector_dim must be a positive integer, got {vector_dim!r}")
        self._vector_dim = vector_dim
        if vector_dtype not in VECTOR_DTYPES:
            raise InvalidParameterError(
                f"vector_dtype must be one of {', '.join(VECTOR_DTYPES)}, got {vector_dtype!r}"
            )
        self._vector_dtype = vector_dtype
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
        self._last_writer = 0  # thread id of the newest write
        self._write_lock = threading.RLock()
        self._searches = _SearchesInFlight()
        self._fork_encode_min: int | None = FORK_ENCODE_MIN_DOCUMENTS if hasattr(os, "fork") else None
        self._commit_lock = threading.RLock()
        self._directory: IndexDirectory | None = None
        self._writer_lock: WriterLock | None = None
        self._readonly = False
        self._loaded: Manifest | None = None  # the manifest a read-only index shows

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
    ) -> Index:
        """Create an empty index stored at ``path``, take its writer lock, and commit it.

        Raises:
            IndexStorageError: ``path`` is a file, or a non-empty directory
                (unless ``overwrite``), or cannot be written.
            IndexLockedError: another writer holds the directory.

        """
        index = cls(
            analyzer,
            vector_dim=vector_dim,
            vector_dtype=vector_dtype,
            merge_policy=merge_policy,
            background_merge=background_merge,
            commit_priority=commit_priority,
        )
        directory = IndexDirectory(Path(path))
        directory.prepare_new(overwrite)
        index._writer_lock = WriterLock(directory.path)
        try:
            index._directory = directory
            directory.publish(index._manifest([]))
            directory.sweep(index._manifest([]))
        except BaseException:
            index.close()  # a failed create must not keep the directory locked
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
    ) -> Index:
        """Open the index stored at ``path`` with the analyzer it was created with.

        A writer (the default) takes the directory's lock; ``readonly=True``
        takes none, refuses writes, and sees new commits after :meth:`refresh`.

        Raises:
            IndexNotFoundError: no index at ``path``.
            IndexLockedError: another writer holds the directory.
            FormatVersionError: written by an unknown format version.
            CorruptIndexError: the manifest or a segment header fails its checks.
            UnknownAnalyzerError: the recorded analyzer is not registered.

        """
        directory = IndexDirectory(Path(path))
        directory.check_exists()
        writer_lock = None if readonly else WriterLock(directory.path)
        try:
            manifest = directory.read_manifest()
            index = cls(
                manifest.analyzer,
                vector_dim=manifest.vector_dim,
                vector_dtype=str(manifest.extra.get("vector_dtype", "float32")),
                merge_policy=merge_policy,
                background_merge=background_merge and not readonly,
                commit_priority=commit_priority,
            )
            index._directory = directory
            index._writer_lock = writer_lock
            index._readonly = readonly
            index._load_current(manifest)
            if not readonly:
                directory.sweep(index._manifest_of_state())
        except BaseException:
            if writer_lock is not None:
                writer_lock.release()
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
                if newer == manifest:  # a merge keeps the generation: compare all of it
                    break
                manifest = newer
        try:
            self._load(manifest)
        except FileNotFoundError as exc:
            raise CorruptIndexError(
                f"{self._directory.path}: the manifest names a missing file ({exc})"
            ) from None

    def _manifest_of_state(self) -> Manifest:
        entries = [
            SegmentEntry(s.name, s.reader.n_docs, s.deletes_file, int(s.committed_mask.sum()))
            for s in self._segments
            if s.name is not None
        ]
        return self._manifest(entries)

    def _load(self, manifest: Manifest) -> None:
        """Adopt ``manifest``'s segments, reusing readers of segments already open."""
        assert self._directory is not None
        known = {segment.name: segment for segment in self._segments if segment.name}
        segments = []
        for entry in manifest.segments:
            path = self._directory.path / entry.name
            segment = known.get(entry.name) or _Segment(SegmentReader(path), None, entry.name)
            if segment.reader.n_docs != entry.documents:
                raise CorruptIndexError(
                    f"{path}: holds {segment.reader.n_docs} documents, manifest says {entry.documents}"
                )
            if entry.deletes is None:
                mask = np.zeros(entry.documents, dtype=bool)
                mask.setflags(write=False)
            else:
                mask = read_tombstones(self._directory.path / entry.deletes, entry.documents, entry.deleted)
            segment.deleted = segment.committed_mask = mask
            segment.deletes_file = entry.deletes
            segments.append(segment)
        self._segments = segments
        self._loaded = manifest
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
        if not self._readonly:
            with self._write_lock:
                changed = self._latest is None or self._latest.generation != self._generation
                self._publish()
                return changed
        assert self._directory is not None
        manifest = self._directory.read_manifest()
        if manifest == self._loaded:
            return False
        with self._write_lock:
            self._load_current(manifest)
            self._publish()
        return True

    def close(self) -> None:
        """Wait for a background merge, then release the writer lock. Idempotent.

        Uncommitted changes are discarded.
        """
        merger = self._merger
        if merger is not None and merger is not threading.current_thread():
            merger.join()
        if self._writer_lock is not None:
            self._writer_lock.release()
            self._writer_lock = None

    def __enter__(self) -> Index:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    @property
    def path(self) -> Path | None:
        """The directory this index commits to, or ``None`` for an in-memory index."""
        return None if self._directory is None else self._directory.path

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
    def vector_dim(self) -> int | None:
        """The width of stored vectors, or ``None`` until the first vector arrives."""
        return self._vector_dim

    @property
    def generation(self) -> int:
        """Counter bumped by every write; a commit records it in the manifest."""
        return self._generation

    @property
    def segment_count(self) -> int:
        """Number of segments (committed or sealed in memory) holding live documents."""
        return sum(1 for segment in self._segments if segment.live)

    def __len__(self) -> int:
        with self._write_lock:
            return sum(segment.live for segment in self._segments) + len(self._pending)

    def __contains__(self, key: object) -> bool:
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
        if self._readonly:
            raise IndexStorageError(f"{self.path} was opened read-only")

    def add(self, document: Document) -> None:
        """Add ``document``, replacing any document with the same key (upsert)."""
        self.add_many([document], progress=False)

    def add_many(self, documents: Iterable[Document], *, progress: bool | None = None) -> int:
        """Add many documents at once (upsert); all or nothing.

        The whole batch is validated before any of it is applied: a repeated
        key within the batch raises :class:`DuplicateKeyError`, a vector of the
        wrong width :class:`VectorDimensionError`, and the index is unchanged.

        Args:
            documents: the documents; any iterable, consumed once.
            progress: show a progress bar; ``None`` shows one for large batches
                on a terminal.

        Returns:
            The number of documents added or replaced.

        Complexity: O(total text length) for analysis, outside any lock.

        """
        self._check_writable()
        batch = list(documents)
        seen: set[str] = set()
        dim = self._vector_dim
        for position, document in enumerate(batch):
            if not isinstance(document, Document):
                raise InvalidDocumentError(f"item {position} is {type(document).__name__}, not a Document")
            if document.key in seen:
                raise DuplicateKeyError(f"key {document.key!r} appears twice in one add_many call")
            seen.add(document.key)
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
        analysed = []
        for document in tqdm(batch, desc="analysing", unit="doc", disable=disable, leave=False):
            terms = self._analyzer.analyze(document.text)
            # The stored record is made now, outside any lock, not in the commit.
            analysed.append(SegmentDocument(document, Counter(terms), len(terms), stored_record(document)))
        if not analysed:
            return 0
        with self._write_lock:
            if self._vector_dim is not None and dim != self._vector_dim:
                raise VectorDimensionError(f"vector width changed to {dim} during add_many")
            self._vector_dim = dim
            self._tombstone_keys([d.document.key for d in analysed])
            for entry in analysed:
                self._pending[entry.document.key] = entry
            self._bump()
        return len(batch)

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
        between slices of work so they get the GIL (``_YieldToSearches``).
        """
        if self._pending:
            pause = _YieldToSearches(self._searches)
            pending = self._pending
            data = encode_segment(list(pending.values()), self._vector_dim, self._vector_dtype, pause=pause)
            reader = _in_memory(data)
            reader.warm()
            self._segments.append(_Segment(reader, data, None))
            self._pending = {}
            _release_gradually(pending, pause)

    def snapshot(self) -> Snapshot:
        """The immutable view searches read; never waits on a commit or merge.

        Visibility is near-real-time, as in Lucene: the thread that writes
        sees its own writes at once (its next call seals the buffered
        documents into an in-memory segment). Other threads see the newest
        *published* snapshot, which the writer publishes when it next calls
        ``snapshot``/``search``, :meth:`refresh`, :meth:`commit` or
        :meth:`merge`; they take it without any lock, so a search never waits
        for a writer, and never does a writer's sealing work.
        """
        current = self._snapshot
        if current is not None:
            return current
        latest = self._latest
        if latest is not None and self._last_writer != threading.get_ident():
            return latest
        with self._write_lock:
            return self._publish()

    def _publish(self) -> Snapshot:
        """Seal buffered documents and make a snapshot of the state (under the write lock)."""
        if self._snapshot is None:
            self._seal()
            self._snapshot = Snapshot(
                generation=self._generation,
                analyzer=self._analyzer,
                vector_dim=self._vector_dim,
                segments=[(s.reader, s.deleted) for s in self._segments],
            )
            self._latest = self._snapshot
        return self._snapshot

    def search(
        self,
        query: Query | str,
        k: int,
        fuser: Fuser,
        *scorers: Scorer,
        depth: int | None = None,
    ) -> SearchResults:
        """Search the current snapshot; see :func:`~weftsearch.engine.search.search_snapshot`.

        ``k`` (and ``depth``) must be from 1 to :data:`~weftsearch.engine.stream.MAX_K`
        (1,000,000), else :class:`~weftsearch.errors.InvalidParameterError`.

        Example::

            index.search("graph retrieval", 10, RRF(), BM25Scorer(), VectorScorer())
        """
        with self._searches:  # commits and merges yield to running searches
            return search_snapshot(self.snapshot(), query, k, fuser, scorers, depth)

    # ------------------------------------------------------------------ commit

    def _manifest_extra(self) -> dict[str, Any]:
        # Recorded only when it differs from the default, so float32 manifests
        # keep the bytes they always had.
        return {} if self._vector_dtype == "float32" else {"vector_dtype": self._vector_dtype}

    def _manifest(self, entries: Sequence[SegmentEntry]) -> Manifest:
        return Manifest(
            generation=self._generation,
            analyzer=self._analyzer.name,
            vector_dim=self._vector_dim,
            segments=tuple(entries),
            next_segment=self._next_segment,
            extra=self._manifest_extra(),
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

        """
        if self._directory is None:
            raise IndexStorageError("this index lives in memory; use Index.create(path) to persist")
        self._check_writable()
        self._raise_merge_error()
        directory = self._directory
        with self._commit_lock:
            self._encode_pending_in_child(directory)
            with self._write_lock:
                self._seal()
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
                if segment.name is None:
                    assert segment.data is not None
                    directory.write_file(name, segment.data)
                deletes = segment.deletes_file
                if mask is not segment.committed_mask:
                    deletes = None
                    if deleted:
                        deletes = f"{name[:-5]}.del-{generation:06d}"
                        directory.write_file(deletes, encode_tombstones(mask))
                entries.append(SegmentEntry(name, segment.reader.n_docs, deletes, deleted))
                installs.append((segment, name, mask, deletes))
            manifest = Manifest(
                generation=generation,
                analyzer=self._analyzer.name,
                vector_dim=dim,
                segments=tuple(entries),
                next_segment=next_segment,
                extra=self._manifest_extra(),
            )
            directory.publish(manifest)
            # Same bytes, now from the file: searches see identical data. The
            # new readers are opened and warmed before the lock, so neither
            # writers nor the first searches of the next snapshot wait on that.
            from_file = {}
            for segment, name, _, _ in installs:
                if segment.name is None:
                    reader = SegmentReader(directory.path / name)
                    reader.warm()
                    from_file[id(segment)] = reader
            with self._write_lock:
                for segment, name, mask, deletes in installs:
                    if segment.name is None:
                        segment.reader = from_file[id(segment)]
                        segment.data = None
                        segment.name = name
                    segment.committed_mask = mask
                    segment.deletes_file = deletes
                live = {id(segment) for segment, *_ in installs}
                self._segments = [s for s in self._segments if id(s) in live or s.live]
                self._next_segment = next_segment
                self._publish()
            directory.sweep(manifest)
        self._after_commit()
        return generation

    def _encode_pending_in_child(self, directory: IndexDirectory) -> None:
        """Move a large buffer into a segment encoded by a child process (see ``commit``).

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
        if not _encode_in_child(
            list(batch.values()), dim, self._vector_dtype, directory, name, self._commit_priority
        ):
            return
        try:
            segment = _Segment(SegmentReader(directory.path / name), None, name)
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
        _release_gradually(batch, _YieldToSearches(self._searches))

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
        over live documents only. A persistent index commits the result.
        """
        self._check_writable()
        with self._commit_lock:
            with self._write_lock:
                self._seal()
                if force:
                    chosen = [p for p, s in enumerate(self._segments) if s.live]
                    if len(chosen) <= 1 and not any(self._segments[p].deleted.any() for p in chosen):
                        return 0
                else:
                    chosen = self._policy.select([s.live for s in self._segments])
                if not chosen:
                    return 0
                sources = [(self._segments[p], self._segments[p].deleted) for p in chosen]
            pause = _YieldToSearches(self._searches)
            columns = merge_columns([(s.reader, ~mask) for s, mask in sources], pause=pause)
            data = encode_columns(columns, pause=pause)
            merged = _Segment(_in_memory(data), data, None)
            merged.reader.warm()  # here, before any search can reach it
            with self._write_lock:
                # Deletes that arrived while the merge ran apply to the merged copy.
                late = [
                    key
                    for segment, mask in sources
                    for key in segment.reader.keys()[segment.deleted & ~mask].tolist()
                ]
                if late:
                    positions = np.searchsorted(merged.reader.keys(), np.asarray(late, dtype=np.str_))
                    merged.tombstone(positions.astype(np.int64))
                chosen_ids = {id(segment) for segment, _ in sources}
                first = min(chosen)
                remaining = [s for s in self._segments if id(s) not in chosen_ids]
                remaining.insert(min(first, len(remaining)), merged)
                self._segments = remaining
                self._snapshot = None
                self._publish()
            if self._directory is not None:
                self.commit()
            return len(sources)

    # ------------------------------------------------------------------ integrity

    def scrub(self) -> ScrubReport:
        """Read every byte of the committed index and check it; report what is damaged."""
        if self._directory is None:
            return ScrubReport(0, 0, ())
        problems: list[str] = []
        files = 0
        size = 0
        try:
            manifest = self._directory.read_manifest()
        except (CorruptIndexError, IndexStorageError) as exc:
            return ScrubReport(1, 0, (str(exc),))
        for entry in manifest.segments:
            path = self._directory.path / entry.name
            files += 1
            try:
                size += path.stat().st_size
                reader = SegmentReader(path)
                problems.extend(reader.verify())
                if reader.n_docs != entry.documents:
                    problems.append(f"{path}: document count disagrees with the manifest")
            except (CorruptIndexError, IndexStorageError, OSError) as exc:
                problems.append(str(exc))
            if entry.deletes:
                files += 1
                try:
                    size += (self._directory.path / entry.deletes).stat().st_size
                    read_tombstones(self._directory.path / entry.deletes, entry.documents, entry.deleted)
                except (CorruptIndexError, IndexStorageError, OSError) as exc:
                    problems.append(str(exc))
        return ScrubReport(files, size, tuple(problems))
