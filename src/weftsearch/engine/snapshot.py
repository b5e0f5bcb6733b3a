"""Snapshots: one immutable, consistent view of the index that scorers read.

A snapshot is everything a scorer may look at for one query: postings,
document lengths and collection statistics, vectors, resolved links, times and
stored documents, all taken from the same state of the index. A search holds
on to one snapshot from start to finish, so it never mixes statistics from two
states, and writers never block it.

Internal ids are dense integers ``0 .. n_docs - 1`` that mean something only
inside one snapshot. Results leave the engine as keys. (The in-memory snapshot
happens to number documents in key order; nothing outside this module may rely
on that: use :meth:`Snapshot.key_rank` to order by key.)

Scorers that derive something expensive from a snapshot (normalised vectors, a
symmetric adjacency matrix, per-document BM25 length norms) cache it with
:meth:`Snapshot.memo`, which lives and dies with the snapshot.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from weftsearch.analysis import Analyzer
from weftsearch.engine.documents import Document
from weftsearch.errors import UnknownKeyError

__all__ = ["Snapshot", "Postings", "VectorBlock"]

T = TypeVar("T")
IdArray = NDArray[np.int64]


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


@dataclass(frozen=True, slots=True)
class VectorBlock:
    """The stored vectors of a snapshot, as one contiguous float32 matrix.

    Attributes:
        ids: int64 internal ids of the documents that have a vector, ascending.
        matrix: float32 array ``(len(ids), dim)``; row i belongs to ``ids[i]``.

    """

    ids: IdArray
    matrix: NDArray[np.float32]


def _readonly(array: NDArray[T]) -> NDArray[T]:  # type: ignore[type-var]
    array.setflags(write=False)
    return array


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
        documents: Sequence[Document],
        doc_lengths: NDArray[np.int64],
        vocabulary: Mapping[str, int],
        term_offsets: NDArray[np.int64],
        posting_ids: IdArray,
        posting_tfs: NDArray[np.int32],
    ) -> None:
        n = len(documents)
        self._generation = generation
        self._analyzer = analyzer
        self._vector_dim = vector_dim
        self._documents = tuple(documents)
        self._keys = _readonly(np.array([d.key for d in documents], dtype=np.str_))
        if n > 1 and not bool(np.all(self._keys[:-1] < self._keys[1:])):
            raise AssertionError("snapshot documents must be sorted by key, without repeats")
        self._doc_lengths = _readonly(np.asarray(doc_lengths, dtype=np.int64))
        self._vocabulary = vocabulary
        # Term t's postings are positions offsets[t] .. offsets[t + 1] of the
        # posting arrays. One extra entry repeating the total turns "term not in
        # this snapshot" into the empty run [total, total), so a lookup needs no
        # branch per term (see _term_runs); _term_offsets is a view without it.
        offsets = np.asarray(term_offsets, dtype=np.int64)
        self._run_offsets = _readonly(np.append(offsets, offsets[-1:] if offsets.size else [0]))
        self._term_offsets = self._run_offsets[: offsets.shape[0]]
        self._posting_ids = _readonly(np.asarray(posting_ids, dtype=np.int64))
        self._posting_tfs = _readonly(np.asarray(posting_tfs, dtype=np.int32))
        total_length = int(self._doc_lengths.sum())
        self._avgdl = total_length / n if n else 0.0
        self._memo: dict[Hashable, object] = {}
        self._memo_lock = threading.RLock()

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
    def n_docs(self) -> int:
        """Number of live documents (N in BM25)."""
        return int(self._keys.shape[0])

    def __len__(self) -> int:
        return self.n_docs

    # ------------------------------------------------------------------ keys

    def key(self, doc_id: int) -> str:
        """The key of internal id ``doc_id``."""
        self._check_id(doc_id)
        return str(self._keys[doc_id])

    def keys_of(self, ids: IdArray) -> list[str]:
        """Keys of many internal ids, in the same order. O(len(ids))."""
        return [str(key) for key in self._keys[np.asarray(ids, dtype=np.int64)]]

    def keys(self) -> list[str]:
        """All live keys, in key order."""
        return [str(key) for key in self._keys]

    def id_of(self, key: str) -> int:
        """The internal id of ``key``. Raises :class:`UnknownKeyError` if absent."""
        ids = self.ids_of([key])
        if ids[0] < 0:
            raise UnknownKeyError(f"no document with key {key!r} in this snapshot")
        return int(ids[0])

    def ids_of(self, keys: Sequence[str]) -> IdArray:
        """Internal ids of ``keys`` (-1 where a key is absent). O(m log n), vectorised."""
        if self.n_docs == 0 or len(keys) == 0:
            return np.full(len(keys), -1, dtype=np.int64)
        wanted = np.asarray(list(keys), dtype=np.str_)
        positions = np.searchsorted(self._keys, wanted)
        clipped = np.minimum(positions, self.n_docs - 1)
        found = self._keys[clipped] == wanted
        return np.where(found, clipped, -1).astype(np.int64)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and bool(self.ids_of([key])[0] >= 0)

    def key_rank(self, ids: IdArray) -> NDArray[np.int64]:
        """Integers that order ``ids`` as their keys order (the tie-break key)."""
        # Ids are assigned in key order here, so the id itself is the rank.
        return np.asarray(ids, dtype=np.int64)

    def document(self, doc_id: int) -> Document:
        """The stored document of internal id ``doc_id``."""
        self._check_id(doc_id)
        return self._documents[doc_id]

    def _check_id(self, doc_id: int) -> None:
        if not 0 <= doc_id < self.n_docs:
            raise UnknownKeyError(f"internal id {doc_id} out of range for {self.n_docs} documents")

    # ------------------------------------------------------------------ text statistics

    @property
    def doc_lengths(self) -> NDArray[np.int64]:
        """Number of indexed terms in each document, by internal id (read-only)."""
        return self._doc_lengths

    @property
    def avgdl(self) -> float:
        """Mean document length in terms over live documents (0.0 when empty)."""
        return self._avgdl

    def doc_freq(self, term: str) -> int:
        """Number of live documents holding the analysed ``term``."""
        return int(self.postings([term]).doc_freq[0])

    def postings(self, terms: Sequence[str]) -> Postings:
        """Postings of analysed ``terms``, concatenated in the given order.

        A term may be repeated; it is then returned twice. The arrays are
        read-only. O(total postings), vectorised: no Python loop per posting.
        """
        starts, ends = self._term_runs(terms)
        counts = ends - starts
        _readonly(counts)
        # Each term's postings are one contiguous run of the posting arrays, so
        # slicing the runs and concatenating them copies each posting once; a
        # single term needs no concatenation (its ids are a read-only view).
        runs = list(zip(starts.tolist(), ends.tolist(), strict=True))
        id_runs = [self._posting_ids[start:end] for start, end in runs]
        tf_runs = [self._posting_tfs[start:end] for start, end in runs]
        if len(id_runs) == 1:
            ids = id_runs[0]
            term_freqs = tf_runs[0].astype(np.float64)
        elif id_runs:
            ids = _readonly(np.concatenate(id_runs))
            term_freqs = np.concatenate(tf_runs).astype(np.float64)
        else:
            ids = _readonly(np.empty(0, dtype=np.int64))
            term_freqs = np.empty(0, dtype=np.float64)
        return Postings(
            doc_freq=counts,
            ids=ids,
            term_freqs=_readonly(term_freqs),
            term_index=_readonly(np.repeat(np.arange(len(terms), dtype=np.int64), counts)),
        )

    def _term_runs(self, terms: Sequence[str]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Where each analysed term's postings lie in the posting arrays.

        Returns ``(starts, ends)``, int64, one entry per term: term i's postings
        are positions ``starts[i]:ends[i]`` of the posting arrays, ids
        ascending, and ``ends[i] - starts[i]`` is its document frequency. A term
        absent from this snapshot gets an empty run. O(len(terms)).
        """
        # The vocabulary is shared with the index and only ever grows: a term
        # it does not know, or one added after this snapshot was built (an id
        # at or past this snapshot's vocabulary size), maps to the extra entry
        # of _run_offsets, whose run is empty.
        limit = self._run_offsets.shape[0] - 2
        vocabulary = self._vocabulary
        term_ids = np.array([vocabulary.get(term, limit) for term in terms], dtype=np.int64)
        np.minimum(term_ids, limit, out=term_ids)
        return self._run_offsets[term_ids], self._run_offsets[term_ids + 1]

    # ------------------------------------------------------------------ vectors

    @property
    def vector_dim(self) -> int | None:
        """Width of the index's vectors, or ``None`` if no width was ever set."""
        return self._vector_dim

    def vectors(self) -> VectorBlock:
        """All stored vectors as one float32 block (built once per snapshot)."""
        return self.memo(("engine", "vectors"), self._build_vectors)

    def _build_vectors(self) -> VectorBlock:
        present = [i for i, doc in enumerate(self._documents) if doc.vector is not None]
        ids = np.asarray(present, dtype=np.int64)
        if present:
            matrix = np.stack([self._documents[i].vector for i in present]).astype(np.float32)  # type: ignore[misc]
        else:
            matrix = np.zeros((0, self._vector_dim or 0), dtype=np.float32)
        return VectorBlock(_readonly(ids), _readonly(np.ascontiguousarray(matrix)))

    # ------------------------------------------------------------------ links and times

    def links(self) -> sp.csr_array:
        """Resolved links as a sparse ``n x n`` 0/1 matrix: row = source, column = target.

        Links to keys absent from this snapshot, and self-links, are dropped;
        a link repeated in one document counts once. Built once per snapshot,
        O(links log n), vectorised.
        """
        return self.memo(("engine", "links"), self._build_links)

    def _build_links(self) -> sp.csr_array:
        n = self.n_docs
        counts = np.fromiter((len(d.links) for d in self._documents), dtype=np.int64, count=n)
        if counts.sum() == 0:
            return sp.csr_array((n, n), dtype=np.float64)
        sources = np.repeat(np.arange(n, dtype=np.int64), counts)
        targets = self.ids_of([target for d in self._documents for target in d.links])
        keep = (targets >= 0) & (targets != sources)
        data = np.ones(int(keep.sum()), dtype=np.float64)
        matrix = sp.csr_array((data, (sources[keep], targets[keep])), shape=(n, n))
        matrix.sum_duplicates()
        matrix.data[:] = 1.0
        return matrix

    def times(self) -> NDArray[np.float64]:
        """Document times as POSIX seconds by internal id; NaN where a document has none."""
        return self.memo(("engine", "times"), self._build_times)

    def _build_times(self) -> NDArray[np.float64]:
        values = [d.timestamp for d in self._documents]
        return _readonly(np.array([np.nan if v is None else v for v in values], dtype=np.float64))

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
