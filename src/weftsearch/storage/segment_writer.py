"""Writing a segment: documents (or a merge's columns) to one section file's bytes.

:func:`encode_segment` is deterministic: the same documents give the same
bytes, whatever order they arrive in. The layout is in docs/FORMAT.md; the
reader is :class:`weftsearch.storage.segment.SegmentReader`.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import tempfile
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import crc32c
import numpy as np
from numpy.typing import NDArray

from weftsearch.documents import Document
from weftsearch.errors import CorruptIndexError
from weftsearch.storage.codec import FileStamp, encode_sections
from weftsearch.storage.docstore import stored_sections
from weftsearch.storage.fields import FieldIndex, first_type_only, is_field_value
from weftsearch.storage.ivf import IVF_MIN_VECTORS, TRAIN_ITERATIONS, TRAIN_SEED, train_partitions
from weftsearch.storage.pausing import (
    SLICE,
    Pause,
    join_in_slices,
    no_pause,
    slices,
    sorted_in_slices,
)
from weftsearch.storage.postings import (
    pack_positions,
    pack_postings,
    split_offsets,
)
from weftsearch.storage.sectionwriter import ByteChunks, Section, materialize, write_section_file
from weftsearch.storage.segment import VECTOR_DTYPES

__all__ = [
    "SegmentDocument",
    "SegmentColumns",
    "FieldColumns",
    "field_prefix",
    "encode_segment",
    "encode_postings",
    "encode_columns",
    "segment_columns",
    "write_columns",
    "segment_sections",
    "postings_sections",
    "positions_sections",
    "PostingsBuilder",
    "InvertedPostings",
    "Inversion",
    "use_inversion",
    "use_json_string",
    "stored_record",
    "without_text",
]


@dataclass(frozen=True, slots=True)
class SegmentDocument:
    """A document with its analysed text, as the segment writer takes it.

    Attributes:
        document: the document.
        terms: term -> within-document frequency (>= 1).
        length: number of analysed terms (the sum of the frequencies).
        record: the document's stored record (:func:`stored_record`), when the
            caller made it already (the index does, when the document is
            added, so a commit does not pay for it); ``None``: the encoder makes it.

    """

    document: Document
    terms: Mapping[str, int]
    length: int
    record: bytes | None = None
    #: Named text field -> (term -> frequency, length), as :attr:`terms` and :attr:`length`
    #: are for the default field; a field the document lacks is absent (no terms, length 0).
    field_terms: Mapping[str, tuple[Mapping[str, int], int]] = dataclasses.field(default_factory=dict)
    #: Text field (``"text"`` included) -> term -> its positions (ascending, as many as its
    #: frequency), for the fields whose positions the index keeps.
    positions: Mapping[str, Mapping[str, Sequence[int]]] = dataclasses.field(default_factory=dict)


def _blob(strings: Sequence[str], pause: Pause = no_pause) -> tuple[NDArray[np.uint8], NDArray[np.uint64]]:
    """UTF-8 bytes of ``strings`` back to back, and the n+1 offsets that cut them apart."""
    encoded: list[bytes] = []
    for start, end in slices(len(strings)):
        encoded.extend([text.encode("utf-8") for text in strings[start:end]])
        pause()
    return _bytes_blob(encoded, pause)


def _bytes_blob(parts: Sequence[bytes], pause: Pause) -> tuple[NDArray[np.uint8], NDArray[np.uint64]]:
    offsets = np.zeros(len(parts) + 1, dtype=np.uint64)
    np.cumsum(np.fromiter(map(len, parts), dtype=np.uint64, count=len(parts)), out=offsets[1:])
    return join_in_slices(parts, pause), offsets


def stored_record(document: Document) -> bytes:
    """The stored record of ``document``: its text, fields and time as canonical JSON (docs/FORMAT.md).

    A document with named text fields also has ``"text_fields"`` (name ->
    text, the stored ones: the caller drops the others first).

    The bytes are those of ``json.dumps({"text": ..., "fields": ..., "time": ...},
    ensure_ascii=False, sort_keys=True, separators=(",", ":"))`` in UTF-8,
    assembled from the same encoders part by part: one ``json.dumps`` call
    per record costs more in Python overhead than encoding the text does.
    """
    fields = document.fields
    if not fields and document.time is None and not document.text_fields:
        # The common record (text alone): the same bytes as below in one concatenation.
        return ('{"fields":{},"text":' + _encode_json_string(document.text) + ',"time":null}').encode("utf-8")
    time = document.timestamp
    return "".join(
        (
            '{"fields":',
            _dumps_canonical(dict(fields)) if fields else "{}",
            ',"text":',
            _encode_json_string(document.text),
            # Only a document with named text fields has the key, so every other record keeps its bytes.
            ',"text_fields":' + _dumps_canonical(dict(document.text_fields)) if document.text_fields else "",
            ',"time":',
            "null" if time is None else json.dumps(time),
            "}",
        )
    ).encode("utf-8")


def without_text(entry: SegmentDocument) -> SegmentDocument:
    """``entry`` as an index with ``store_text=False`` keeps it: its terms and length, its text gone.

    The document's text becomes ``""`` and its stored record is made again from
    that document (``"text":""``), so what is read back says no text was
    stored; the analysed terms and length (what search and scores use) are kept.
    """
    document = dataclasses.replace(entry.document, text="")
    return SegmentDocument(
        document, entry.terms, entry.length, stored_record(document), entry.field_terms, entry.positions
    )


#: JSON string encoder ``json.dumps(..., ensure_ascii=False)`` uses (C where available), or the
#: compiled one :func:`use_json_string` was given (the same strings).
_encode_json_string: Callable[[str], str] = json.encoder.encode_basestring


def use_json_string(encoder: Callable[[str], str] | None) -> None:
    """Encode stored records' texts as JSON strings with ``encoder`` (``None``: ``json``'s own).

    :mod:`weftsearch.native.inversion` gives its compiled one when it is
    imported (storage does not import native, as for :func:`use_inversion`).
    Whatever it is, it must return what ``json.encoder.encode_basestring`` does.
    """
    global _encode_json_string
    _encode_json_string = json.encoder.encode_basestring if encoder is None else encoder


#: ``json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))`` is
#: ``JSONEncoder(...).encode(value)`` with a new encoder per call; one made once writes the
#: same text without that cost (about 3 us a record).
_CANONICAL = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _dumps_canonical(value: object) -> str:
    return _CANONICAL.encode(value)


@dataclass(frozen=True, slots=True)
class FieldColumns:
    """One named text field's columns: as :class:`SegmentColumns` holds the default field's.

    Either the three posting columns (any order; the encoder sorts them) or
    ``post_sections`` already encoded (a merge's).
    """

    name: str
    lengths: NDArray[np.uint32]
    vocabulary: Sequence[str]
    term_of_posting: NDArray[np.int64]
    doc_of_posting: NDArray[np.int64]
    tf_of_posting: NDArray[np.uint32]
    post_sections: Mapping[str, Section] | None = None
    #: Positions (runs of each posting's tf, in posting order as given), when kept.
    positions: NDArray[np.int64] | None = None
    #: ``pos.*`` sections already encoded (a merge's; with ``post_sections``).
    pos_sections: Mapping[str, Section] | None = None


def field_prefix(number: int) -> str:
    """The section-name prefix of the ``number``-th named text field of a segment (from 1): ``tf.N.``.

    Numbers, not names: a section name has 24 bytes (docs/FORMAT.md), and
    ``tf.`` + a 64-character name + ``.post.block_offsets`` would not fit.
    ``meta``'s ``text_fields`` gives the names in the same order.
    """
    return f"tf.{number}."


@dataclass(frozen=True, slots=True)
class SegmentColumns:
    """A segment's content as columns, the form both the writer and a merge produce.

    Documents are numbered by position in ``keys``, which must be strictly
    increasing. Postings may come in any order; the encoder sorts them. Or
    they come encoded already as ``post_sections`` (a merge builds them a
    range of terms at a time, :class:`PostingsBuilder`), and the three
    posting columns are not read. ``records`` may be any sequence of bytes
    (a merge's gathers them from the sources a slice at a time).
    """

    keys: Sequence[str]
    lengths: NDArray[np.uint32]
    times: NDArray[np.float64]
    records: Sequence[bytes]
    link_counts: NDArray[np.int64]
    link_targets: Sequence[str]
    vector_rows: NDArray[np.int32]
    matrix: NDArray[np.float32]
    vector_dim: int | None
    vocabulary: Sequence[str]
    term_of_posting: NDArray[np.int64]
    doc_of_posting: NDArray[np.int64]
    tf_of_posting: NDArray[np.uint32]
    post_sections: Mapping[str, Section] | None = None
    #: The named text fields' postings and lengths, in schema order (docs/FORMAT.md, "Text fields").
    text_fields: Sequence[FieldColumns] = ()
    #: The default field's positions, as :attr:`FieldColumns.positions`.
    positions: NDArray[np.int64] | None = None
    #: The default field's ``pos.*`` sections already encoded.
    pos_sections: Mapping[str, Section] | None = None
    #: The documents' field indexes (:mod:`weftsearch.storage.fields`); ``None``: derived from ``records``.
    field_index: FieldIndex | None = None
    #: Where the compressed stored blocks may wait on disk (a merge's folder); ``None``: in memory.
    spill: Path | None = None


def encode_segment(
    documents: Sequence[SegmentDocument],
    vector_dim: int | None,
    vector_dtype: str = "float32",
    *,
    pause: Pause = no_pause,
    text_fields: Sequence[str] = (),
    positions_fields: Collection[str] = (),
) -> bytes:
    """Encode ``documents`` (unique keys) as one segment file's bytes.

    ``vector_dtype`` (see :data:`VECTOR_DTYPES`) is how ``vec.matrix`` stores
    the vectors. ``pause`` is called between slices of work
    (:mod:`~weftsearch.storage.pausing`); it never changes the bytes.

    Complexity: O(P log P) for P postings, plus the size of the stored text.
    """
    return encode_columns(
        segment_columns(
            documents,
            vector_dim,
            vector_dtype,
            pause=pause,
            text_fields=text_fields,
            positions_fields=positions_fields,
        ),
        pause=pause,
    )


def segment_columns(
    documents: Sequence[SegmentDocument],
    vector_dim: int | None,
    vector_dtype: str = "float32",
    *,
    pause: Pause = no_pause,
    text_fields: Sequence[str] = (),
    positions_fields: Collection[str] = (),
) -> SegmentColumns:
    """The columns of the segment of ``documents`` (unique keys): what :func:`encode_segment` encodes.

    ``text_fields`` names the index's named text fields in schema order
    (every segment of the index has sections for each, documents without
    the field included: length 0); ``positions_fields`` those (``"text"``
    included) whose positions are kept (from :attr:`SegmentDocument.positions`).

    Write them to a file with :func:`write_columns` (never the whole file in memory).
    """
    if vector_dtype not in VECTOR_DTYPES:
        raise ValueError(f"unknown vector dtype {vector_dtype!r}")
    ordered = sorted_in_slices(documents, _key_of, pause)
    n = len(ordered)
    default = _field_columns(
        "text",
        [d.terms for d in ordered],
        np.array([d.length for d in ordered], dtype=np.uint32),
        [d.positions.get("text", {}) for d in ordered] if "text" in positions_fields else None,
        pause,
    )
    named = []
    for name in text_fields:
        empty: tuple[Mapping[str, int], int] = ({}, 0)
        analysed = [d.field_terms.get(name, empty) for d in ordered]
        named.append(
            _field_columns(
                name,
                [a[0] for a in analysed],
                np.array([a[1] for a in analysed], dtype=np.uint32),
                [d.positions.get(name, {}) for d in ordered] if name in positions_fields else None,
                pause,
            )
        )
    with_vector: list[int] = []
    for start, end in slices(n):
        with_vector.extend([i for i in range(start, end) if ordered[i].document.vector is not None])
        pause()
    vector_rows = np.full(n, -1, dtype=np.int32)
    vector_rows[with_vector] = np.arange(len(with_vector), dtype=np.int32)
    matrix = np.zeros((len(with_vector), vector_dim or 0), dtype=vector_dtype)
    for start, end in slices(len(with_vector)):
        if end > start:
            matrix[start:end] = np.stack([ordered[i].document.vector for i in with_vector[start:end]])  # type: ignore[misc]
        pause()
    keys: list[str] = []
    records: list[bytes] = []
    times: list[float] = []
    link_counts: list[int] = []
    link_targets: list[str] = []
    for start, end in slices(n):
        part = ordered[start:end]
        keys.extend([d.document.key for d in part])
        records.extend([stored_record(d.document) if d.record is None else d.record for d in part])
        times.extend([math.nan if d.document.timestamp is None else d.document.timestamp for d in part])
        link_counts.extend([len(d.document.links) for d in part])
        link_targets.extend(itertools.chain.from_iterable(d.document.links for d in part))
        pause()
    return SegmentColumns(
        keys=keys,
        lengths=default.lengths,
        times=np.array(times, dtype=np.float64),
        records=records,
        link_counts=np.array(link_counts, dtype=np.int64),
        link_targets=link_targets,
        vector_rows=vector_rows,
        matrix=matrix,
        vector_dim=vector_dim,
        vocabulary=default.vocabulary,
        term_of_posting=default.term_of_posting,
        doc_of_posting=default.doc_of_posting,
        tf_of_posting=default.tf_of_posting,
        post_sections=default.post_sections,
        text_fields=tuple(named),
        positions=default.positions,
        pos_sections=default.pos_sections,
        field_index=FieldIndex.build([d.document.fields for d in ordered]),
    )


@dataclass(frozen=True, slots=True)
class InvertedPostings:
    """A text field's postings inverted: what an :data:`Inversion` returns.

    Attributes:
        vocabulary: the terms, sorted (code point order, as ``sorted`` gives).
        offsets: ``V + 1`` cuts: term ``t``'s postings are ``offsets[t] ..< offsets[t+1]``.
        ids: each posting's local document id, ascending within a term.
        tfs: each posting's term frequency.
        positions: each posting's ``tf`` positions, in posting order (``None``: not kept).

    """

    vocabulary: list[str]
    offsets: NDArray[np.uint64]
    ids: NDArray[np.uint32]
    tfs: NDArray[np.uint32]
    positions: NDArray[np.int64] | None


#: Documents' term counts (local-id order), their positions or ``None``, and the pause, to their
#: postings inverted, or ``None`` where the Python path must run (:func:`use_inversion`).
Inversion = Callable[
    [Sequence[Mapping[str, int]], Sequence[Mapping[str, Sequence[int]]] | None, Pause],
    InvertedPostings | None,
]

#: The compiled inversion, when one was given (:func:`use_inversion`).
_inversion: Inversion | None = None


def use_inversion(inversion: Inversion | None) -> None:
    """Invert the segments this module writes with ``inversion`` (``None``: the Python path alone).

    :mod:`weftsearch.native.inversion` gives its compiled one when it is
    imported (``import weftsearch`` does): storage does not import native
    (native imports storage), so the compiled part is handed in. Whatever it
    is, it must give the bytes the Python path gives.
    """
    global _inversion
    _inversion = inversion


def _field_columns(
    name: str,
    term_maps: Sequence[Mapping[str, int]],
    lengths: NDArray[np.uint32],
    position_maps: Sequence[Mapping[str, Sequence[int]]] | None,
    pause: Pause,
) -> FieldColumns:
    """One text field's columns from its documents' term counts (and positions), in local-id order.

    Inverted in C where it can be (:func:`use_inversion`, :func:`weftsearch.native.inversion.invert`:
    the postings come out sorted by term and document, so they are encoded
    here, by the same :func:`postings_sections` and :func:`positions_sections`);
    else flattened in Python (:func:`_flat_postings`), sorted and encoded by
    :func:`segment_sections`. Both give the same bytes (tests/native/test_inversion.py).
    """
    inverted = None if _inversion is None else _inversion(term_maps, position_maps, pause)
    if inverted is None:
        vocabulary, term_of, doc_of, tf_of = _flat_postings(term_maps, pause)
        return FieldColumns(
            name=name,
            lengths=lengths,
            vocabulary=vocabulary,
            term_of_posting=term_of,
            doc_of_posting=doc_of,
            tf_of_posting=tf_of,
            positions=None if position_maps is None else _flat_positions(term_maps, position_maps),
        )
    return FieldColumns(
        name=name,
        lengths=lengths,
        vocabulary=inverted.vocabulary,
        term_of_posting=np.zeros(0, np.int64),
        doc_of_posting=np.zeros(0, np.int64),
        tf_of_posting=np.zeros(0, np.uint32),
        post_sections=postings_sections(inverted.ids, inverted.tfs, inverted.offsets, lengths, pause),
        pos_sections=(
            None
            if inverted.positions is None
            else positions_sections(inverted.positions, inverted.tfs, inverted.offsets, pause)
        ),
    )


def _flat_postings(
    term_maps: Sequence[Mapping[str, int]], pause: Pause
) -> tuple[list[str], NDArray[np.int64], NDArray[np.int64], NDArray[np.uint32]]:
    """Documents' term counts (in local-id order) as columns: vocabulary, term, doc and tf of each posting.

    Postings are flattened and mapped to term ids by C-level iteration
    (chain, map, dict lookups) a slice of documents at a time: no Python
    bytecode runs per posting, and no call runs long.
    """
    n = len(term_maps)
    flat_terms: list[str] = []
    tf_parts: list[NDArray[np.uint32]] = []
    counts = np.empty(n, dtype=np.int64)
    vocabulary_set: set[str] = set()
    for start, end in slices(n):
        part = term_maps[start:end]
        before = len(flat_terms)
        flat_terms.extend(itertools.chain.from_iterable(part))
        vocabulary_set.update(flat_terms[before:])
        tf_parts.append(np.fromiter(itertools.chain.from_iterable(t.values() for t in part), np.uint32))
        counts[start:end] = np.fromiter(map(len, part), dtype=np.int64, count=end - start)
        pause()
    vocabulary = sorted_in_slices(list(vocabulary_set), None, pause)
    term_id: dict[str, int] = {}
    for start, end in slices(len(vocabulary)):
        term_id.update(zip(vocabulary[start:end], range(start, end), strict=True))
        pause()
    term_parts = []
    for start, end in slices(len(flat_terms), 16 * SLICE):
        term_parts.append(np.fromiter(map(term_id.__getitem__, flat_terms[start:end]), np.int64))
        pause()
    return (
        vocabulary,
        np.concatenate(term_parts) if term_parts else np.zeros(0, np.int64),
        np.repeat(np.arange(n, dtype=np.int64), counts),
        np.concatenate(tf_parts) if tf_parts else np.zeros(0, np.uint32),
    )


def _flat_positions(
    term_maps: Sequence[Mapping[str, int]], position_maps: Sequence[Mapping[str, Sequence[int]]]
) -> NDArray[np.int64]:
    """Each document's terms' positions, in :func:`_flat_postings`' posting order (runs of each tf)."""
    runs = itertools.chain.from_iterable(
        itertools.chain.from_iterable(map(positions.__getitem__, terms))
        for terms, positions in zip(term_maps, position_maps, strict=True)
    )
    return np.fromiter(runs, dtype=np.int64)


def _positions_parts(
    positions: NDArray[Any], tfs: NDArray[Any], term_offsets: NDArray[Any], pause: Pause = no_pause
) -> tuple[NDArray[np.uint64], NDArray[np.uint32], NDArray[np.uint32]]:
    """Each term's first word (``<u8``, one more: the words), the packed words, each term's CRC32C."""
    packed = pack_positions(positions, tfs, term_offsets)
    bounds = (packed.data_offsets * 4).tolist()
    data_view = memoryview(packed.data.view(np.uint8))  # type: ignore[arg-type]
    crcs = np.empty(len(bounds) - 1, dtype=np.uint32)
    for start, end in slices(crcs.shape[0], 4 * SLICE):
        crcs[start:end] = [
            crc32c.crc32c(data_view[a:b]) for a, b in itertools.pairwise(bounds[start : end + 1])
        ]
        pause()
    return packed.data_offsets, packed.data, crcs


def _positions_tables(
    offsets: NDArray[np.uint64], data: NDArray[np.uint32], crcs: NDArray[np.uint32]
) -> dict[str, NDArray[Any]]:
    """The ``pos.*`` sections of one field's term offsets, words and CRCs (the offsets split in two)."""
    low, wraps = split_offsets(offsets)
    return {"pos.data_offsets": low, "pos.data_wraps": wraps, "pos.data": data, "pos.crc": crcs}


def positions_sections(
    positions: NDArray[Any], tfs: NDArray[Any], term_offsets: NDArray[Any], pause: Pause = no_pause
) -> dict[str, NDArray[Any]]:
    """The ``pos.*`` sections of postings laid out as :func:`postings_sections` takes them.

    ``positions`` holds each posting's ``tf`` positions in posting order.
    ``pos.data`` (:func:`~weftsearch.storage.postings.pack_positions`),
    ``pos.crc`` (CRC32C of each term's words) and each term's first word,
    as ``pos.data_offsets`` (its low 32 bits) and ``pos.data_wraps``
    (:func:`~weftsearch.storage.postings.split_offsets`). Deterministic.
    O(positions + V).
    """
    return _positions_tables(*_positions_parts(positions, tfs, term_offsets, pause))


def _positions_counts(sections: Mapping[str, Section]) -> dict[str, int]:
    """``meta``'s count of one text field's positions: its packed words."""
    return {"words": int(np.asarray(sections["pos.data"]).shape[0])}


def _key_of(document: SegmentDocument) -> str:
    return document.document.key


def encode_postings(
    ids: NDArray[np.uint32],
    tfs: NDArray[np.uint32],
    term_offsets: NDArray[np.uint64],
    lengths: NDArray[np.uint32],
    pause: Pause = no_pause,
) -> tuple[dict[str, NDArray[Any]], dict[str, int]]:
    """The postings sections of a segment (format version 3) and their ``meta`` counts.

    ``ids`` and ``tfs`` are the postings sorted by (term, local id), term t's
    at ``term_offsets[t] ..< term_offsets[t+1]``; ``lengths`` the documents'
    analysed lengths. Writes ``post.offsets``, ``post.block_offsets``,
    ``post.blocks`` (four rows per block), ``post.data_offsets``, ``post.data``
    (the packed blocks, :mod:`~weftsearch.storage.postings`) and ``post.crc``
    (CRC32C of each term's words). Deterministic. O(P + V).
    """
    packed = pack_postings(ids, tfs, term_offsets, lengths, pause)
    vocabulary_size = term_offsets.shape[0] - 1
    bounds = (packed.data_offsets * 4).tolist()
    data_view = memoryview(packed.data.view(np.uint8))  # type: ignore[arg-type]
    term_crcs = np.empty(vocabulary_size, dtype=np.uint32)
    for start, end in slices(vocabulary_size, 4 * SLICE):
        term_crcs[start:end] = [
            crc32c.crc32c(data_view[a:b]) for a, b in itertools.pairwise(bounds[start : end + 1])
        ]
        pause()
    sections: dict[str, NDArray[Any]] = {
        "post.offsets": term_offsets,
        "post.crc": term_crcs,
        "post.block_offsets": packed.block_offsets,
        "post.blocks": packed.blocks,
        "post.data_offsets": packed.data_offsets,
        "post.data": packed.data,
    }
    meta = {
        "postings": int(term_offsets[-1]) if term_offsets.shape[0] else 0,
        "blocks": int(packed.block_offsets[-1]) if packed.block_offsets.shape[0] else 0,
        "words": int(packed.data.shape[0]),
    }
    return sections, meta


def encode_columns(columns: SegmentColumns, *, pause: Pause = no_pause) -> bytes:
    """Encode a segment given as columns. Deterministic: O(P log P) for P postings.

    ``pause`` is called between slices of work; it never changes the bytes.
    """
    sections = segment_sections(columns, pause=pause)
    return encode_sections({name: materialize(section) for name, section in sections.items()}, pause=pause)


def write_columns(
    columns: SegmentColumns, path: Path, stamp: FileStamp | None, *, pause: Pause = no_pause
) -> tuple[int, int]:
    """Write the segment of ``columns`` to ``path`` (fsynced); the bytes :func:`encode_columns` gives.

    Never holds the whole file: sections go to disk one at a time and stored
    records a slice at a time (:func:`~weftsearch.storage.sectionwriter.write_section_file`).
    Returns ``(bytes, identity)`` for the manifest.
    """
    return write_section_file(path, segment_sections(columns, pause=pause), stamp, pause=pause)


def postings_sections(
    posting_ids: NDArray[np.uint32],
    posting_tfs: NDArray[np.uint32],
    term_offsets: NDArray[np.uint64],
    lengths: NDArray[np.uint32],
    pause: Pause = no_pause,
) -> dict[str, Section]:
    """The ``post.*`` sections of postings already grouped by term, local ids ascending within a term.

    Term ``t``'s postings are ``term_offsets[t] ..< term_offsets[t+1]`` of
    ``posting_ids`` / ``posting_tfs``; ``lengths`` are the document lengths
    (for the block metadata). Self-contained: the postings layout lives here
    and nowhere else in the writer. O(P + V).
    """
    if posting_ids.shape[0] and int(posting_ids.max()) >= lengths.shape[0]:
        raise ValueError("a posting names a document past the end")
    sections, _ = encode_postings(posting_ids, posting_tfs, term_offsets, lengths, pause)
    return dict(sections)


#: Bytes read back from a spill file at a time.
_SPILL_READ = 8 << 20


class PostingsBuilder:
    """The ``post.*`` sections of a segment, built a range of terms at a time (a merge's postings).

    Each range (terms in order, each with its postings, local ids ascending)
    is encoded by :func:`postings_sections`, the one place the layout lives.
    Every term's bytes (its packed words, its CRC, its run of ``post.blocks``)
    depend only on its own postings and the document lengths, so the ranges
    concatenate into the sections one call over all terms gives, byte for
    byte, once the offset tables are rebased. The packed words (``post.data``,
    a few bytes a posting) go to an unlinked temporary file in ``folder``
    (``None``: kept in memory) and are read back a few megabytes at a time
    when the segment is written; what stays in memory is O(V + P/128): per
    term its offsets and CRC, per block its metadata.
    """

    def __init__(self, lengths: NDArray[np.uint32], folder: Path | None, positions: bool = False) -> None:
        self._lengths = lengths
        # The pos.* sections, when positions are kept: every term's (offsets rebased) as for post.*.
        self._positions = positions
        self._pos_data_offsets: list[NDArray[np.uint64]] = []
        self._pos_crcs: list[NDArray[np.uint32]] = []
        self._pos_data: list[NDArray[np.uint32]] = []
        self._pos_words = 0
        # An unlinked file, closed when the builder is collected (after the segment is written):
        # nothing is left behind, even by a crash.
        self._spill = tempfile.TemporaryFile(dir=folder) if folder else None  # noqa: SIM115
        self._kept: list[NDArray[np.uint32]] = []
        self._offsets: list[NDArray[np.uint64]] = []
        self._block_offsets: list[NDArray[np.uint64]] = []
        self._data_offsets: list[NDArray[np.uint64]] = []
        self._crcs: list[NDArray[np.uint32]] = []
        self._blocks: list[NDArray[np.uint32]] = []
        self._postings = 0
        self._block_count = 0
        self._words = 0

    def add(
        self,
        ids: NDArray[np.uint32],
        tfs: NDArray[np.uint32],
        offsets: NDArray[np.uint64],
        positions: NDArray[np.int64] | None = None,
    ) -> None:
        """Append the next terms: term ``t``'s postings are ``offsets[t] ..< offsets[t+1]``, from 0.

        ``positions``: each posting's ``tf`` positions in posting order (a builder made with positions).
        """
        if self._positions:
            if positions is None:
                raise ValueError("this builder keeps positions: add() needs them")
            term_words, words_of_terms, crcs = _positions_parts(positions, tfs, offsets)
            self._pos_data_offsets.append(term_words[:-1] + np.uint64(self._pos_words))
            self._pos_crcs.append(crcs)
            self._pos_data.append(words_of_terms)
            self._pos_words += int(term_words[-1])
        sections = postings_sections(ids, tfs, offsets, self._lengths)
        block_offsets = sections["post.block_offsets"]
        data_offsets = sections["post.data_offsets"]
        data = sections["post.data"]
        assert isinstance(block_offsets, np.ndarray)
        assert isinstance(data_offsets, np.ndarray)
        assert isinstance(data, np.ndarray)
        self._offsets.append(offsets[:-1] + np.uint64(self._postings))
        self._block_offsets.append(block_offsets[:-1].astype(np.uint64) + np.uint64(self._block_count))
        self._data_offsets.append(data_offsets[:-1].astype(np.uint64) + np.uint64(self._words))
        self._crcs.append(sections["post.crc"])  # type: ignore[arg-type]
        # post.blocks holds each term's four runs together (at 4 * its first block), so the
        # ranges' tables join end to end.
        self._blocks.append(sections["post.blocks"])  # type: ignore[arg-type]
        words = np.ascontiguousarray(data, dtype=np.uint32)
        if self._spill is not None:
            self._spill.write(memoryview(words.view(np.uint8)))  # type: ignore[arg-type]
        else:
            self._kept.append(words)
        self._postings += int(ids.shape[0])
        self._block_count += int(block_offsets[-1])
        self._words += int(words.shape[0])

    def sections(self) -> dict[str, Section]:
        """The ``post.*`` sections of every term added, in order."""

        def tail(parts: list[NDArray[np.uint64]], last: int) -> NDArray[np.uint64]:
            return np.concatenate([*parts, np.array([last], dtype=np.uint64)])

        positions: dict[str, Section] = {}
        if self._positions:
            positions = dict(
                _positions_tables(
                    tail(self._pos_data_offsets, self._pos_words),
                    np.concatenate(self._pos_data) if self._pos_data else np.zeros(0, np.uint32),
                    np.concatenate(self._pos_crcs) if self._pos_crcs else np.zeros(0, np.uint32),
                )
            )
        return {
            **positions,
            "post.offsets": tail(self._offsets, self._postings),
            "post.crc": np.concatenate(self._crcs) if self._crcs else np.zeros(0, np.uint32),
            "post.block_offsets": tail(self._block_offsets, self._block_count),
            "post.blocks": np.concatenate(self._blocks) if self._blocks else np.zeros(0, np.uint32),
            "post.data_offsets": tail(self._data_offsets, self._words),
            "post.data": ByteChunks(4 * self._words, self._chunks(), "<u4"),
        }

    def _chunks(self) -> Callable[[], Iterator[bytes | memoryview]]:
        spill = self._spill
        kept = self._kept

        def produce() -> Iterator[bytes | memoryview]:
            if spill is None:
                for array in kept:
                    yield memoryview(array.view(np.uint8))  # type: ignore[arg-type]
                return
            spill.flush()
            fd, position = spill.fileno(), 0
            while chunk := os.pread(fd, _SPILL_READ, position):
                yield chunk
                position += len(chunk)

        return produce


def segment_sections(columns: SegmentColumns, *, pause: Pause = no_pause) -> dict[str, Section]:
    """The sections of the segment of ``columns`` (arrays, and the stored blob in chunks).

    Postings are sorted by (term, doc) here and encoded by
    :func:`postings_sections`, unless ``columns.post_sections`` holds them
    encoded already. O(P log P) (O(1) for encoded postings), plus the stored text.
    """
    n = len(columns.keys)
    vocabulary_size = len(columns.vocabulary)
    lengths = np.asarray(columns.lengths, dtype=np.uint32)
    post = _field_postings(
        columns.post_sections,
        columns.term_of_posting,
        columns.doc_of_posting,
        columns.tf_of_posting,
        vocabulary_size,
        lengths,
        pause,
        columns.positions,
        columns.pos_sections,
    )
    named_sections: dict[str, Section] = {}
    named_meta: list[dict[str, Any]] = []
    for number, field in enumerate(columns.text_fields, start=1):
        field_lengths = np.asarray(field.lengths, dtype=np.uint32)
        if field_lengths.shape[0] != n:
            raise ValueError(f"text field {field.name!r}: {field_lengths.shape[0]} lengths, {n} documents")
        field_post = _field_postings(
            field.post_sections,
            field.term_of_posting,
            field.doc_of_posting,
            field.tf_of_posting,
            len(field.vocabulary),
            field_lengths,
            pause,
            field.positions,
            field.pos_sections,
        )
        field_terms_blob, field_terms_offsets = _blob(field.vocabulary, pause)
        prefix = field_prefix(number)
        for name, section in {
            "terms.blob": field_terms_blob,
            "terms.offsets": field_terms_offsets,
            "doc.lengths": field_lengths,
            **field_post,
        }.items():
            named_sections[prefix + name] = section
        entry = {"name": field.name, **_postings_counts(len(field.vocabulary), field_post)}
        if "pos.data" in field_post:
            entry["positions"] = _positions_counts(field_post)
        named_meta.append(entry)
    keys_blob, keys_offsets = _blob(columns.keys, pause)
    terms_blob, terms_offsets = _blob(columns.vocabulary, pause)
    stored = stored_sections(columns.records, pause, spill=columns.spill)
    links_blob, links_target_offsets = _blob(columns.link_targets, pause)
    links_offsets = np.zeros(n + 1, dtype=np.uint64)
    np.cumsum(columns.link_counts, out=links_offsets[1:])
    meta: dict[str, Any] = {
        "documents": n,
        **_postings_counts(vocabulary_size, post),
        "links": len(columns.link_targets),
        "vectors": int(columns.matrix.shape[0]),
        "vector_dim": columns.vector_dim,
    }
    half = columns.matrix.dtype == np.float16
    matrix: NDArray[Any] = np.ascontiguousarray(columns.matrix, dtype=np.float16 if half else np.float32)
    if half:
        meta["vector_dtype"] = "float16"  # absent means float32, as in every earlier segment
    if named_meta:  # absent in a segment of the default field only
        meta["text_fields"] = named_meta
    if "pos.data" in post:  # absent where the default field keeps no positions
        meta["positions"] = _positions_counts(post)
    vector_rows = np.asarray(columns.vector_rows, dtype=np.int32)
    ivf_sections: dict[str, NDArray[Any]] = {}
    if matrix.shape[0] >= IVF_MIN_VECTORS and matrix.shape[1]:
        # Vectors go into partition order (rows of one list contiguous, in key
        # order within the list), so a probed list is one block of the matrix.
        partitions = train_partitions(matrix.astype(np.float32, copy=False))
        order = np.argsort(partitions.assignment, kind="stable")
        new_row = np.empty(order.shape[0], dtype=np.int64)
        new_row[order] = np.arange(order.shape[0])
        matrix = np.ascontiguousarray(matrix[order])
        has = vector_rows >= 0
        vector_rows = vector_rows.copy()
        vector_rows[has] = new_row[vector_rows[has]].astype(np.int32)
        offsets = np.zeros(partitions.nlist + 1, dtype=np.uint64)
        np.cumsum(np.bincount(partitions.assignment, minlength=partitions.nlist), out=offsets[1:])
        ivf_sections = {"ivf.centroids": partitions.centroids.reshape(-1), "ivf.offsets": offsets}
        meta["ivf"] = {
            "nlist": partitions.nlist,
            "sample": partitions.sample,
            "iterations": TRAIN_ITERATIONS,
            "seed": TRAIN_SEED,
        }
    meta_bytes = json.dumps(meta, sort_keys=True, separators=(",", ":")).encode("ascii")
    return {
        "meta": np.frombuffer(meta_bytes, dtype=np.uint8),
        "keys.blob": keys_blob,
        "keys.offsets": keys_offsets,
        "doc.lengths": lengths,
        "doc.times": np.asarray(columns.times, dtype=np.float64),
        "terms.blob": terms_blob,
        "terms.offsets": terms_offsets,
        **post,
        **stored,
        "links.doc": links_offsets,
        "links.blob": links_blob,
        "links.offsets": links_target_offsets,
        "vec.rows": vector_rows,
        "vec.matrix": matrix.reshape(-1),
        **ivf_sections,
        **_field_sections(columns),
        **named_sections,
    }


def _postings_counts(vocabulary_size: int, post: Mapping[str, Section]) -> dict[str, int]:
    """``meta``'s counts of one text field's postings: terms, postings, blocks, packed words."""
    return {
        "terms": vocabulary_size,
        "postings": int(post["post.offsets"][-1]),  # type: ignore[index]
        "blocks": int(post["post.block_offsets"][-1]),  # type: ignore[index]
        "words": int(post["post.data_offsets"][-1]),  # type: ignore[index]
    }


def _field_postings(
    encoded: Mapping[str, Section] | None,
    term_of_posting: NDArray[np.int64],
    doc_of_posting: NDArray[np.int64],
    tf_of_posting: NDArray[np.uint32],
    vocabulary_size: int,
    lengths: NDArray[np.uint32],
    pause: Pause,
    positions: NDArray[np.int64] | None = None,
    encoded_positions: Mapping[str, Section] | None = None,
) -> dict[str, Section]:
    """One text field's ``post.*`` (and ``pos.*``) sections: as given, or its columns encoded."""
    if encoded is not None:
        return {**encoded, **(encoded_positions or {})}
    n = lengths.shape[0]
    # Sorting by (term, doc) makes the bytes independent of the order postings came in.
    # A document holds a term once, so term * n + doc is a unique key: one unstable
    # sort of it gives lexsort's order (about 40% less time than its two stable passes).
    key = term_of_posting.astype(np.int64) * np.int64(max(n, 1)) + doc_of_posting
    order = np.argsort(key)
    if order.shape[0] > 1 and bool(np.any(np.diff(key[order]) == 0)):
        raise ValueError("a document holds a term twice in the postings")
    del key
    posting_ids = doc_of_posting[order].astype(np.uint32)
    posting_tfs = tf_of_posting[order].astype(np.uint32)
    del order
    term_offsets = np.zeros(vocabulary_size + 1, dtype=np.uint64)
    np.cumsum(np.bincount(term_of_posting, minlength=vocabulary_size), out=term_offsets[1:])
    if posting_ids.shape[0] and int(posting_ids.max()) >= n:
        raise ValueError("a posting names a document past the end")
    sections = postings_sections(posting_ids, posting_tfs, term_offsets, lengths, pause)
    if positions is not None:
        # The runs follow their postings into (term, doc) order: one gather, no Python per run.
        key = term_of_posting.astype(np.int64) * np.int64(max(n, 1)) + doc_of_posting
        order = np.argsort(key)
        del key
        flat_tf = tf_of_posting.astype(np.int64)
        run_start = np.cumsum(flat_tf) - flat_tf
        sorted_tf = flat_tf[order]
        sorted_start = np.cumsum(sorted_tf) - sorted_tf
        shift = np.repeat(run_start[order] - sorted_start, sorted_tf)
        gather = np.arange(int(sorted_tf.sum()), dtype=np.int64) + shift
        sections.update(positions_sections(positions[gather], sorted_tf, term_offsets, pause))
    return sections


def _field_sections(columns: SegmentColumns) -> dict[str, NDArray[Any]]:
    """The ``fld.*`` sections (docs/FORMAT.md, "Field indexes") of ``columns``."""
    index = columns.field_index
    if index is None:  # columns made without one (built by hand): from the stored records
        fields = []
        for position, record in enumerate(columns.records):
            try:
                found = json.loads(record).get("fields")
            except (ValueError, RecursionError, AttributeError):
                found = None
            if not isinstance(found, dict) or not all(is_field_value(v) for v in found.values()):
                raise CorruptIndexError(f"stored record {position} has no valid fields to index")
            fields.append(found)
        index = FieldIndex.build(first_type_only(fields))
    return index.sections()
