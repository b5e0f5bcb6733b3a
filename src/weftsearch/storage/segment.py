"""Segments: one immutable section file holding a batch of documents and their postings.

A segment holds, for documents numbered ``0 .. n-1`` in key order: the keys,
document lengths, times, stored documents (text and fields), vectors, links
(by target key), and an inverted index (sorted terms, per-term postings of
local ids and term frequencies, a CRC32C per term's postings). Its layout is
in docs/FORMAT.md. Storage knows documents, terms and counts; it never scores.

:func:`encode_segment` is deterministic: the same documents give the same
bytes, whatever order they arrive in. :class:`SegmentReader` decodes lazily
over a memory map and validates every offset before following it.
"""

from __future__ import annotations

import itertools
import json
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from weftsearch.engine.documents import Document
from weftsearch.errors import CorruptIndexError, WeftError
from weftsearch.storage.codec import SectionFile, checksum, encode_sections

__all__ = ["SegmentDocument", "encode_segment", "SegmentReader"]


@dataclass(frozen=True, slots=True)
class SegmentDocument:
    """A document with its analysed text, as the segment writer takes it.

    Attributes:
        document: the document.
        terms: term -> within-document frequency (>= 1).
        length: number of analysed terms (the sum of the frequencies).

    """

    document: Document
    terms: Mapping[str, int]
    length: int


def _blob(strings: Sequence[str]) -> tuple[NDArray[np.uint8], NDArray[np.uint64]]:
    """UTF-8 bytes of ``strings`` back to back, and the n+1 offsets that cut them apart."""
    encoded = [s.encode("utf-8") for s in strings]
    offsets = np.zeros(len(encoded) + 1, dtype=np.uint64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets


def _stored_record(document: Document) -> bytes:
    record = {"text": document.text, "fields": dict(document.fields), "time": document.timestamp}
    return json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")


def encode_segment(documents: Sequence[SegmentDocument], vector_dim: int | None) -> bytes:
    """Encode ``documents`` (unique keys) as one segment file's bytes.

    Complexity: O(P log P) for P postings, plus the size of the stored text.
    """
    ordered = sorted(documents, key=lambda d: d.document.key)
    n = len(ordered)
    vocabulary = sorted({term for d in ordered for term in d.terms})
    term_id = {term: position for position, term in enumerate(vocabulary)}
    counts = np.fromiter((len(d.terms) for d in ordered), dtype=np.int64, count=n)
    doc_of_posting = np.repeat(np.arange(n, dtype=np.uint32), counts)
    term_of_posting = np.fromiter(
        (term_id[t] for d in ordered for t in d.terms), dtype=np.int64, count=int(counts.sum())
    )
    tf_of_posting = np.fromiter(
        (tf for d in ordered for tf in d.terms.values()), dtype=np.uint32, count=int(counts.sum())
    )
    # Sorting by (term, doc) makes the bytes independent of dict iteration order.
    order = np.lexsort((doc_of_posting, term_of_posting))
    posting_ids = doc_of_posting[order]
    posting_tfs = tf_of_posting[order]
    term_offsets = np.zeros(len(vocabulary) + 1, dtype=np.uint64)
    np.cumsum(np.bincount(term_of_posting, minlength=len(vocabulary)), out=term_offsets[1:])
    term_crcs = np.array(
        [
            checksum(posting_ids[a:b].tobytes() + posting_tfs[a:b].tobytes())
            for a, b in zip(term_offsets[:-1].tolist(), term_offsets[1:].tolist(), strict=True)
        ],
        dtype=np.uint32,
    )
    keys_blob, keys_offsets = _blob([d.document.key for d in ordered])
    terms_blob, terms_offsets = _blob(vocabulary)
    records = [_stored_record(d.document) for d in ordered]
    stored_blob = np.frombuffer(b"".join(records), dtype=np.uint8)
    stored_offsets = np.zeros(n + 1, dtype=np.uint64)
    np.cumsum([len(r) for r in records], out=stored_offsets[1:])
    stored_crcs = np.array([checksum(r) for r in records], dtype=np.uint32)
    link_targets = [target for d in ordered for target in d.document.links]
    links_blob, links_target_offsets = _blob(link_targets)
    links_offsets = np.zeros(n + 1, dtype=np.uint64)
    np.cumsum([len(d.document.links) for d in ordered], out=links_offsets[1:])
    with_vector = [d.document.vector for d in ordered if d.document.vector is not None]
    vector_rows = np.full(n, -1, dtype=np.int32)
    vector_rows[[i for i, d in enumerate(ordered) if d.document.vector is not None]] = np.arange(
        len(with_vector), dtype=np.int32
    )
    dim = vector_dim or 0
    matrix = np.stack(with_vector).astype(np.float32) if with_vector else np.zeros((0, dim), np.float32)
    times = np.array(
        [math.nan if d.document.timestamp is None else d.document.timestamp for d in ordered],
        dtype=np.float64,
    )
    meta = {
        "documents": n,
        "terms": len(vocabulary),
        "postings": int(posting_ids.shape[0]),
        "links": len(link_targets),
        "vectors": len(with_vector),
        "vector_dim": vector_dim,
    }
    meta_bytes = json.dumps(meta, sort_keys=True, separators=(",", ":")).encode("ascii")
    return encode_sections(
        {
            "meta": np.frombuffer(meta_bytes, dtype=np.uint8),
            "keys.blob": keys_blob,
            "keys.offsets": keys_offsets,
            "doc.lengths": np.fromiter((d.length for d in ordered), dtype=np.uint32, count=n),
            "doc.times": times,
            "terms.blob": terms_blob,
            "terms.offsets": terms_offsets,
            "post.offsets": term_offsets,
            "post.crc": term_crcs,
            "post.ids": posting_ids,
            "post.tfs": posting_tfs,
            "stored.blob": stored_blob,
            "stored.offsets": stored_offsets,
            "stored.crc": stored_crcs,
            "links.doc": links_offsets,
            "links.blob": links_blob,
            "links.offsets": links_target_offsets,
            "vec.rows": vector_rows,
            "vec.matrix": matrix.reshape(-1),
        }
    )


def _check_offsets(offsets: NDArray[np.uint64], count: int, limit: int, what: str, path: Path) -> None:
    """Offsets must be ``count + 1`` long, start at 0, never decrease and end at ``limit``."""
    if (
        offsets.shape[0] != count + 1
        or int(offsets[0]) != 0
        or int(offsets[-1]) != limit
        or bool(np.any(offsets[1:] < offsets[:-1]))
    ):
        raise CorruptIndexError(f"{path}: {what} offsets are inconsistent")


class SegmentReader:
    """Lazy, validating reader of one segment file.

    Opening costs O(number of sections); every array is a read-only view over
    the memory map, verified by checksum when first touched. Local ids are
    ``0 .. n_docs - 1`` in key order. Pass ``data`` to read a segment that
    exists only in memory (not yet committed) through the same code.
    """

    def __init__(self, path: Path, data: bytes | None = None) -> None:
        self.path = path
        self._file = SectionFile(path, data)
        self._lock = threading.Lock()
        self._cache: dict[str, Any] = {}
        meta = self._meta()
        self.n_docs: int = meta["documents"]
        self.n_terms: int = meta["terms"]
        self.vector_dim: int | None = meta["vector_dim"]

    def _corrupt(self, what: str) -> CorruptIndexError:
        return CorruptIndexError(f"{self.path}: {what}")

    def _meta(self) -> dict[str, Any]:
        try:
            meta = json.loads(bytes(self._file.array("meta")))
            fields = ("documents", "terms", "postings", "links", "vectors")
            if not isinstance(meta, dict) or not all(
                isinstance(meta.get(f), int) and meta[f] >= 0 for f in fields
            ):
                raise ValueError("missing counts")
            dim = meta.get("vector_dim")
            if dim is not None and (not isinstance(dim, int) or dim <= 0):
                raise ValueError("bad vector_dim")
            return meta
        except WeftError:
            raise
        except ValueError as exc:
            raise self._corrupt(f"segment metadata does not decode ({exc})") from None

    def _memo(self, name: str, build: Any) -> Any:
        if name not in self._cache:
            with self._lock:
                if name not in self._cache:
                    self._cache[name] = build()
        return self._cache[name]

    def _array(self, name: str, dtype: str, count: int) -> NDArray[Any]:
        array = self._file.array(name)
        if array.dtype.str != dtype or array.shape[0] != count:
            raise self._corrupt(
                f"section {name!r} has {array.shape[0]} x {array.dtype}, expected {count} x {dtype}"
            )
        return array

    def _strings(self, prefix: str, count: int) -> tuple[NDArray[np.uint8], NDArray[np.uint64]]:
        blob = self._file.array(f"{prefix}.blob")
        offsets = self._array(f"{prefix}.offsets", "<u8", count + 1)
        _check_offsets(offsets, count, int(blob.shape[0]), prefix, self.path)
        return blob, offsets  # type: ignore[return-value]

    # ------------------------------------------------------------------ per-document arrays

    def keys(self) -> NDArray[np.str_]:
        """All keys, in local-id (key) order, decoded once."""

        def build() -> NDArray[np.str_]:
            blob, offsets = self._strings("keys", self.n_docs)
            raw = bytes(blob)
            bounds = offsets.tolist()
            try:
                keys = [raw[a:b].decode("utf-8") for a, b in itertools.pairwise(bounds)]
            except UnicodeDecodeError:
                raise self._corrupt("a key is not valid UTF-8") from None
            array = np.array(keys, dtype=np.str_)
            if self.n_docs > 1 and not bool(np.all(array[:-1] < array[1:])):
                raise self._corrupt("keys are not strictly increasing")
            return array

        result: NDArray[np.str_] = self._memo("keys", build)
        return result

    def doc_lengths(self) -> NDArray[np.uint32]:
        """Analysed length of each document."""
        return self._array("doc.lengths", "<u4", self.n_docs)

    def times(self) -> NDArray[np.float64]:
        """POSIX seconds of each document; NaN where none."""
        return self._array("doc.times", "<f8", self.n_docs)

    def document(self, local: int) -> Document | None:
        """The stored document ``local``, or ``None`` if its record is damaged."""
        blob = self._file.array("stored.blob")
        offsets = self._array("stored.offsets", "<u8", self.n_docs + 1)
        crcs = self._array("stored.crc", "<u4", self.n_docs)
        start, end = int(offsets[local]), int(offsets[local + 1])
        if not 0 <= start <= end <= blob.shape[0]:
            return None
        raw = bytes(blob[start:end])
        if checksum(raw) != int(crcs[local]):
            return None
        try:
            record = json.loads(raw)
            vector = self.vector(local)
            return Document(
                key=str(self.keys()[local]),
                text=record["text"],
                vector=vector,
                links=self.links(local),
                time=record["time"],
                fields=record["fields"],
            )
        except (ValueError, KeyError, TypeError):
            return None

    def links(self, local: int) -> tuple[str, ...]:
        """Target keys of document ``local``'s links."""
        offsets = self._array("links.doc", "<u8", self.n_docs + 1)
        first, last = int(offsets[local]), int(offsets[local + 1])
        total = int(offsets[-1])
        if not 0 <= first <= last <= total:
            raise self._corrupt("link offsets out of range")
        blob, targets = self._strings("links", total) if total else (None, None)
        if blob is None or targets is None:
            return ()
        raw = bytes(blob[int(targets[first]) : int(targets[last])])
        cuts = (targets[first : last + 1] - targets[first]).tolist()
        try:
            return tuple(raw[a:b].decode("utf-8") for a, b in itertools.pairwise(cuts))
        except UnicodeDecodeError:
            raise self._corrupt("a link target is not valid UTF-8") from None

    # ------------------------------------------------------------------ vectors

    def vector_rows(self) -> NDArray[np.int32]:
        """Row of each document in :meth:`vector_matrix`, -1 when it has no vector."""
        rows = self._array("vec.rows", "<i4", self.n_docs)
        count = self.vector_matrix().shape[0]
        if rows.size and (int(rows.max()) >= count or int(rows.min()) < -1):
            raise self._corrupt("vector row index out of range")
        return rows

    def vector_matrix(self) -> NDArray[np.float32]:
        """All stored vectors as one ``(m, dim)`` float32 matrix."""
        dim = self.vector_dim or 0
        flat = self._file.array("vec.matrix")
        if flat.dtype.str != "<f4" or (dim == 0 and flat.shape[0]) or (dim and flat.shape[0] % dim):
            raise self._corrupt("vector matrix has an impossible shape")
        return flat.reshape(-1, dim) if dim else flat.reshape(0, 0)  # type: ignore[return-value]

    def vector(self, local: int) -> NDArray[np.float32] | None:
        """The vector of document ``local``, or ``None``."""
        row = int(self.vector_rows()[local])
        return None if row < 0 else np.array(self.vector_matrix()[row])

    # ------------------------------------------------------------------ postings

    def _term_tables(
        self,
    ) -> tuple[NDArray[np.uint8], NDArray[np.uint64], NDArray[np.uint64], NDArray[np.uint32]]:
        def build() -> tuple[Any, ...]:
            blob, offsets = self._strings("terms", self.n_terms)
            total = int(self._file.array("post.ids").shape[0])
            postings = self._array("post.offsets", "<u8", self.n_terms + 1)
            _check_offsets(postings, self.n_terms, total, "postings", self.path)
            crcs = self._array("post.crc", "<u4", self.n_terms)
            return blob, offsets, postings, crcs

        result: tuple[NDArray[Any], NDArray[Any], NDArray[Any], NDArray[Any]] = self._memo("terms", build)
        return result

    def term_position(self, term: str) -> int:
        """Index of ``term`` in the sorted term table, or -1. O(log V) comparisons."""
        blob, offsets, _, _ = self._term_tables()
        wanted = term.encode("utf-8")
        low, high = 0, self.n_terms
        while low < high:
            middle = (low + high) // 2
            candidate = bytes(blob[int(offsets[middle]) : int(offsets[middle + 1])])
            if candidate < wanted:
                low = middle + 1
            else:
                high = middle
        if low < self.n_terms and bytes(blob[int(offsets[low]) : int(offsets[low + 1])]) == wanted:
            return low
        return -1

    def postings(self, term: str) -> tuple[NDArray[np.uint32], NDArray[np.uint32]]:
        """Local ids (ascending) and term frequencies of ``term``; empty if absent.

        The term's postings are checked against their own CRC32C before use,
        so reading one term never needs the whole postings section verified.
        """
        position = self.term_position(term)
        if position < 0:
            return np.empty(0, np.uint32), np.empty(0, np.uint32)
        _, _, offsets, crcs = self._term_tables()
        start, end = int(offsets[position]), int(offsets[position + 1])
        ids_raw = self._file.raw("post.ids")
        tfs_raw = self._file.raw("post.tfs")
        if self._file.size("post.ids") != self._file.size("post.tfs") or end * 4 > len(ids_raw):
            raise self._corrupt("postings sections disagree in size")
        ids = np.frombuffer(ids_raw[start * 4 : end * 4], dtype="<u4")
        tfs = np.frombuffer(tfs_raw[start * 4 : end * 4], dtype="<u4")
        if checksum(ids.tobytes() + tfs.tobytes()) != int(crcs[position]):
            raise self._corrupt(f"postings of term {term!r} fail their checksum")
        if ids.size and (
            int(ids[-1]) >= self.n_docs or bool(np.any(ids[1:] <= ids[:-1])) or int(tfs.min()) < 1
        ):
            raise self._corrupt(f"postings of term {term!r} are out of range")
        return ids, tfs

    def verify(self) -> list[str]:
        """Every checksum and structural rule of the segment; one message per problem."""
        problems = self._file.verify()
        if problems:
            return problems
        try:
            self.keys()
            self.doc_lengths()
            self.times()
            self.vector_rows()
            _, _, postings, crcs = self._term_tables()
            ids = self._file.array("post.ids")
            tfs = self._file.array("post.tfs")
            for position in range(self.n_terms):
                start, end = int(postings[position]), int(postings[position + 1])
                data = ids[start:end].tobytes() + tfs[start:end].tobytes()
                if checksum(data) != int(crcs[position]):
                    problems.append(f"{self.path}: postings of term {position} fail their checksum")
            for local in range(self.n_docs):
                if self.document(local) is None:
                    problems.append(f"{self.path}: stored document {local} is damaged")
        except WeftError as exc:
            problems.append(str(exc))
        return problems
