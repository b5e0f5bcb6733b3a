"""The index: where documents are added, replaced and deleted, and snapshots come from.

Writes (``add``, ``add_many``, ``delete``) are validated whole before anything
changes, so a bad bulk call leaves the index as it was. Each write bumps the
generation; ``snapshot()`` returns an immutable :class:`Snapshot` of the
current generation, built on first request and shared until the next write.
Searches run against a snapshot, so a writer never changes what a running
search sees.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

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
    DuplicateKeyError,
    IndexStorageError,
    InvalidDocumentError,
    InvalidParameterError,
    UnknownKeyError,
    VectorDimensionError,
)
from weftsearch.storage import IndexMeta, read_index, write_index

__all__ = ["Index"]

#: Bulk calls of at least this many documents show a progress bar (on a terminal).
PROGRESS_THRESHOLD = 2000


@dataclass(frozen=True, slots=True)
class _Entry:
    """A document with its analysed text: unique term ids (ascending) and their counts."""

    document: Document
    term_ids: NDArray[np.int64]
    term_freqs: NDArray[np.int32]
    length: int


class Index:
    """A hybrid-search index over :class:`Document` values.

    Args:
        analyzer: an :class:`Analyzer` or the name of a registered one
            (``"english"`` by default). It is fixed for the life of the index.
        vector_dim: the width every document vector must have; ``None`` takes
            the width of the first vector added.

    An index made with the constructor lives in memory; :meth:`create` and
    :meth:`open` tie it to a directory, and :meth:`commit` writes it there.

    """

    def __init__(self, analyzer: Analyzer | str = "english", *, vector_dim: int | None = None) -> None:
        self._analyzer = get_analyzer(analyzer) if isinstance(analyzer, str) else analyzer
        if not isinstance(self._analyzer, Analyzer):
            raise InvalidParameterError(f"{analyzer!r} is not an Analyzer (needs .name and .analyze)")
        if vector_dim is not None and (
            isinstance(vector_dim, bool) or not isinstance(vector_dim, int) or vector_dim <= 0
        ):
            raise InvalidParameterError(f"vector_dim must be a positive integer, got {vector_dim!r}")
        self._vector_dim = vector_dim
        self._entries: dict[str, _Entry] = {}
        # Append-only: a term keeps its id forever, so snapshots can share the
        # mapping while later writes add to it (see Snapshot.postings).
        self._vocabulary: dict[str, int] = {}
        self._generation = 0
        self._snapshot: Snapshot | None = None
        self._lock = threading.RLock()
        self._path: Path | None = None

    # ------------------------------------------------------------------ persistence

    @classmethod
    def create(
        cls,
        path: str | PathLike[str],
        analyzer: Analyzer | str = "english",
        *,
        vector_dim: int | None = None,
        overwrite: bool = False,
    ) -> Index:
        """Create an empty index stored at ``path`` and commit it.

        Raises:
            IndexStorageError: ``path`` exists and is not an empty directory
                (unless ``overwrite``), or cannot be written.

        """
        index = cls(analyzer, vector_dim=vector_dim)
        index._path = Path(path)
        write_index(index._path, index._meta(), [], create=True, overwrite=overwrite)
        return index

    @classmethod
    def open(cls, path: str | PathLike[str]) -> Index:
        """Open the index stored at ``path``, with the analyzer it was created with.

        Raises:
            IndexNotFoundError: no index at ``path``.
            FormatVersionError: written by an unknown format version.
            CorruptIndexError: stored data fails its checks.
            UnknownAnalyzerError: the recorded analyzer is not registered.

        """
        meta, documents = read_index(Path(path))
        index = cls(meta.analyzer, vector_dim=meta.vector_dim)
        index._path = Path(path)
        index.add_many(documents, progress=None)
        return index

    @property
    def path(self) -> Path | None:
        """The directory this index commits to, or ``None`` for an in-memory index."""
        return self._path

    def commit(self) -> int:
        """Write the current state to :attr:`path`; return the generation written.

        Raises:
            IndexStorageError: the index has no path, or the write failed (the
                previously committed state is then still what ``open`` reads).

        """
        if self._path is None:
            raise IndexStorageError("this index lives in memory; use Index.create(path) to persist")
        with self._lock:
            snapshot = self.snapshot()
            documents = [snapshot.document(i) for i in range(snapshot.n_docs)]
            write_index(self._path, self._meta(), documents)
            return snapshot.generation

    def _meta(self) -> IndexMeta:
        return IndexMeta(analyzer=self._analyzer.name, vector_dim=self._vector_dim)

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
        """Counter bumped by every write."""
        return self._generation

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self._entries

    def get(self, key: str) -> Document:
        """The stored document with ``key``. Raises :class:`UnknownKeyError`."""
        if not isinstance(key, str):
            raise UnknownKeyError(f"document keys are strings, got {key!r}")
        try:
            return self._entries[key].document
        except KeyError:
            raise UnknownKeyError(f"no document with key {key!r}") from None

    def keys(self) -> list[str]:
        """All keys, sorted."""
        return sorted(self._entries)

    # ------------------------------------------------------------------ writing

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

        Complexity: O(total text length) for analysis, outside the index lock.

        """
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
        analysed = [
            (document, self._analyzer.analyze(document.text))
            for document in tqdm(batch, desc="analysing", unit="doc", disable=disable, leave=False)
        ]
        with self._lock:
            if self._vector_dim is not None and dim != self._vector_dim:
                raise VectorDimensionError(f"vector width changed to {dim} during add_many")
            self._vector_dim = dim
            for document, terms in analysed:
                self._entries[document.key] = self._entry(document, terms)
            if batch:
                self._bump()
        return len(batch)

    def delete(self, key: str) -> bool:
        """Delete the document with ``key``; return whether there was one."""
        if not isinstance(key, str):
            raise UnknownKeyError(f"document keys are strings, got {key!r}")
        with self._lock:
            if key not in self._entries:
                return False
            del self._entries[key]
            self._bump()
            return True

    def delete_many(self, keys: Iterable[str]) -> int:
        """Delete every listed key that exists; return how many were deleted."""
        if isinstance(keys, str):
            raise InvalidParameterError(f"delete_many takes a sequence of keys, not the string {keys!r}")
        with self._lock:
            removed = 0
            for key in keys:
                if self._entries.pop(key, None) is not None:
                    removed += 1
            if removed:
                self._bump()
            return removed

    def _entry(self, document: Document, terms: Sequence[str]) -> _Entry:
        vocabulary = self._vocabulary
        term_ids = np.fromiter(
            (vocabulary.setdefault(term, len(vocabulary)) for term in terms),
            dtype=np.int64,
            count=len(terms),
        )
        unique, counts = np.unique(term_ids, return_counts=True)
        return _Entry(document, unique, counts.astype(np.int32), len(terms))

    def _bump(self) -> None:
        self._generation += 1
        self._snapshot = None

    # ------------------------------------------------------------------ snapshots and search

    def snapshot(self) -> Snapshot:
        """The immutable view of the current generation (built once per generation).

        Complexity: O(total postings log) on the first call after a write; O(1) after.
        """
        with self._lock:
            if self._snapshot is None:
                self._snapshot = self._build_snapshot()
            return self._snapshot

    def _build_snapshot(self) -> Snapshot:
        keys = sorted(self._entries)
        entries = [self._entries[key] for key in keys]
        n = len(entries)
        vocabulary_size = len(self._vocabulary)
        counts = np.fromiter((e.term_ids.shape[0] for e in entries), dtype=np.int64, count=n)
        if n and counts.sum():
            term_ids = np.concatenate([e.term_ids for e in entries])
            term_freqs = np.concatenate([e.term_freqs for e in entries])
        else:
            term_ids = np.empty(0, dtype=np.int64)
            term_freqs = np.empty(0, dtype=np.int32)
        doc_ids = np.repeat(np.arange(n, dtype=np.int64), counts)
        # Stable sort by term keeps document ids ascending within each term.
        order = np.argsort(term_ids, kind="stable")
        offsets = np.zeros(vocabulary_size + 1, dtype=np.int64)
        np.cumsum(np.bincount(term_ids, minlength=vocabulary_size), out=offsets[1:])
        return Snapshot(
            generation=self._generation,
            analyzer=self._analyzer,
            vector_dim=self._vector_dim,
            documents=[e.document for e in entries],
            doc_lengths=np.fromiter((e.length for e in entries), dtype=np.int64, count=n),
            vocabulary=self._vocabulary,
            term_offsets=offsets,
            posting_ids=doc_ids[order],
            posting_tfs=term_freqs[order],
        )

    def search(
        self,
        query: Query | str,
        k: int,
        fuser: Fuser,
        *scorers: Scorer,
        depth: int | None = None,
    ) -> SearchResults:
        """Search the current snapshot; see :func:`~weftsearch.engine.search.search_snapshot`.

        Example::

            index.search("graph retrieval", 10, RRF(), BM25Scorer(), VectorScorer())
        """
        return search_snapshot(self.snapshot(), query, k, fuser, scorers, depth)
