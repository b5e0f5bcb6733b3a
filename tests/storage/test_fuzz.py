"""Fuzzing every storage decoder with hypothesis.

Decoders under test: :class:`SectionFile` (header, table, sections, verify),
:class:`SegmentReader` (open, keys, lengths, times, terms, postings of random
and real terms, every document, record, fields, links, vectors, find, verify,
and :func:`merge_columns` over it), :meth:`Manifest.from_bytes` and
:func:`read_tombstones`.

The property, for every input: only ``CorruptIndexError`` or
``FormatVersionError`` escapes, or the call returns a clean result (checked
for type and consistency where that is cheap). Never ``IndexError``,
``ValueError``, ``KeyError``, ``struct.error``, ``UnicodeDecodeError``,
``OverflowError``, ``RecursionError``, ``MemoryError``, never a hang (each
example runs under a ``SIGALRM`` deadline).

Inputs come in three kinds, since random bytes rarely get past a checksum:

* arbitrary bytes, and bytes that start like a section file;
* valid files mutated byte-wise (overwrites, truncation, insertion), then
  optionally *re-sealed* (:func:`reseal` recomputes the file length and every
  checksum, the per-record and per-term ones included) so the structural
  checks behind the checksums are what gets fuzzed;
* structured edits of a valid segment's sections, manifest body or tombstone
  sections (values, lengths, element types, metadata and stored records as
  arbitrary JSON), encoded with valid checksums.

:func:`feed` is the byte-level entry point shared with ``fuzz/atheris_decoders.py``:
its first byte picks the decoder and whether to re-seal. Crashing inputs go
to ``tests/storage/fuzz_corpus/`` (replayed by :func:`test_corpus_replay`)
or become ``@example`` seeds below.

Default settings are fast and derandomised (``FAST``: 150 examples per
target); ``-m slow`` runs ``THOROUGH`` (3000 examples, random seeds).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import math
import os
import shutil
import struct
import tempfile
import tracemalloc
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from tests.storage.alarms import alarm
from weftsearch.documents import Document
from weftsearch.errors import CorruptIndexError, FormatVersionError
from weftsearch.storage.codec import MAGIC, SECTION_DTYPES, SectionFile, checksum, encode_sections
from weftsearch.storage.directory import Manifest, SegmentEntry, encode_tombstones, read_tombstones
from weftsearch.storage.docstore import BLOCK_COLUMNS, decompress_block, stored_sections
from weftsearch.storage.sectionwriter import materialize
from weftsearch.storage.segment import SegmentReader
from weftsearch.storage.segment_merge import merge_columns
from weftsearch.storage.segment_writer import SegmentDocument, encode_segment

T = TypeVar("T")
ALLOWED = (CorruptIndexError, FormatVersionError)
FUZZ_PATH = Path("<fuzz>")
EXAMPLE_SECONDS = 10.0
CORPUS = Path(__file__).parent / "fuzz_corpus"

FAST = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
THOROUGH = settings(
    max_examples=3000,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# ---------------------------------------------------------------------- valid inputs


def _segment_documents() -> list[SegmentDocument]:
    rows: list[
        tuple[
            str, str, list[float] | None, tuple[str, ...], float | None, dict[str, str | int | float | bool]
        ]
    ] = [
        ("doc-a", "graph search graph", [0.5, -1.0, 2.0, 0.0], ("doc-b", "doc-z"), 1.7e9, {"t": "A"}),
        ("doc-b", "vector search", None, (), None, {"year": 2020, "ok": True}),
        ("doc-c", "dense ünïcode retrieval", [1.0, 1.0, 1.0, 1.0], ("doc-a",), 1.6e9, {}),
        ("doc-d", "", [0.0, 0.0, 0.0, 1.0], ("doc-a", "doc-b", "doc-c"), -5.0, {"w": 0.25}),
        ("é-key", "graph tombstone", None, ("doc-d",), 0.0, {"name": "ñ"}),
    ]
    documents = []
    for key, text, vector, links, time, fields in rows:
        terms = text.split()
        counts: dict[str, int] = {}
        for term in terms:
            counts[term] = counts.get(term, 0) + 1
        document = Document(
            key,
            text,
            vector=None if vector is None else np.array(vector, np.float32),
            links=links,
            time=time,
            fields=fields,
        )
        documents.append(SegmentDocument(document, counts, len(terms)))
    return documents


VALID_SEGMENT = encode_segment(_segment_documents(), 4)
EMPTY_SEGMENT = encode_segment([], None)
TOMBSTONE_MASK = np.array([False, True, False, False, True, False, False, False, True])
VALID_TOMBSTONES = encode_tombstones(TOMBSTONE_MASK)
VALID_MANIFEST = Manifest(
    generation=4,
    analyzer="english",
    vector_dim=4,
    segments=(
        SegmentEntry("seg-000001.wseg", 9, "seg-000001.del-000004", 3, 4096, 0x1234, 320, 0xABCD),
        SegmentEntry("seg-000002.wseg", 5, None, 0, 2048, 0xFFFFFFFF),
    ),
    next_segment=3,
    extra={"note": "x"},
    index_id="00112233445566778899aabbccddeeff",
).to_bytes()
PROBE_TERMS = ("graph", "search", "vector", "dense", "ünïcode", "tombstone", "zzz", "", "graph\x00")


def sections_of(data: bytes) -> dict[str, NDArray[Any]]:
    """A valid section file's sections as writable copies."""
    source = SectionFile(FUZZ_PATH, data)
    return {name: np.array(source.array(name)) for name in source.names}


SEGMENT_SECTIONS = sections_of(VALID_SEGMENT)
_VALID_READER = SegmentReader(FUZZ_PATH, VALID_SEGMENT)
#: The valid segment's stored records (raw, as the writer made them).
VALID_RECORDS = tuple(_VALID_READER.record(i) for i in range(_VALID_READER.n_docs))


# ---------------------------------------------------------------------- re-sealing

_ENTRY = struct.Struct("<24s8sQQQI")


def _view(buffer: bytearray, extent: tuple[int, int], dtype: str) -> NDArray[Any] | None:
    """The section at ``extent`` as a writable array of ``dtype``, or None if it does not fit."""
    offset, length = extent
    size = np.dtype(dtype).itemsize
    if offset + length > len(buffer) or length % size:
        return None
    return np.frombuffer(memoryview(buffer)[offset : offset + length], dtype=dtype)


def _reseal_inner(buffer: bytearray, extents: Mapping[str, tuple[int, int]]) -> None:
    """Recompute the per-record (``stored.crc``) and per-term (``post.crc``) checksums in place."""
    stored = ("stored.blob", "stored.offsets", "stored.crc", "stored.blocks", "stored.block_crc")
    if all(n in extents for n in stored):
        blob = _view(buffer, extents["stored.blob"], "|u1")
        offsets = _view(buffer, extents["stored.offsets"], "<u8")
        crcs = _view(buffer, extents["stored.crc"], "<u4")
        table = _view(buffer, extents["stored.blocks"], "<u8")
        block_crcs = _view(buffer, extents["stored.block_crc"], "<u4")
        if all(v is not None for v in (blob, offsets, crcs, table, block_crcs)):
            assert blob is not None and offsets is not None and crcs is not None
            assert table is not None and block_crcs is not None
            rows = table[: len(table) // BLOCK_COLUMNS * BLOCK_COLUMNS].reshape(-1, BLOCK_COLUMNS).tolist()
            bounds = offsets.tolist()
            for k, (first, at, packed, raw_length, method) in enumerate(rows[: len(block_crcs)]):
                if at + packed > len(blob):
                    continue
                block_crcs[k] = checksum(blob[at : at + packed].tobytes())
                end = rows[k + 1][0] if k + 1 < len(rows) else len(bounds) - 1
                if raw_length > 1 << 24 or not first <= end < len(bounds):
                    continue
                raw = decompress_block(blob[at : at + packed].tobytes(), raw_length, method)
                if raw is None:
                    continue
                for i in range(first, min(end, len(crcs))):
                    start, stop = bounds[i] - bounds[first], bounds[i + 1] - bounds[first]
                    if 0 <= start <= stop <= len(raw):
                        crcs[i] = checksum(raw[start:stop])
    if all(n in extents for n in ("post.data_offsets", "post.data", "post.crc")):
        offsets = _view(buffer, extents["post.data_offsets"], "<u8")
        words = _view(buffer, extents["post.data"], "<u4")
        crcs = _view(buffer, extents["post.crc"], "<u4")
        if offsets is not None and words is not None and crcs is not None:
            bounds = offsets.tolist()
            for t in range(min(len(crcs), len(bounds) - 1)):
                start, end = bounds[t], bounds[t + 1]
                if start <= end <= len(words):
                    crcs[t] = checksum(words[start:end].tobytes())


def reseal(data: bytes) -> bytes:
    """Make ``data`` pass every checksum a section-file reader checks, whatever its structure.

    Sets the header's file length to the real length, recomputes inner
    checksums (records, postings), then each section's CRC32C whose extent
    lies in the file, the table's and the header's. Bytes that are not a
    section file (no magic, under 64 bytes) come back unchanged.
    """
    if len(data) < 64 or data[:8] != MAGIC:
        return data
    buffer = bytearray(data)
    struct.pack_into("<Q", buffer, 16, len(buffer))
    count = struct.unpack_from("<I", buffer, 12)[0]
    table_end = 64 + 64 * count
    data_start = table_end + (-table_end) % 64
    if count <= 4096 and data_start <= len(buffer):
        entries = []
        for position in range(count):
            name, _, offset, length, _, _ = _ENTRY.unpack_from(buffer, 64 + 64 * position)
            entries.append((64 + 64 * position, name.rstrip(b"\x00").decode("latin-1"), offset, length))
        extents = {name: (offset, length) for _, name, offset, length in entries}
        _reseal_inner(buffer, extents)
        for at, _, offset, length in entries:
            if offset + length <= len(buffer):
                struct.pack_into("<I", buffer, at + 56, checksum(bytes(buffer[offset : offset + length])))
        struct.pack_into("<I", buffer, 24, checksum(bytes(buffer[64:data_start])))
    struct.pack_into("<I", buffer, 28, checksum(bytes(buffer[:28]) + bytes(buffer[32:64])))
    return bytes(buffer)


def test_reseal_keeps_valid_files_valid() -> None:
    for data in (VALID_SEGMENT, EMPTY_SEGMENT, VALID_TOMBSTONES):
        assert reseal(data) == data
    for name in ("doc.times", "stored.blob", "post.data"):
        damaged = bytearray(VALID_SEGMENT)
        start = VALID_SEGMENT.index(SectionFile(FUZZ_PATH, VALID_SEGMENT).raw(name).tobytes())
        damaged[start + 1] ^= 0xFF
        sealed = reseal(bytes(damaged))
        assert sealed != bytes(damaged)
        assert SectionFile(FUZZ_PATH, sealed).verify() == []
        reader = SegmentReader(FUZZ_PATH, sealed)
        if name == "stored.blob":
            # A flipped compressed byte rarely still decompresses; its block's CRC32C is re-derived.
            sections = SectionFile(FUZZ_PATH, sealed)
            table = sections.array("stored.blocks").reshape(-1, BLOCK_COLUMNS)
            blob = sections.raw("stored.blob")
            crcs = sections.array("stored.block_crc").tolist()
            assert [checksum(blob[at : at + size]) for _, at, size, _, _ in table.tolist()] == crcs
        else:
            assert all(reader.record(i) for i in range(reader.n_docs))  # inner checksums re-derived
        assert [reader.postings(t)[0].size for t in PROBE_TERMS[:3]]


# ---------------------------------------------------------------------- exercising decoders


def attempt(call: Callable[[], T]) -> T | None:
    """``call()``, or None when it raises one of the allowed errors."""
    try:
        return call()
    except ALLOWED:
        return None


def exercise_section_file(data: bytes) -> None:
    """Open ``data`` as a section file and read everything it offers."""
    try:
        sections = SectionFile(FUZZ_PATH, data)
    except ALLOWED:
        return
    names = sections.names
    assert len(names) == len(set(names)) and all(isinstance(n, str) for n in names)
    for name in names:
        assert name in sections
        assert sections.size(name) == len(sections.raw(name)) <= len(data)
        array = attempt(partial(sections.array, name))
        if array is not None:
            assert array.dtype.str in SECTION_DTYPES and array.nbytes == sections.size(name)
            assert not array.flags.writeable
    assert attempt(lambda: sections.array("no such section")) is None
    problems = sections.verify()
    assert all(isinstance(p, str) for p in problems)
    if not problems:
        hole = unchecked_bytes(data)
        assert not any(hole), f"verify() passed, but {len(hole)} bytes before the first section are unchecked"


def unchecked_bytes(data: bytes) -> bytes:
    """The bytes between the table's zero gap and the first section (no checksum covers them).

    The header checksum covers bytes 0..63, the table checksum the table and
    its gap; sections have their own checksums and ``verify`` checks the
    padding after each. That leaves these, which must be absent or zero.
    """
    count = struct.unpack_from("<I", data, 12)[0]
    table_end = 64 + 64 * count
    data_start = table_end + (-table_end) % 64
    first = min(
        (_ENTRY.unpack_from(data, 64 + 64 * i)[2] for i in range(count)),
        default=len(data),
    )
    return data[data_start:first]


def _hole_before_first_section() -> bytes:
    """A valid tombstone file whose sections moved 64 bytes on, the hole filled with 0xAB."""
    count = 2
    data_start = 64 + 64 * count
    data = bytearray(VALID_TOMBSTONES)
    data[data_start:data_start] = b"\xab" * 64
    for i in range(count):
        at = 64 + 64 * i + 32
        struct.pack_into("<Q", data, at, struct.unpack_from("<Q", data, at)[0] + 64)
    return reseal(bytes(data))


HOLE_BEFORE_FIRST_SECTION = _hole_before_first_section()


def open_segment(data: bytes) -> SegmentReader | None:
    try:
        return SegmentReader(FUZZ_PATH, data)
    except ALLOWED:
        return None


def read_everything(reader: SegmentReader) -> list[str]:
    """Call every reading method of ``reader``; return the names of those that raised an allowed error.

    A stored document or its fields read as ``None`` (damaged) counts as a failed read too.
    """
    calls: list[tuple[str, Callable[[], object]]] = [
        ("keys", reader.keys),
        ("doc_lengths", reader.doc_lengths),
        ("times", reader.times),
        ("terms", reader.terms),
        ("all_postings", reader.all_postings),
        ("all_links", reader.all_links),
        ("vector_rows", reader.vector_rows),
        ("vector_matrix", reader.vector_matrix),
        ("find", partial(reader.find, "doc-a")),
        ("find-empty", partial(reader.find, "")),
    ]
    terms = attempt(reader.terms) or []
    for term in [*PROBE_TERMS, *terms[:32]]:
        calls.append((f"postings({term!r})", partial(reader.postings, term)))
        calls.append((f"term_blocks({term!r})", partial(reader.term_blocks, term)))
    for local in range(min(reader.n_docs, 24)):
        calls.append((f"document({local})", partial(_present, reader.document, local)))
        calls.append((f"fields({local})", partial(_present, reader.fields, local)))
        calls.append((f"record({local})", partial(reader.record, local)))
        calls.append((f"links({local})", partial(reader.links, local)))
        calls.append((f"vector({local})", partial(reader.vector, local)))
    failed = []
    for name, call in calls:
        try:
            call()
        except ALLOWED:
            failed.append(name)
    return failed


def _present(read: Callable[[int], T | None], local: int) -> T:
    value = read(local)
    if value is None:
        raise CorruptIndexError(f"document {local} reads as damaged")
    return value


def exercise_segment(data: bytes, *, merge: bool = True) -> None:
    """Open ``data`` as a segment and read every part of it; merge it; verify it."""
    reader = open_segment(data)
    if reader is None:
        return
    assert isinstance(reader.n_docs, int) and reader.n_docs >= 0
    assert isinstance(reader.n_terms, int) and reader.n_terms >= 0
    # Counts read from the file are bounded by its length before anything is sized by them.
    assert reader.n_docs <= len(data) and reader.n_terms <= len(data)
    assert reader.n_vectors * (reader.vector_dim or 0) <= len(data)
    assert reader.vector_dim is None or (isinstance(reader.vector_dim, int) and reader.vector_dim > 0)
    keys = attempt(reader.keys)
    if keys is not None:
        assert keys.shape == (reader.n_docs,)
    for local in range(min(reader.n_docs, 24)):
        document = attempt(partial(reader.document, local))
        if document is not None and keys is not None:
            assert isinstance(document, Document) and document.key == str(keys[local])
    read_everything(reader)
    problems = reader.verify()
    assert all(isinstance(p, str) for p in problems)
    if merge and reader.n_docs <= 4096:
        attempt(lambda: merge_columns([(reader, np.ones(reader.n_docs, dtype=bool))]))


def exercise_manifest(data: bytes) -> None:
    """Decode ``data`` as a manifest; a decoded one must be well-typed and round-trip."""
    try:
        manifest = Manifest.from_bytes(data, Path("MANIFEST"))
    except ALLOWED:
        return
    assert isinstance(manifest.generation, int) and isinstance(manifest.next_segment, int)
    assert isinstance(manifest.analyzer, str)
    assert manifest.vector_dim is None or isinstance(manifest.vector_dim, int)
    numbers = [entry.number for entry in manifest.segments]
    for entry in manifest.segments:
        assert isinstance(entry.name, str) and isinstance(entry.documents, int)
        assert 0 <= entry.deleted <= entry.documents
        assert entry.size > 0 and 0 <= entry.checksum < 2**32 and 0 <= entry.deletes_checksum < 2**32
        assert (entry.deletes is None) == (entry.deletes_size == 0) == (entry.deleted == 0)
    # Identity rules (docs/FORMAT.md): no entry twice, no commit can overwrite a listed file.
    assert len(set(numbers)) == len(numbers)
    assert all(number < manifest.next_segment for number in numbers)
    assert len(manifest.index_id) == 32 and int(manifest.index_id, 16) >= 0
    again = Manifest.from_bytes(manifest.to_bytes(), Path("MANIFEST"))
    assert again.to_bytes() == manifest.to_bytes()


_SCRATCH: list[Path] = []


def scratch_directory() -> Path:
    """A private temporary directory for files the decoders must read from disk."""
    if not _SCRATCH:
        path = Path(tempfile.mkdtemp(prefix="weft-fuzz-"))
        atexit.register(shutil.rmtree, path, True)
        _SCRATCH.append(path)
    return _SCRATCH[0]


def exercise_tombstones(data: bytes, documents: int, deleted: int) -> None:
    """Write ``data`` as a tombstone file and read it against the given manifest counts."""
    path = scratch_directory() / "seg-000001.del-000001"
    temporary = path.with_suffix(".swap")
    temporary.write_bytes(data)
    os.replace(temporary, path)  # a new inode: an earlier map never sees these bytes
    try:
        mask = read_tombstones(path, documents, deleted)
    except ALLOWED:
        return
    assert mask.dtype == np.bool_ and mask.shape == (documents,)
    assert int(mask.sum()) == deleted and not mask.flags.writeable


#: What the first byte of a :func:`feed` input selects (low 7 bits, modulo the count).
TARGETS = ("section-file", "segment", "manifest", "tombstones")
RESEAL = 0x80


def feed(data: bytes) -> None:
    """Byte-level entry point (atheris, corpus replay): byte 0 picks the decoder.

    ``data[0] & 0x7F`` modulo 4 selects section file, segment, manifest or
    tombstones; bit 0x80 re-seals the payload's checksums first. Tombstone
    inputs take the manifest's document and deleted counts from bytes 1 and 2.
    Raises whatever the decoder raises beyond the allowed errors (a crash).
    """
    if not data:
        return
    target = TARGETS[(data[0] & 0x7F) % len(TARGETS)]
    payload = data[1:]
    if target == "tombstones":
        counts, payload = payload[:2].ljust(2, b"\x00"), payload[2:]
    if data[0] & RESEAL:
        payload = reseal(payload)
    if target == "section-file":
        exercise_section_file(payload)
    elif target == "segment":
        exercise_section_file(payload)
        exercise_segment(payload)
    elif target == "manifest":
        exercise_manifest(payload)
    else:
        exercise_tombstones(payload, counts[0], counts[1])


# ---------------------------------------------------------------------- deadline


class ExampleTimeout(BaseException):
    """An example ran past its deadline (BaseException: library ``except`` clauses let it through)."""


def deadline(seconds: float = EXAMPLE_SECONDS) -> contextlib.AbstractContextManager[None]:
    """Raise :class:`ExampleTimeout` in the block after ``seconds`` (:func:`tests.storage.alarms.alarm`)."""
    return alarm(seconds, ExampleTimeout, "decoder")


# ---------------------------------------------------------------------- strategies

SECTION_NAMES = sorted(SEGMENT_SECTIONS)
DTYPES = sorted(SECTION_DTYPES)
INTERESTING_INTS = (
    0,
    1,
    -1,
    2,
    7,
    255,
    2**31 - 1,
    2**31,
    2**32 - 1,
    2**32,
    2**53 + 1,
    2**63 - 1,
    2**63,
    2**64 - 1,
)
INTERESTING_JSON: tuple[object, ...] = (
    None,
    True,
    False,
    0,
    -1,
    1,
    2**63,
    10**30,
    10**400,
    1.5,
    -0.0,
    math.inf,
    -math.inf,
    math.nan,
    "",
    "x",
    "\ud800",
    [],
    {},
)

json_values: st.SearchStrategy[object] = st.recursive(
    st.sampled_from(INTERESTING_JSON)
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)


def json_bytes(value: object) -> bytes:
    """JSON as Python writes it (NaN, Infinity and lone surrogates included, as a hostile writer might)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8", "surrogatepass")


def _values_for(dtype: np.dtype[Any]) -> st.SearchStrategy[Any]:
    if dtype.kind == "f":
        width: Literal[16, 32, 64] = 16 if dtype.itemsize == 2 else 32 if dtype.itemsize == 4 else 64
        return st.floats(allow_nan=True, allow_infinity=True, width=width)
    info = np.iinfo(dtype)
    return st.sampled_from([v for v in INTERESTING_INTS if info.min <= v <= info.max]) | st.integers(
        int(info.min), int(info.max)
    )


@st.composite
def byte_mutations(draw: st.DrawFn, base: bytes) -> bytes:
    """``base`` with a few overwrites, an optional truncation or insertion."""
    data = bytearray(base)
    for _ in range(draw(st.integers(0, 6))):
        if not data:
            break
        position = draw(st.integers(0, len(data) - 1))
        if draw(st.booleans()):
            data[position] ^= 1 << draw(st.integers(0, 7))
        else:
            data[position] = draw(st.integers(0, 255))
    choice = draw(st.sampled_from(["none", "none", "truncate", "insert", "overwrite-int"]))
    if choice == "truncate":
        del data[draw(st.integers(0, len(data))) :]
    elif choice == "insert":
        position = draw(st.integers(0, len(data)))
        data[position:position] = draw(st.binary(min_size=1, max_size=80))
    elif choice == "overwrite-int" and len(data) >= 8:
        position = draw(st.integers(0, len(data) - 8))
        data[position : position + 8] = struct.pack("<Q", draw(st.sampled_from(INTERESTING_INTS)) % 2**64)
    return bytes(data)


@st.composite
def section_edits(draw: st.DrawFn, base: Mapping[str, NDArray[Any]]) -> dict[str, NDArray[Any]]:
    """Structured edits of a section file's arrays; the result encodes with valid checksums."""
    sections = {name: np.array(array) for name, array in base.items()}
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(
            st.sampled_from(["set", "set", "set", "bytes", "drop", "resize", "retype", "add", "meta"])
        )
        names = sorted(sections)
        if not names and kind != "add":
            break
        name = draw(st.sampled_from(names)) if names else "extra"
        array = sections.get(name, np.zeros(0, np.uint8))
        if kind == "set" and array.size:
            position = draw(st.integers(0, array.size - 1))
            array[position] = draw(_values_for(array.dtype))
        elif kind == "bytes":
            dtype = np.dtype(draw(st.sampled_from(DTYPES)))
            raw = draw(st.binary(max_size=160))
            sections[name] = np.frombuffer(
                raw[: len(raw) // dtype.itemsize * dtype.itemsize], dtype=dtype
            ).copy()
        elif kind == "drop":
            del sections[name]
        elif kind == "resize":
            size = draw(st.integers(0, array.size + 4))
            sections[name] = np.resize(array, size) if array.size else np.zeros(size, array.dtype)
        elif kind == "retype":
            dtype = np.dtype(draw(st.sampled_from(DTYPES)))
            raw = array.tobytes()
            sections[name] = np.frombuffer(
                raw[: len(raw) // dtype.itemsize * dtype.itemsize], dtype=dtype
            ).copy()
        elif kind == "add":
            extra = draw(st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=24))
            sections[extra] = np.frombuffer(draw(st.binary(max_size=64)), dtype=np.uint8).copy()
        elif kind == "meta":
            meta: dict[str, object] = json.loads(bytes(base["meta"]))
            field = draw(st.sampled_from([*sorted(meta), "other"]))
            meta[field] = draw(json_values)
            sections["meta"] = np.frombuffer(json_bytes(meta), dtype=np.uint8).copy()
    return sections


@st.composite
def record_edits(draw: st.DrawFn) -> dict[str, NDArray[Any]]:
    """The valid segment with one stored record replaced by arbitrary JSON (checksums re-derived)."""
    sections = {name: np.array(array) for name, array in SEGMENT_SECTIONS.items()}
    records = list(VALID_RECORDS)
    position = draw(st.integers(0, len(records) - 1))
    original: dict[str, object] = json.loads(records[position])
    if draw(st.booleans()):
        field = draw(st.sampled_from(["fields", "text", "time", "other"]))
        original[field] = draw(json_values)
        records[position] = json_bytes(original)
    else:
        records[position] = json_bytes(draw(json_values))
    sections.update({name: materialize(part) for name, part in stored_sections(records).items()})
    return sections


def encode(sections: Mapping[str, NDArray[Any]], inner: bool) -> bytes:
    data = encode_sections(sections)
    return reseal(data) if inner else data


@st.composite
def manifest_bytes(draw: st.DrawFn) -> bytes:
    """Manifests whose body is edited with arbitrary JSON, sealed with the right checksum mostly."""
    outer = json.loads(VALID_MANIFEST)
    body = outer["body"]
    for _ in range(draw(st.integers(1, 3))):
        where = draw(
            st.sampled_from(["body", "body", "segment", "segment", "duplicate", "segments", "outer"])
        )
        if where == "body":
            body[draw(st.sampled_from([*sorted(body), "other"]))] = draw(json_values)
        elif where == "segment" and isinstance(body.get("segments"), list) and body["segments"]:
            entry = body["segments"][draw(st.integers(0, len(body["segments"]) - 1))]
            if isinstance(entry, dict):
                fields = [
                    "name",
                    "documents",
                    "deletes",
                    "deleted",
                    "size",
                    "checksum",
                    "deletes_size",
                    "deletes_checksum",
                    "x",
                ]
                entry[draw(st.sampled_from(fields))] = draw(json_values | st.integers(-1, 2**64))
        elif where == "duplicate" and isinstance(body.get("segments"), list) and body["segments"]:
            # The same entry again, under its own name or under another (identity rules).
            entry = body["segments"][draw(st.integers(0, len(body["segments"]) - 1))]
            body["segments"].append(dict(entry) if isinstance(entry, dict) else entry)
        elif where == "segments":
            body["segments"] = draw(json_values)
        else:
            outer[draw(st.sampled_from(["body", "crc32c", "other"]))] = draw(json_values)
    if draw(st.integers(0, 9)) and isinstance(outer.get("body"), (dict, list)):
        canonical = json.dumps(outer["body"], sort_keys=True, separators=(",", ":")).encode(
            "utf-8", "surrogatepass"
        )
        outer["crc32c"] = checksum(canonical)
    return json.dumps(outer, sort_keys=True, indent=1).encode("utf-8", "surrogatepass")


@st.composite
def tombstone_files(draw: st.DrawFn) -> tuple[bytes, int, int]:
    """Tombstone sections of arbitrary type and content, and manifest counts to read them with."""
    documents = draw(st.integers(0, 40))
    deleted = draw(st.integers(0, documents))
    mask = np.zeros(documents, dtype=bool)
    mask[:deleted] = True
    sections: dict[str, NDArray[Any]] = {
        "bits": np.packbits(mask.astype(np.uint8), bitorder="little"),
        "count": np.array([documents, deleted], dtype=np.uint64),
    }
    for name in draw(st.lists(st.sampled_from(["bits", "count"]), max_size=2)):
        dtype = np.dtype(draw(st.sampled_from(DTYPES)))
        values = draw(st.lists(_values_for(dtype), max_size=6))
        sections[name] = np.array(values, dtype=dtype) if values else np.zeros(0, dtype)
    return encode_sections(sections), documents, deleted


# ---------------------------------------------------------------------- the fuzz targets


def check_section_file(data: bytes) -> None:
    with deadline():
        exercise_section_file(data)


def check_segment(data: bytes) -> None:
    with deadline():
        exercise_section_file(data)
        exercise_segment(data)


def check_manifest(data: bytes) -> None:
    with deadline():
        exercise_manifest(data)


def check_tombstones(data: bytes, documents: int, deleted: int) -> None:
    with deadline():
        exercise_tombstones(data, documents, deleted)


section_file_inputs = (
    st.binary(max_size=400)
    | st.binary(max_size=400).map(lambda tail: MAGIC + tail)
    | st.binary(min_size=56, max_size=600).map(lambda tail: reseal(MAGIC + tail))
    | st.sampled_from([VALID_SEGMENT, EMPTY_SEGMENT, VALID_TOMBSTONES]).flatmap(byte_mutations)
)


@FAST
@given(section_file_inputs)
@example(b"")
@example(MAGIC + bytes(56))
@example(reseal(MAGIC + struct.pack("<IIQ", 1, 5000, 0) + bytes(44)))  # 5000 table entries claimed
@example(encode_sections({}))  # no sections at all: verify() must still work
@example(reseal(encode_sections({}) + b"\x01" * 64))  # no sections, garbage after the table
@example(HOLE_BEFORE_FIRST_SECTION)  # bytes no checksum covers
def test_section_file_decodes_or_refuses(data: bytes) -> None:
    check_section_file(data)


segment_inputs = st.sampled_from([VALID_SEGMENT, EMPTY_SEGMENT]).flatmap(byte_mutations)


@FAST
@given(segment_inputs, st.booleans())
@example(VALID_SEGMENT, False)
@example(EMPTY_SEGMENT, True)
@example(VALID_SEGMENT[:-1], True)
def test_segment_mutated_bytes(data: bytes, sealed: bool) -> None:
    check_segment(reseal(data) if sealed else data)


@FAST
@given(section_edits(SEGMENT_SECTIONS), st.booleans())
def test_segment_structured_edits(sections: dict[str, NDArray[Any]], inner: bool) -> None:
    check_segment(encode(sections, inner))


def _with_meta(**changes: object) -> dict[str, NDArray[Any]]:
    sections = {name: np.array(array) for name, array in SEGMENT_SECTIONS.items()}
    meta = {**json.loads(bytes(sections["meta"])), **changes}
    sections["meta"] = np.frombuffer(json_bytes(meta), dtype=np.uint8).copy()
    return sections


def _with_record(record: bytes, position: int = 0) -> dict[str, NDArray[Any]]:
    sections = {name: np.array(array) for name, array in SEGMENT_SECTIONS.items()}
    records = list(VALID_RECORDS)
    records[position] = record
    sections.update({name: materialize(part) for name, part in stored_sections(records).items()})
    return sections


@FAST
@given(record_edits())
@example(_with_record(b'{"fields":{},"text":"x","time":' + b"1" * 401 + b"}"))  # time 10**400
@example(_with_record(b"[" * 100_000 + b"]" * 100_000))  # nesting past the recursion limit
@example(_with_record(b'{"fields":{"a":[1,{"b":null}]},"text":"x","time":null}'))  # fields not scalar
def test_segment_stored_records(sections: dict[str, NDArray[Any]]) -> None:
    check_segment(encode_sections(sections))


def _meta_case(drop: str | None = None, **changes: object) -> bytes:
    sections = _with_meta(**changes)
    if drop is not None:
        meta = json.loads(bytes(sections["meta"]))
        del meta[drop]
        sections["meta"] = np.frombuffer(json_bytes(meta), dtype=np.uint8).copy()
    if "vector_dim" in changes or drop == "vector_dim":
        sections["vec.matrix"] = np.zeros(0, np.float32)
        sections["vec.rows"] = np.full(sections["vec.rows"].shape, -1, np.int32)
    return encode_sections(sections)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(_meta_case(drop="vector_dim"), id="vector-dim-missing"),
        pytest.param(_meta_case(vector_dim=10**30, vectors=0), id="vector-dim-10e30"),
        pytest.param(_meta_case(vector_dim=2**62, vectors=0), id="vector-dim-2e62"),
        pytest.param(_meta_case(vector_dim=True, vectors=0), id="vector-dim-true"),
        pytest.param(_meta_case(documents=True), id="documents-true"),
        pytest.param(_meta_case(documents=2**62), id="documents-2e62"),
        pytest.param(_meta_case(terms=10**30), id="terms-10e30"),
        pytest.param(_meta_case(drop="documents"), id="documents-missing"),
    ],
)
def test_segment_meta_edge_cases(data: bytes) -> None:
    check_segment(data)


@pytest.mark.parametrize("field", ["documents", "terms", "postings", "links", "vectors", "blocks"])
@pytest.mark.parametrize("value", [10**6, 10**9, 10**12, 2**40 - 1])
def test_claimed_counts_allocate_nothing(field: str, value: int) -> None:
    """A segment claiming huge counts (valid checksums) is refused at open, before allocating by them."""
    data = _meta_case(None, **{field: value})
    tracemalloc.start()
    try:
        with pytest.raises(CorruptIndexError, match="elements"):
            SegmentReader(FUZZ_PATH, data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20


def test_segment_meta_nesting() -> None:
    sections = {name: np.array(array) for name, array in SEGMENT_SECTIONS.items()}
    sections["meta"] = np.frombuffer(b"[" * 100_000, dtype=np.uint8).copy()
    check_segment(encode_sections(sections))


manifest_inputs = (
    st.binary(max_size=300) | byte_mutations(VALID_MANIFEST) | manifest_bytes() | json_values.map(json_bytes)
)


@FAST
@given(manifest_inputs)
@example(VALID_MANIFEST)
@example(b"\xff\xfe\x00")
@example(b"[" * 100_000)  # RecursionError from json.loads
@example(VALID_MANIFEST.replace(b'"generation": 4', b'"generation": 1e400'))  # checksum mismatch first
def test_manifest_decodes_or_refuses(data: bytes) -> None:
    check_manifest(data)


def _sealed_manifest(**changes: object) -> bytes:
    body = {**json.loads(VALID_MANIFEST)["body"], **changes}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return json.dumps({"body": body, "crc32c": checksum(canonical)}).encode()


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(_sealed_manifest(generation=math.inf), id="generation-infinity"),
        pytest.param(_sealed_manifest(vector_dim=-math.inf), id="vector-dim-infinity"),
        pytest.param(_sealed_manifest(next_segment=math.nan), id="next-segment-nan"),
        pytest.param(_sealed_manifest(extra=[1, 2]), id="extra-not-a-mapping"),
        pytest.param(_sealed_manifest(version=2), id="version-2"),
        pytest.param(_sealed_manifest(segments={"a": 1}), id="segments-a-mapping"),
    ],
)
def test_manifest_sealed_edge_cases(data: bytes) -> None:
    check_manifest(data)


tombstone_inputs = (
    tombstone_files()
    | st.tuples(byte_mutations(VALID_TOMBSTONES), st.just(len(TOMBSTONE_MASK)), st.just(3))
    | st.tuples(byte_mutations(VALID_TOMBSTONES).map(reseal), st.integers(0, 20), st.integers(0, 20)).filter(
        lambda t: t[2] <= t[1]
    )
)


def _tombstones(bits: NDArray[Any], count: NDArray[Any]) -> bytes:
    return encode_sections({"bits": bits, "count": count})


@FAST
@given(tombstone_inputs)
@example((VALID_TOMBSTONES, len(TOMBSTONE_MASK), 3))
@example((_tombstones(np.array([0x12], np.uint8), np.array([math.nan, 2.0])), 5, 2))  # NaN count
@example((_tombstones(np.array([0x12], np.uint8), np.array([math.inf, 2.0])), 5, 2))  # infinite count
@example((_tombstones(np.array([18.0]), np.array([5, 2], np.uint64)), 5, 2))  # float bits
def test_tombstones_decode_or_refuse(case: tuple[bytes, int, int]) -> None:
    check_tombstones(*case)


# ---------------------------------------------------------------------- scrub completeness


def _with_posting(position: int, value: int) -> bytes:
    """The valid segment with ``post.data[position]`` (packed words) set to ``value``, checksums valid."""
    sections = {name: np.array(array) for name, array in SEGMENT_SECTIONS.items()}
    sections["post.data"][position] = value
    return encode(sections, inner=True)


def _with_block_value(position: int, delta: int) -> bytes:
    """The valid segment with ``post.blocks[position]`` moved by ``delta``, every checksum valid."""
    sections = {name: np.array(array) for name, array in SEGMENT_SECTIONS.items()}
    blocks = sections["post.blocks"]
    blocks[position] = (int(blocks[position]) + delta) % 2**32
    return encode(sections, inner=True)


def _with_block_offsets(offsets: list[int]) -> bytes:
    sections = {name: np.array(array) for name, array in SEGMENT_SECTIONS.items()}
    sections["post.block_offsets"] = np.array(offsets, dtype=np.uint64)
    return encode(sections, inner=True)


def _with_data_offsets(offsets: list[int]) -> bytes:
    sections = {name: np.array(array) for name, array in SEGMENT_SECTIONS.items()}
    sections["post.data_offsets"] = np.array(offsets, dtype=np.uint64)
    return encode(sections, inner=True)


def _first_term_with_words() -> int:
    """The first term whose packed run is not empty (its block header has a non-zero width)."""
    offsets = SEGMENT_SECTIONS["post.data_offsets"].astype(np.int64)
    return int(np.flatnonzero(np.diff(offsets))[0])


#: Crafted block metadata and packed postings (every checksum valid): each bound of the
#: first term's one block understated or overstated, its widths (the block header) wrong or
#: above 32 bits, block offsets and data offsets that cut the tables wrongly, packed words
#: changed.
_BLOCK_TERMS = int(json.loads(bytes(SEGMENT_SECTIONS["meta"]))["terms"])
_WORDS = int(SEGMENT_SECTIONS["post.data"].shape[0])
_WITH_WORDS = _first_term_with_words()
_DATA_OFFSETS = SEGMENT_SECTIONS["post.data_offsets"].astype(np.int64).tolist()
BLOCK_CASES = {
    "last-id-minus-1": _with_block_value(0, -1),
    "last-id-plus-1": _with_block_value(0, 1),
    "max-tf-minus-1": _with_block_value(1, -1),
    "max-tf-plus-1": _with_block_value(1, 1),
    "min-length-plus-1": _with_block_value(2, 1),
    "min-length-minus-1": _with_block_value(2, -1),
    "id-width-plus-1": _with_block_value(3, 1),
    "tf-width-plus-1": _with_block_value(3, 1 << 8),
    "id-width-33": _with_block_value(3, 33 - int(SEGMENT_SECTIONS["post.blocks"][3] & 0xFF)),
    "width-stray-bits": _with_block_value(3, 1 << 16),
    "offsets-shifted": _with_block_offsets([0, 0, *range(2, _BLOCK_TERMS + 1)]),
    "data-offsets-shifted": _with_data_offsets(
        [*_DATA_OFFSETS[: _WITH_WORDS + 1], *[o + 1 for o in _DATA_OFFSETS[_WITH_WORDS + 1 : -1]], _WORDS]
    ),
    "word-flipped": _with_posting(
        _DATA_OFFSETS[_WITH_WORDS], int(SEGMENT_SECTIONS["post.data"][_DATA_OFFSETS[_WITH_WORDS]]) ^ 0x5
    ),
}


@FAST
@given(
    st.sampled_from([VALID_SEGMENT, EMPTY_SEGMENT]).flatmap(byte_mutations)
    | section_edits(SEGMENT_SECTIONS).map(lambda sections: encode(sections, True))
)
@example(VALID_SEGMENT)
@example(_with_posting(0, 7 << 3))  # packed words changed, checksums re-derived
@example(BLOCK_CASES["max-tf-minus-1"])  # a bound understated, checksums re-derived
def test_clean_verify_means_clean_reads(data: bytes) -> None:
    """If ``verify()`` (scrub) reports nothing, no read of the segment may fail."""
    with deadline():
        data = reseal(data)
        reader = open_segment(data)
        if reader is None or reader.verify():
            return
        failed = read_everything(reader)
        assert not failed, f"verify() found nothing, but these reads failed: {failed}"


@pytest.mark.parametrize("label", sorted(BLOCK_CASES))
def test_crafted_block_metadata_is_caught(label: str) -> None:
    """Block metadata unlike its postings (checksums valid): scrub names it, first use refuses it."""
    data = BLOCK_CASES[label]
    with deadline():
        exercise_segment(data)
        reader = open_segment(data)
        assert reader is not None  # the counts are all consistent: the damage is only in the values
        assert any("block" in problem for problem in reader.verify()), reader.verify()
        clean = SegmentReader(FUZZ_PATH, VALID_SEGMENT)
        first = clean.terms()[0]
        with pytest.raises(CorruptIndexError, match="block"):
            reader.term_blocks(first)
        assert clean.term_blocks(first)[2].size == 4  # one block: last id, max tf, min length, widths


# ---------------------------------------------------------------------- the corpus


def regression_inputs() -> dict[str, bytes]:
    """The checked-in corpus, in :func:`feed` format: valid seeds and the crashes found so far.

    ``PYTHONPATH=src python -m tests.storage.test_fuzz`` rewrites these files;
    inputs found by atheris are added to the corpus by hand, under crashes/.
    """
    flipped = bytearray(VALID_SEGMENT)
    flipped[len(flipped) // 2] ^= 0xFF
    nested = {name: np.array(array) for name, array in SEGMENT_SECTIONS.items()}
    nested["meta"] = np.frombuffer(b"[" * 5000, dtype=np.uint8).copy()
    nan_count = _tombstones(np.array([0x12], np.uint8), np.array([math.nan, 2.0]))
    inf_count = _tombstones(np.array([0x12], np.uint8), np.array([math.inf, 2.0]))
    return {
        "seeds/section-file-segment.bin": b"\x00" + VALID_SEGMENT,
        "seeds/section-file-magic-only.bin": b"\x00" + MAGIC + bytes(56),
        "seeds/segment-valid.bin": b"\x01" + VALID_SEGMENT,
        "seeds/segment-empty.bin": b"\x01" + EMPTY_SEGMENT,
        "seeds/segment-flipped-resealed.bin": b"\x81" + bytes(flipped),
        "seeds/manifest-valid.bin": b"\x02" + VALID_MANIFEST,
        "seeds/tombstones-valid.bin": b"\x03" + bytes([len(TOMBSTONE_MASK), 3]) + VALID_TOMBSTONES,
        "seeds/tombstones-wrong-counts.bin": b"\x03" + bytes([8, 3]) + VALID_TOMBSTONES,
        "crashes/manifest-deep-nesting.bin": b"\x02" + b"[" * 5000,
        "crashes/manifest-generation-infinity.bin": b"\x02" + _sealed_manifest(generation=math.inf),
        "crashes/tombstones-nan-count.bin": b"\x03" + bytes([5, 2]) + nan_count,
        "crashes/tombstones-infinite-count.bin": b"\x03" + bytes([5, 2]) + inf_count,
        "crashes/segment-meta-deep-nesting.bin": b"\x01" + encode_sections(nested),
        "crashes/segment-vector-dim-huge.bin": b"\x01" + _meta_case(vector_dim=10**30, vectors=0),
        "crashes/segment-meta-without-vector-dim.bin": b"\x01" + _meta_case(drop="vector_dim"),
        "crashes/section-file-no-sections.bin": b"\x00" + encode_sections({}),
        "crashes/section-file-hole-before-first-section.bin": b"\x00" + HOLE_BEFORE_FIRST_SECTION,
        "crashes/segment-record-time-10e400.bin": b"\x01"
        + encode_sections(_with_record(b'{"fields":{},"text":"x","time":' + b"1" * 401 + b"}")),
        "crashes/segment-record-deep-nesting.bin": b"\x01" + encode_sections(_with_record(b"[" * 5000)),
        "crashes/segment-claims-1e12-documents.bin": b"\x01" + _meta_case(None, documents=10**12),
        "crashes/segment-claims-1e11-postings.bin": b"\x01" + _meta_case(None, postings=10**11),
        "crashes/manifest-duplicate-entry.bin": b"\x02" + _duplicated_manifest(),
        "crashes/segment-block-max-tf-understated.bin": b"\x01" + BLOCK_CASES["max-tf-minus-1"],
        "crashes/segment-block-offsets-shifted.bin": b"\x01" + BLOCK_CASES["offsets-shifted"],
        "crashes/segment-packed-width-33.bin": b"\x01" + BLOCK_CASES["id-width-33"],
        "crashes/segment-packed-word-flipped.bin": b"\x01" + BLOCK_CASES["word-flipped"],
        "crashes/segment-packed-data-offsets-shifted.bin": b"\x01" + BLOCK_CASES["data-offsets-shifted"],
    }


def _duplicated_manifest() -> bytes:
    body = json.loads(VALID_MANIFEST)["body"]
    body["segments"].append(dict(body["segments"][0]))
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return json.dumps({"body": body, "crc32c": checksum(canonical)}).encode()


def write_corpus(directory: Path = CORPUS) -> None:
    for name, data in regression_inputs().items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_bytes(data)


def corpus_files() -> list[Path]:
    return sorted(p for p in CORPUS.glob("*/*") if p.is_file()) if CORPUS.is_dir() else []


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_corpus_replay(path: Path) -> None:
    """Every checked-in input (seeds and past crashes) still decodes or is refused cleanly."""
    with deadline():
        feed(path.read_bytes())


def test_corpus_is_present() -> None:
    assert len(corpus_files()) >= 8, "tests/storage/fuzz_corpus/ lost its seeds"


def test_atheris_harness_runs_without_atheris() -> None:
    """fuzz/atheris_decoders.py imports without atheris and replays the seeds through ``feed``."""
    path = Path(__file__).resolve().parents[2] / "fuzz" / "atheris_decoders.py"
    spec = importlib.util.spec_from_file_location("atheris_decoders", path)
    assert spec is not None and spec.loader is not None
    harness = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harness)
    with deadline():
        for seed in sorted((CORPUS / "seeds").iterdir()):
            harness.one_input(seed.read_bytes())
    if harness.atheris is None:
        assert harness.main(["atheris_decoders.py"]) == 2


@FAST
@given(st.binary(max_size=600))
def test_feed_any_bytes(data: bytes) -> None:
    with deadline():
        feed(data)


# ---------------------------------------------------------------------- slow variants


@pytest.mark.slow
@THOROUGH
@given(section_file_inputs)
def test_section_file_thorough(data: bytes) -> None:
    check_section_file(data)


@pytest.mark.slow
@THOROUGH
@given(segment_inputs, st.booleans())
def test_segment_mutated_bytes_thorough(data: bytes, sealed: bool) -> None:
    check_segment(reseal(data) if sealed else data)


@pytest.mark.slow
@THOROUGH
@given(section_edits(SEGMENT_SECTIONS), st.booleans())
def test_segment_structured_edits_thorough(sections: dict[str, NDArray[Any]], inner: bool) -> None:
    check_segment(encode(sections, inner))


@pytest.mark.slow
@THOROUGH
@given(record_edits())
def test_segment_stored_records_thorough(sections: dict[str, NDArray[Any]]) -> None:
    check_segment(encode_sections(sections))


@pytest.mark.slow
@THOROUGH
@given(manifest_inputs)
def test_manifest_thorough(data: bytes) -> None:
    check_manifest(data)


@pytest.mark.slow
@THOROUGH
@given(tombstone_inputs)
def test_tombstones_thorough(case: tuple[bytes, int, int]) -> None:
    check_tombstones(*case)


if __name__ == "__main__":
    write_corpus()
