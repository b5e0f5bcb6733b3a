"""Corruption sweeps: damage every file of a small committed index, byte by byte.

The index (built once per module) holds 14 documents with text, vectors,
links, times and fields in two segments, with one tombstone file (a delete
and an upsert into the first segment). The golden answers are read from the
pristine directory: every key's stored document (or its absence) and the
ranked keys, fused scores and per-signal ranks and scores of a fixed set of
text, vector, hybrid, graph and recency queries.

Each damaged copy is opened read-only, scrubbed, read key by key with
``get`` and searched with every query. Every case must end in one of:

* ``refused``: ``Index.open`` raised ``CorruptIndexError``/``FormatVersionError``;
* ``error``: a later read raised one of them (the first read touching the damage);
* ``absent``: a damaged stored document is reported absent (``UnknownKeyError``
  saying it is damaged, and left out of search hits) while everything else,
  the other hits' order, scores and explanations included, equals the golden answers;
* ``scrub-only``: every read equals the golden answers (the damage is in bytes
  no read needs, such as padding) and ``scrub()`` names it.

In every case that open did not refuse, ``scrub()`` must report a problem.
Never another exception type, never a wrong document, ranking or score,
never a hang: each case runs under a ``SIGALRM`` deadline (``CASE_SECONDS``).

Sampling. Flips XOR a byte with 0xFF. The default run flips every byte of
the MANIFEST and of the tombstone file, and, in each segment (about 4 KB),
every byte of the header, the section table and the zero gap after it, the
first 4 and last 4 bytes of every section and the first byte of its padding,
plus every 4th byte elsewhere. The ``slow`` sweep flips every byte of every
file both with 0xFF and with a single bit (bit ``offset % 8``). Truncations
cut every file at every 1/50th of its length, at every section and padding
boundary, at 1 and at length - 1; extensions append one 0xFF byte and 64
zero bytes. Version cases set the header's (or manifest's) format version to
2 with every checksum re-sealed, and must end in ``FormatVersionError``.
Inner-checksum cases damage each stored record and each term's postings and
re-seal the section checksum, so only the per-record and per-term checksums
can notice. Block-metadata cases move every value of ``post.blocks`` and
``post.block_offsets`` by one either way with every checksum re-sealed, so only
the block checks can notice, with BM25 both exhaustive and compiled (the path
that reads the blocks). ``write.lock`` (empty, never read by readers) is not swept.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import shutil
import socket
import struct
import tempfile
import time
import traceback
import tracemalloc
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import weftsearch.scorers.bm25 as bm25_module
from tests.storage.alarms import alarm
from weftsearch import (
    RRF,
    BM25Scorer,
    Document,
    Fuser,
    GraphScorer,
    Index,
    PageRankScorer,
    Query,
    RecencyScorer,
    ScoreFusion,
    Scorer,
    SearchResults,
    VectorScorer,
)
from weftsearch.errors import CorruptIndexError, FormatVersionError, UnknownKeyError
from weftsearch.native import bm25 as kernel
from weftsearch.storage import FORMAT_VERSION, LOCK, MANIFEST, SectionFile, checksum, scrub_directory
from weftsearch.storage.codec import FileStamp, encode_sections, read_stamp, stamped_header
from weftsearch.storage.segment import POSTINGS_BLOCK

#: Wall-clock limit of one damaged case (open, scrub, every get, every query).
CASE_SECONDS = 10.0
ALLOWED = (CorruptIndexError, FormatVersionError)
DIM = 8
WORDS = [
    "graph",
    "search",
    "vector",
    "sparse",
    "dense",
    "retrieval",
    "ranking",
    "fusion",
    "citation",
    "recency",
    "index",
    "query",
    "term",
    "segment",
    "merge",
    "tombstone",
]
KEYS = [f"doc-{i:02d}" for i in range(14)]
QUERY_VECTOR = np.random.default_rng(99).standard_normal(DIM).astype(np.float32)


# ---------------------------------------------------------------------- the index


def make_document(i: int, version: int = 0) -> Document:
    rng = np.random.default_rng(1000 * version + i)
    text = " ".join(str(w) for w in rng.choice(WORDS, size=int(rng.integers(3, 10))))
    return Document(
        KEYS[i],
        f"{text} {'upserted' if version else ''}",
        vector=rng.standard_normal(DIM).astype(np.float32),
        links=tuple(KEYS[(3 * i + j) % len(KEYS)] for j in range(1, 1 + i % 4)),
        time=1.7e9 + 86400.0 * i + 3600.0 * version,
        fields={
            "title": f"Title {i} é",
            "year": 2000 + i,
            "weight": i / 4,
            "even": i % 2 == 0,
            "tags": [f"t{i % 3}", f"t{i % 5}"],  # list fields (issue 30)
            "scores": [i % 4, i / 2],
        },
    )


def build_index(path: Path) -> None:
    """Two segments, one tombstone file (doc-03 deleted, doc-05 upserted into segment 2)."""
    with Index.create(path, vector_dim=DIM) as index:
        index.add_many([make_document(i) for i in range(7)])
        index.commit()
        index.add_many([make_document(i) for i in range(7, 14)])
        index.add(make_document(5, version=1))
        index.delete("doc-03")
        index.commit()


def _hits(results: SearchResults) -> list[dict[str, object]]:
    return [hit.to_dict() for hit in results]


def _probe(query: Query, k: int, fuser: Fuser, *scorers: Scorer) -> Callable[[Index], object]:
    def run(index: Index) -> object:
        return _hits(index.search(query, k, fuser, *scorers))

    return run


#: The fixed reads compared with the golden answers (besides every ``get``).
PROBES: tuple[tuple[str, Callable[[Index], object]], ...] = (
    ("text", _probe(Query("graph search"), 10, RRF(), BM25Scorer())),
    (
        "hybrid",
        _probe(Query("vector retrieval", vector=QUERY_VECTOR), 10, RRF(), BM25Scorer(), VectorScorer()),
    ),
    ("vector-k-beyond-corpus", _probe(Query(vector=QUERY_VECTOR), 50, RRF(), VectorScorer())),
    (
        "graph-explicit-seeds",
        _probe(Query(seeds=("doc-01", "doc-09")), 20, RRF(), GraphScorer(keep_seeds=True)),
    ),
    (
        "graph-seeded-by-text",
        _probe(
            Query("citation ranking merge"),
            10,
            RRF(),
            BM25Scorer(),
            GraphScorer(BM25Scorer(), seed_n=3),
            PageRankScorer(BM25Scorer(), seed_n=3),
        ),
    ),
    (
        "recency",
        _probe(Query("index term"), 10, ScoreFusion(), BM25Scorer(), RecencyScorer(timedelta(days=3))),
    ),
    ("upserted-text", _probe(Query("upserted"), 10, RRF(), BM25Scorer())),
    # Filters read the field indexes (fld.* sections) and the time column.
    (
        "filtered-hybrid",
        _probe(
            Query("vector retrieval", vector=QUERY_VECTOR, filter="year >= 2004 and even == true"),
            10,
            RRF(),
            BM25Scorer(),
            VectorScorer(),
        ),
    ),
    (
        "filtered-text",
        _probe(
            Query("index term", filter="title in ('Title 3 é', 'Title 8 é') or weight < 1"),
            10,
            RRF(),
            BM25Scorer(),
        ),
    ),
    ("empty-result", _probe(Query("zzzunknownword"), 10, RRF(), BM25Scorer(), VectorScorer())),
    ("keys", lambda index: index.keys()),
    ("len", len),
)

DocSignature = tuple[object, ...]


def signature(document: Document) -> DocSignature:
    """Everything a stored document carries, bit-exact (vector bytes, field types)."""
    vector = None if document.vector is None else document.vector.tobytes()
    fields = tuple(sorted((k, type(v).__name__, v) for k, v in document.fields.items()))
    return (document.key, document.text, vector, document.links, document.timestamp, fields)


@dataclass(frozen=True)
class Golden:
    """The pristine index's answers. ``documents[key]`` is ``None`` for an absent key."""

    documents: dict[str, DocSignature | None]
    probes: dict[str, object]
    owner: dict[str, str]  # key -> the segment file holding its live copy


def read_golden(path: Path) -> Golden:
    index = Index.open(path, readonly=True)
    assert index.scrub().ok
    documents: dict[str, DocSignature | None] = {}
    for key in [*KEYS, "doc-99"]:
        try:
            documents[key] = signature(index.get(key))
        except UnknownKeyError:
            documents[key] = None
    probes = {name: probe(index) for name, probe in PROBES}
    # By construction: segment 1 holds doc-00..06 (doc-03 deleted, doc-05 superseded),
    # segment 2 holds doc-07..13 and the upserted doc-05.
    owner = {key: "seg-000001.wseg" for key in KEYS[:7] if key not in ("doc-03", "doc-05")}
    owner.update({key: "seg-000002.wseg" for key in [*KEYS[7:], "doc-05"]})
    index.close()
    return Golden(documents, probes, owner)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pristine") / "index"
    build_index(path)
    return path


@pytest.fixture(scope="module")
def golden(pristine: Path) -> Golden:
    with deadline(CASE_SECONDS):
        return read_golden(pristine)


def test_fixture_index_shape(pristine: Path, golden: Golden) -> None:
    names = sorted(p.name for p in pristine.iterdir())
    assert names == [MANIFEST, "seg-000001.del-000004", "seg-000001.wseg", "seg-000002.wseg", LOCK]
    assert golden.documents["doc-03"] is None and golden.documents["doc-99"] is None
    assert sum(d is not None for d in golden.documents.values()) == 13
    upserted = golden.documents["doc-05"]
    assert upserted is not None and "upserted" in str(upserted[1])
    assert golden.probes["len"] == 13
    for name in ("text", "hybrid", "graph-explicit-seeds", "graph-seeded-by-text", "recency"):
        assert golden.probes[name], name  # every probe has hits to compare
    assert golden.probes["empty-result"] == []


# ---------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    """One damaged copy of one file."""

    file: str
    label: str
    data: bytes
    expect: type[Exception] | None = None  # an outcome that must be exactly this error at open
    region: str = ""  # what the damaged byte belonged to (header, table, a section, padding)
    also: tuple[tuple[str, bytes], ...] = ()  # other files replaced too (a swap, a re-sealed manifest)


def regions(data: bytes) -> list[tuple[int, int, str]]:
    """(start, end, name) spans of a section file, read from its table as docs/FORMAT.md lays it out."""
    count = struct.unpack_from("<I", data, 12)[0]
    table_end = 64 + 64 * count
    data_start = table_end + (-table_end) % 64
    spans = [(0, 64, "header"), (64, table_end, "table"), (table_end, data_start, "table-gap")]
    extents = []
    for position in range(count):
        raw_name, _, offset, length, _, _ = struct.unpack_from("<24s8sQQQI", data, 64 + 64 * position)
        extents.append((int(offset), int(offset + length), raw_name.rstrip(b"\x00").decode("ascii")))
    for position, (start, end, name) in enumerate(extents):
        following = extents[position + 1][0] if position + 1 < len(extents) else len(data)
        spans.append((start, end, name))
        spans.append((end, following, f"padding after {name}"))
    return [span for span in spans if span[1] > span[0]]


def region_of(spans: list[tuple[int, int, str]], offset: int) -> str:
    for start, end, name in spans:
        if start <= offset < end:
            return name
    return "whole file"


#: Offsets within a section-table entry the sampled sweep flips: each field's first and last byte.
_TABLE_ENTRY_PROBES = (0, 23, 24, 31, 32, 39, 40, 47, 48, 55, 56, 59, 60, 63)


def sampled_offsets(data: bytes, spans: list[tuple[int, int, str]] | None, full: bool) -> list[int]:
    if full or spans is None or len(data) <= 1024:
        return list(range(len(data)))
    # The header whole; of each 64-byte table entry (which the table CRC32C covers as one), the
    # first and last byte of every field (name, element type, offset, length, count, CRC, zero
    # pad): each field's own check and the table checksum are reached, without the 50 other
    # bytes that reach the same ones (the full sweep flips them all).
    chosen: set[int] = set(range(min(len(data), 64)))
    for start, end, name in spans:
        if name == "table":
            for entry in range(start, end, 64):
                chosen.update(entry + cut for cut in _TABLE_ENTRY_PROBES)
        elif name == "table-gap":
            chosen.update((start, end - 1))
    for start, end, name in spans:
        if name.startswith("padding"):
            chosen.add(start)
        elif name not in ("header", "table", "table-gap"):
            chosen.update(range(start, min(end, start + 4)))
            chosen.update(range(max(start, end - 4), end))
    # Every 8th byte of the rest (the full sweep, -m slow, flips every byte two ways).
    chosen.update(range(0, len(data), 8))
    return sorted(chosen)


def flip_cases(name: str, data: bytes, full: bool) -> list[Case]:
    spans = regions(data) if name != MANIFEST else None
    cases = []
    for offset in sampled_offsets(data, spans, full):
        where = region_of(spans, offset) if spans else "manifest"
        patterns = [0xFF, 1 << (offset % 8)] if full else [0xFF]
        for pattern in patterns:
            damaged = bytearray(data)
            damaged[offset] ^= pattern
            label = f"xor {pattern:#04x} at {offset} ({where})"
            cases.append(
                Case(name, label, bytes(damaged), region=where.replace("padding after ", "padding:"))
            )
    return cases


def cut_points(name: str, data: bytes) -> list[int]:
    points = {len(data) * i // 50 for i in range(50)} | {1, len(data) - 1}
    if name != MANIFEST:
        for start, end, _ in regions(data):
            points.update((start, end))
    else:
        points.update(i for i, byte in enumerate(data) if byte == ord("\n"))
    return sorted(p for p in points if 0 <= p < len(data))


def truncation_cases(name: str, data: bytes) -> list[Case]:
    cases = [Case(name, f"truncated to {n} of {len(data)} bytes", data[:n]) for n in cut_points(name, data)]
    cases.append(Case(name, "extended by one 0xff byte", data + b"\xff"))
    cases.append(Case(name, "extended by 64 zero bytes", data + bytes(64)))
    return cases


def version_cases(name: str, data: bytes) -> list[Case]:
    """The format version set to the next one and to the previous one, every checksum re-sealed.

    Each must be FormatVersionError (an older file is refused too: it would be misread).
    """
    cases = []
    for version in (FORMAT_VERSION + 1, FORMAT_VERSION - 1):
        if name == MANIFEST:
            body = json.loads(data)["body"]
            body["version"] = version
            label = f"manifest version {version}, re-sealed"
            cases.append(Case(name, label, seal_manifest(body), FormatVersionError))
            continue
        damaged = bytearray(data)
        struct.pack_into("<I", damaged, 8, version)
        struct.pack_into("<I", damaged, 28, checksum(bytes(damaged[:28]) + bytes(damaged[32:64])))
        label = f"section-file version {version}, header re-sealed"
        cases.append(Case(name, label, bytes(damaged), FormatVersionError))
    return cases


def seal_manifest(body: dict[str, Any]) -> bytes:
    """A manifest with ``body`` and a correct CRC32C."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return json.dumps({"body": body, "crc32c": checksum(canonical)}, sort_keys=True, indent=1).encode()


def recorded(manifest: bytes, name: str, data: bytes, **changes: Any) -> bytes:
    """``manifest`` re-sealed to record ``data`` as file ``name`` (size, checksum), plus ``changes``.

    A crafted file with a manifest that agrees with it: only the identity rules
    (stamp, counts, width) can refuse the pair.
    """
    body = json.loads(manifest)["body"]
    identity = SectionFile(Path(name), data).identity
    for entry in body["segments"]:
        if entry["name"] == name:
            entry.update(size=len(data), checksum=identity, **changes)
        elif entry["deletes"] == name:
            entry.update(deletes_size=len(data), deletes_checksum=identity, **changes)
    return seal_manifest(body)


def reseal_section(data: bytearray, name: str) -> None:
    """Recompute section ``name``'s CRC32C in the table, then the table's and the header's."""
    count = struct.unpack_from("<I", data, 12)[0]
    table_end = 64 + 64 * count
    for position in range(count):
        at = 64 + 64 * position
        raw_name, _, offset, length, _, _ = struct.unpack_from("<24s8sQQQI", data, at)
        if raw_name.rstrip(b"\x00").decode("ascii") == name:
            struct.pack_into("<I", data, at + 56, checksum(bytes(data[offset : offset + length])))
    struct.pack_into("<I", data, 24, checksum(bytes(data[64 : table_end + (-table_end) % 64])))
    struct.pack_into("<I", data, 28, checksum(bytes(data[:28]) + bytes(data[32:64])))


def inner_checksum_cases(name: str, data: bytes, manifest: bytes) -> list[Case]:
    """Damage one stored record, or one term's postings, and re-seal the section checksum.

    Only the per-block (``stored.block_crc``) and per-term (``post.crc``) checksums
    can then notice: a damaged record must read as absent, a damaged posting
    list must fail the query that reads it, and scrub must name both.
    """
    spans = {section: (start, end) for start, end, section in regions(data)}
    blob_start = spans["stored.blob"][0]
    table_start, table_end = spans["stored.blocks"]
    # Version 4: records sit in compressed blocks (five <u8 a block: first record, offset,
    # length, raw length, method); a damaged block makes its records absent.
    table = np.frombuffer(data[table_start:table_end], dtype="<u8").reshape(-1, 5).tolist()
    cases = []
    for block, (first, at, packed, _, _) in enumerate(table):
        damaged = bytearray(data)
        damaged[blob_start + at + packed // 2] ^= 0xFF
        reseal_section(damaged, "stored.blob")
        label = f"stored block {block} (from record {first}) damaged, section checksum re-sealed"
        # The manifest records the re-sealed table: else the identity check refuses the file at open.
        also = ((MANIFEST, recorded(manifest, name, bytes(damaged))),)
        cases.append(Case(name, label, bytes(damaged), region=f"block:{block}", also=also))
    data_start = spans["post.data"][0]
    offsets_start, offsets_end = spans["post.data_offsets"]
    bounds = np.frombuffer(data[offsets_start:offsets_end], dtype="<u8").tolist()
    for term, (first, last) in enumerate(itertools.pairwise(bounds)):
        if last > first:
            damaged = bytearray(data)
            damaged[data_start + 4 * first] ^= 0x01
            reseal_section(damaged, "post.data")
            label = f"packed postings of term {term} damaged, section checksum re-sealed"
            also = ((MANIFEST, recorded(manifest, name, bytes(damaged))),)
            cases.append(Case(name, label, bytes(damaged), region="postings", also=also))
    return cases


def packed_postings_cases(name: str, data: bytes, manifest: bytes) -> list[Case]:
    """Every word of ``post.data`` (the packed postings) with one bit flipped, the section re-sealed.

    Only the term's own checksum (``post.crc``) and the decoder's checks can then notice:
    the query reading the term must fail, scrub must name it. (With ``post.crc`` recomputed
    too, a flipped tf bit is a different valid index: no reader can tell it from one written
    so; ``tests/storage/test_packed_postings.py`` covers what the decoder itself must refuse.)
    """
    spans = {section: (start, end) for start, end, section in regions(data)}
    data_start, data_end = spans["post.data"]
    offsets_start, offsets_end = spans["post.data_offsets"]
    bounds = np.frombuffer(data[offsets_start:offsets_end], dtype="<u8").tolist()
    cases = []
    for term, (first, last) in enumerate(itertools.pairwise(bounds)):
        for word in range(first, last):
            for bit in (0, 7, 31):
                damaged = bytearray(data)
                at = data_start + 4 * word
                value = int.from_bytes(damaged[at : at + 4], "little") ^ (1 << bit)
                damaged[at : at + 4] = value.to_bytes(4, "little")
                reseal_section(damaged, "post.data")
                label = f"post.data[{word}] (term {term}) bit {bit} flipped, section re-sealed"
                also = ((MANIFEST, recorded(manifest, name, bytes(damaged))),)
                cases.append(Case(name, label, bytes(damaged), region="post.data", also=also))
    assert data_end > data_start
    return cases


def block_metadata_cases(name: str, data: bytes, manifest: bytes) -> list[Case]:
    """Every value of ``post.blocks``, ``post.block_offsets`` and ``post.data_offsets`` moved by +1
    and by -1, everything re-sealed.

    The section checksum, the table's, the header's and the manifest's record of
    the file are all recomputed: a crafted file that only the block checks (first
    use of a term, scrub's re-derivation) can notice. A bound moved either way is
    damage; one moved down (a max tf understated, a min length overstated) could
    make the compiled BM25 skip a block it must read.
    """
    spans = {section: (start, end) for start, end, section in regions(data)}
    cases = []
    sections = (("post.blocks", "<u4"), ("post.block_offsets", "<u8"), ("post.data_offsets", "<u8"))
    for section, dtype in sections:
        start, end = spans[section]
        width = np.dtype(dtype).itemsize
        for at in range(start, end, width):
            value = int.from_bytes(data[at : at + width], "little")
            for delta in (1, -1):
                damaged = bytearray(data)
                damaged[at : at + width] = ((value + delta) % 2 ** (8 * width)).to_bytes(width, "little")
                reseal_section(damaged, section)
                label = f"{section}[{(at - start) // width}] {delta:+d}, re-sealed"
                also = ((MANIFEST, recorded(manifest, name, bytes(damaged))),)
                cases.append(Case(name, label, bytes(damaged), region=section, also=also))
    return cases


def field_index_cases(name: str, data: bytes, manifest: bytes) -> list[Case]:
    """The number values of the field index moved, every checksum re-sealed (issue 26, item 8).

    Each value of ``fld.num_values`` moved by +1 and by -1, and the whole section
    shifted by +1 (a change that keeps every field's values in order): the
    section's, the table's, the header's and the manifest's checksums all agree,
    so only the comparison with the stored records can notice: scrub must name the file.
    """
    start, end = {section: (a, b) for a, b, section in regions(data)}["fld.num_values"]
    values = np.frombuffer(data[start:end], dtype="<f8")
    edits: list[tuple[str, int | None, int]] = [
        (f"fld.num_values[{at}] {delta:+d}", at, delta) for at in range(values.shape[0]) for delta in (1, -1)
    ]
    edits.append(("fld.num_values all +1", None, 1))
    cases = []
    # A list field's document moved from one value's run to another (ids kept ascending
    # and in range): every check of the sections passes, only the records can tell.
    kw_start, kw_end = {section: (a, b) for a, b, section in regions(data)}["fld.kw_ids"]
    ids = np.frombuffer(data[kw_start:kw_end], dtype="<u4")
    for position in range(ids.shape[0]):
        for step in (1, -1):
            moved_ids = ids.copy()
            moved_ids[position] = max(int(ids[position]) + step, 0)
            if np.array_equal(moved_ids, ids):
                continue
            damaged = bytearray(data)
            damaged[kw_start:kw_end] = moved_ids.astype("<u4").tobytes()
            reseal_section(damaged, "fld.kw_ids")
            also = ((MANIFEST, recorded(manifest, name, bytes(damaged))),)
            kw_label = f"fld.kw_ids[{position}] {step:+d}, re-sealed"
            cases.append(Case(name, kw_label, bytes(damaged), region="fld.kw_ids", also=also))
    for label, at, delta in edits:
        moved = values.copy()
        if at is None:
            moved += delta
        else:
            moved[at] += delta
        damaged = bytearray(data)
        damaged[start:end] = moved.astype("<f8").tobytes()
        reseal_section(damaged, "fld.num_values")
        also = ((MANIFEST, recorded(manifest, name, bytes(damaged))),)
        cases.append(Case(name, f"{label}, re-sealed", bytes(damaged), region="fld.num_values", also=also))
    return cases


def substitution_cases(files: dict[str, bytes], foreign: dict[str, bytes], full: bool) -> list[Case]:
    """Files that are whole and checksum-clean but not the ones the manifest means (issue 13, item 6).

    Every file replaced by a copy of every other, every pair swapped, every file replaced
    by the same file of another index of the same documents, every field of every stamp
    forged (header re-sealed; with ``full``, also with a manifest that records the forged
    file's size and checksum), and every identity field of every manifest entry edited
    (manifest re-sealed). Each must be refused at open with ``CorruptIndexError``.
    """
    cases = []
    section_files = [name for name in files if name != MANIFEST]
    for target in section_files:
        for source in section_files:
            if source != target:
                cases.append(
                    Case(target, f"replaced by a copy of {source}", files[source], CorruptIndexError)
                )
    for first, second in itertools.combinations(section_files, 2):
        also = ((second, files[first]),)
        cases.append(Case(first, f"swapped with {second}", files[second], CorruptIndexError, also=also))
    for name, data in foreign.items():
        cases.append(Case(name, "the same file of another index", data, CorruptIndexError))
    for name in section_files:
        stamp = read_stamp(files[name][:64])
        forgeries = {
            "index id": dataclasses.replace(stamp, index_id=read_stamp(foreign[name][:64]).index_id),
            "segment number": dataclasses.replace(stamp, number=stamp.number + 1),
            "generation": dataclasses.replace(stamp, generation=stamp.generation + 1),
            "unstamped": FileStamp("", 0, 0),
        }
        for label, forged in forgeries.items():
            data = _stamped(files[name], forged)
            cases.append(Case(name, f"stamp: {label} forged, header re-sealed", data, CorruptIndexError))
            if full:
                also = ((MANIFEST, recorded(files[MANIFEST], name, data)),)
                label = f"stamp: {label} forged, manifest records it"
                cases.append(Case(name, label, data, CorruptIndexError, also=also))
    body = json.loads(files[MANIFEST])["body"]
    for position, entry in enumerate(body["segments"]):
        edits: dict[str, Callable[[dict[str, Any]], None]] = {
            "size + 64": lambda e: e.update(size=e["size"] + 64),
            "size - 64": lambda e: e.update(size=e["size"] - 64),
            "checksum ^ 1": lambda e: e.update(checksum=e["checksum"] ^ 1),
            "documents + 1": lambda e: e.update(documents=e["documents"] + 1),
        }
        if entry["deletes"] is not None:
            edits["deletes_size + 64"] = lambda e: e.update(deletes_size=e["deletes_size"] + 64)
            edits["deletes_checksum ^ 1"] = lambda e: e.update(deletes_checksum=e["deletes_checksum"] ^ 1)
            edits["deleted + 1"] = lambda e: e.update(deleted=e["deleted"] + 1)
        for label, edit in edits.items():
            edited = json.loads(files[MANIFEST])["body"]
            edit(edited["segments"][position])
            cases.append(
                Case(MANIFEST, f"entry {position}: {label}", seal_manifest(edited), CorruptIndexError)
            )
        duplicated = json.loads(files[MANIFEST])["body"]
        duplicated["segments"].append(dict(duplicated["segments"][position]))
        label = f"entry {position} listed twice"
        cases.append(Case(MANIFEST, label, seal_manifest(duplicated), CorruptIndexError))
        renamed = json.loads(files[MANIFEST])["body"]
        other = body["segments"][(position + 1) % len(body["segments"])]["name"]
        renamed["segments"][position]["name"] = other
        label = f"entry {position} renamed to {other}"
        cases.append(Case(MANIFEST, label, seal_manifest(renamed), CorruptIndexError))
        low = json.loads(files[MANIFEST])["body"]
        low["next_segment"] = int(entry["name"][4:10])
        label = f"next_segment = {low['next_segment']}, a listed segment"
        cases.append(Case(MANIFEST, label, seal_manifest(low), CorruptIndexError))
    foreign_id = json.loads(foreign[MANIFEST])["body"]["index_id"]
    for label, value in [
        ("another index's id", foreign_id),
        ("no id", ""),
        ("upper-case id", foreign_id.upper()),
        ("its own id with a trailing newline", json.loads(files[MANIFEST])["body"]["index_id"] + "\n"),
    ]:
        edited = json.loads(files[MANIFEST])["body"]
        edited["index_id"] = value
        cases.append(Case(MANIFEST, f"index_id: {label}", seal_manifest(edited), CorruptIndexError))
    older = json.loads(files[MANIFEST])["body"]
    older["generation"] = 1  # below its tombstone file's generation
    cases.append(
        Case(MANIFEST, "generation below a tombstone file's", seal_manifest(older), CorruptIndexError)
    )
    return cases


def _stamped(data: bytes, stamp: FileStamp) -> bytes:
    if not stamp.index_id:  # an unstamped header: zero stamp bytes, header CRC re-sealed
        out = bytearray(data)
        out[32:64] = bytes(32)
        struct.pack_into("<I", out, 28, checksum(bytes(out[:28]) + bytes(out[32:64])))
        return bytes(out)
    return stamped_header(data, stamp) + data[64:]


#: Counts the ``meta`` section of a segment claims (issue 13, item 8).
COUNT_FIELDS = ("documents", "terms", "postings", "links", "vectors")


def count_cases(files: dict[str, bytes], full: bool) -> list[Case]:
    """Segments whose ``meta`` claims other counts or another vector width, every checksum valid.

    The manifest records each crafted file (size, checksum, and the claimed
    document count), so only the count rules can refuse it: every count must
    agree with its sections' lengths, which the file's length bounds, before
    anything is allocated by it; the vector width must be the manifest's.
    """
    magnitudes = [10**k for k in range(2, 19)] if full else [10**4, 10**8, 10**12]
    cases = []
    for name in (n for n in files if n.endswith(".wseg")):
        source = SectionFile(Path(name), files[name])
        sections = {section: source.array(section).copy() for section in source.names}
        meta = json.loads(bytes(sections["meta"]))
        variants: list[tuple[str, dict[str, Any]]] = []
        for field in COUNT_FIELDS:
            variants += [(f"meta {field} = {value}", {field: value}) for value in magnitudes]
            variants.append((f"meta {field} + 1", {field: meta[field] + 1}))
        matrix_values = meta["vectors"] * meta["vector_dim"]
        for width in (DIM // 2, DIM * 2, 1):
            # The matrix still holds what the claimed vectors x width need: only the width is wrong.
            variants.append(
                (f"vectors {width} wide", {"vector_dim": width, "vectors": matrix_values // width})
            )
        for label, changes in variants:
            edited = dict(sections)
            raw = json.dumps({**meta, **changes}, sort_keys=True, separators=(",", ":")).encode("ascii")
            edited["meta"] = np.frombuffer(raw, dtype=np.uint8)
            data = _stamped(encode_sections(edited), source.stamp)
            documents = {"documents": changes["documents"]} if "documents" in changes else {}
            also = ((MANIFEST, recorded(files[MANIFEST], name, data, **documents)),)
            # Version 3 has no section of one element per posting: a postings count within what
            # the block table allows (at least one and at most 128 postings a block) is refused
            # when the term table is first read (the count must be post.offsets' last entry),
            # not at open, which reads meta only.
            claimed = changes.get("postings")
            within = claimed is not None and meta["blocks"] <= claimed <= POSTINGS_BLOCK * meta["blocks"]
            expect = None if within else CorruptIndexError
            cases.append(Case(name, label, data, expect, region="meta", also=also))
    return cases


# ---------------------------------------------------------------------- running a case


class CaseTimeout(BaseException):
    """A case ran past its deadline (BaseException: no library ``except Exception`` swallows it)."""


def deadline(seconds: float) -> contextlib.AbstractContextManager[None]:
    """Raise :class:`CaseTimeout` in the block after ``seconds`` (:func:`tests.storage.alarms.alarm`)."""
    return alarm(seconds, CaseTimeout, "case")


class PropertyViolationError(Exception):
    """A case broke the property (wrong answer, undetected damage, wrong outcome)."""


def _replace(path: Path, data: bytes) -> None:
    """Write ``data`` as a new inode, so maps of the previous bytes never see it change."""
    temporary = path.with_name(path.name + ".swap")
    temporary.write_bytes(data)
    os.replace(temporary, path)


def first_difference(got: object, want: object, path: str = "") -> str:
    """Where two answers (nested lists and dicts) first differ, as ``path: got != want``."""
    if isinstance(got, list) and isinstance(want, list):
        for position, (a, b) in enumerate(zip(got, want, strict=False)):
            if a != b:
                label = a.get("key", position) if isinstance(a, dict) else position
                return first_difference(a, b, f"{path}[{label}]")
        return f"{path}: {len(got)} items != {len(want)}"
    if isinstance(got, dict) and isinstance(want, dict):
        for key in sorted(set(got) | set(want), key=str):
            if got.get(key) != want.get(key):
                return first_difference(got.get(key), want.get(key), f"{path}.{key}")
    return f"{path}: {got!r} != {want!r}"


def _without(answer: object, absent: list[str]) -> object:
    """A golden hit list with the documents reported absent left out, ranks renumbered.

    Search reports a document whose stored record is damaged absent, as get()
    does; every other hit must keep its order, scores and explanations.
    """
    if not absent or not isinstance(answer, list) or not all(isinstance(h, dict) for h in answer):
        return answer
    kept = [dict(hit) for hit in answer if hit.get("key") not in absent]
    for rank, hit in enumerate(kept, start=1):
        hit["rank"] = rank
    return kept


def run_case(directory: Path, golden: Golden, case: Case) -> str:
    """Open, scrub, read and search the damaged copy; return the outcome or raise PropertyViolationError."""
    try:
        index = Index.open(directory, readonly=True)
    except ALLOWED as exc:
        if case.expect is not None and not isinstance(exc, case.expect):
            raise PropertyViolationError(f"expected {case.expect.__name__}, got {exc!r}") from None
        # The storage-level scrub needs no open index: it must name the damage too.
        if scrub_directory(directory).ok:
            raise PropertyViolationError(
                f"open refused ({exc}) but scrub_directory() reported nothing"
            ) from None
        return "refused"
    if case.expect is not None:
        raise PropertyViolationError(f"expected {case.expect.__name__} at open, but the index opened")
    try:
        report = index.scrub()
        errors = 0
        absent: list[str] = []
        for key, expected in golden.documents.items():
            try:
                got: DocSignature | None = signature(index.get(key))
            except UnknownKeyError as exc:
                if expected is not None and "damaged" in str(exc):
                    absent.append(key)
                    continue
                got = None
            except ALLOWED:
                errors += 1
                continue
            if got != expected:
                raise PropertyViolationError(f"get({key!r}) returned {got!r}, golden {expected!r}")
        for name, probe in PROBES:
            try:
                answer = probe(index)
            except ALLOWED:
                errors += 1
                continue
            wanted = _without(golden.probes[name], absent)
            if answer != wanted:
                where = first_difference(answer, wanted)
                raise PropertyViolationError(f"query {name!r} silently differs from golden at {where}")
    finally:
        index.close()
    if report.ok:
        raise PropertyViolationError("open accepted the damaged copy and scrub() reported nothing")
    for key in absent:
        if golden.owner.get(key) != case.file:
            raise PropertyViolationError(f"{key!r} reported damaged, but {case.file} does not hold it")
    if errors:
        return "error"
    if absent:
        return "absent"
    return "scrub-only"


@dataclass
class SweepResult:
    outcomes: Counter[str]
    failures: list[str]
    seconds: float
    slowest: float
    scrub_only: Counter[str]  # region of each case only scrub noticed

    def summary(self, title: str) -> str:
        counts = ", ".join(f"{k}={v}" for k, v in sorted(self.outcomes.items()))
        quiet = ", ".join(f"{k}={v}" for k, v in sorted(self.scrub_only.items()))
        return (
            f"{title}: {sum(self.outcomes.values())} cases in {self.seconds:.1f} s "
            f"(slowest {self.slowest * 1000:.0f} ms): {counts}; {len(self.failures)} failures"
            + (f"; scrub-only by region: {quiet}" if quiet else "")
        )


def sweep(pristine: Path, workdir: Path, golden: Golden, cases: list[Case]) -> SweepResult:
    """Run every case on a copy of ``pristine``, restoring the damaged file after each."""
    directory = workdir / "index"
    shutil.copytree(pristine, directory)
    originals = {p.name: p.read_bytes() for p in directory.iterdir()}
    outcomes: Counter[str] = Counter()
    scrub_only: Counter[str] = Counter()
    failures: list[str] = []
    slowest = 0.0
    started = time.perf_counter()
    for case in cases:
        target = directory / case.file
        _replace(target, case.data)
        for other, data in case.also:
            _replace(directory / other, data)
        began = time.perf_counter()
        try:
            with deadline(CASE_SECONDS):
                outcome = run_case(directory, golden, case)
        except CaseTimeout as exc:
            outcome = "FAIL"
            failures.append(f"{case.file}: {case.label}: hang ({exc})")
        except PropertyViolationError as exc:
            outcome = "FAIL"
            failures.append(f"{case.file}: {case.label}: {exc}")
        except Exception as exc:
            outcome = "FAIL"
            where = traceback.extract_tb(exc.__traceback__)[-1]
            failures.append(
                f"{case.file}: {case.label}: {type(exc).__name__}: {exc} "
                f"(raised at {Path(where.filename).name}:{where.lineno})"
            )
        elapsed = time.perf_counter() - began
        slowest = max(slowest, elapsed)
        if elapsed > CASE_SECONDS and outcome != "FAIL":
            failures.append(f"{case.file}: {case.label}: took {elapsed:.1f} s")
        outcomes[outcome] += 1
        if outcome == "scrub-only":
            scrub_only[case.region] += 1
        _replace(target, originals[case.file])
        for other, _ in case.also:
            _replace(directory / other, originals[other])
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == originals, "sweep left damage"
    return SweepResult(outcomes, failures, time.perf_counter() - started, slowest, scrub_only)


def swept_files(pristine: Path) -> list[str]:
    return sorted(p.name for p in pristine.iterdir() if p.name != LOCK)


def check(result: SweepResult, title: str) -> None:
    print(result.summary(title))
    shown = "\n".join(result.failures[:25])
    more = f"\n... and {len(result.failures) - 25} more" if len(result.failures) > 25 else ""
    assert not result.failures, f"{result.summary(title)}\n{shown}{more}"


# ---------------------------------------------------------------------- the sweeps

FILES = [MANIFEST, "seg-000001.del-000004", "seg-000001.wseg", "seg-000002.wseg"]


@pytest.mark.parametrize("name", FILES)
def test_byte_flips(name: str, pristine: Path, golden: Golden, tmp_path: Path) -> None:
    data = (pristine / name).read_bytes()
    result = sweep(pristine, tmp_path, golden, flip_cases(name, data, full=False))
    check(result, f"flips of {name} ({len(data)} bytes, sampled)")


@pytest.mark.parametrize("name", FILES)
def test_truncations_and_versions(name: str, pristine: Path, golden: Golden, tmp_path: Path) -> None:
    data = (pristine / name).read_bytes()
    cases = [*truncation_cases(name, data), *version_cases(name, data)]
    result = sweep(pristine, tmp_path, golden, cases)
    assert set(result.outcomes) <= {"refused", "FAIL"}, result.summary(name)  # all fail at open
    check(result, f"truncations, extensions and version of {name}")


@pytest.mark.parametrize("name", ["seg-000001.wseg", "seg-000002.wseg"])
def test_inner_checksums(name: str, pristine: Path, golden: Golden, tmp_path: Path) -> None:
    """Per-record and per-term checksums catch what a re-sealed section checksum hides."""
    data = (pristine / name).read_bytes()
    cases = inner_checksum_cases(name, data, (pristine / MANIFEST).read_bytes())
    result = sweep(pristine, tmp_path, golden, cases)
    check(result, f"record and postings damage in {name}, sections re-sealed")
    assert result.outcomes["absent"] or result.outcomes["error"], result.summary(name)


@pytest.mark.parametrize("path", ["numpy", "compiled"])
@pytest.mark.parametrize("name", ["seg-000001.wseg", "seg-000002.wseg"])
def test_block_metadata_damage(
    name: str, path: str, pristine: Path, golden: Golden, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Crafted block metadata (every checksum valid) never changes an answer; scrub names every case.

    ``compiled``: BM25 runs through the block-max kernel, which reads the block
    metadata, so a query reading a damaged term must fail (``error``), not rank
    differently. ``numpy``: the exhaustive path decodes the packed postings with
    the same table (widths, last ids) and checks the table at first use, so it
    fails the same queries (in version 2 it never read the table: ``scrub-only``).
    """
    if path == "compiled":
        if kernel.compiled_bm25() is None:
            pytest.skip("the compiled BM25 is not available")
        monkeypatch.setattr(bm25_module, "_COMPILED_FROM_DOCS", 0)
    data = (pristine / name).read_bytes()
    manifest = (pristine / MANIFEST).read_bytes()
    cases = block_metadata_cases(name, data, manifest) + packed_postings_cases(name, data, manifest)
    result = sweep(pristine, tmp_path, golden, cases)
    check(result, f"block metadata and packed postings of {name} crafted ({path} BM25)")
    # Version 3: both paths decode the packed postings through the block table (widths and
    # last ids), so both refuse a query reading a damaged term; scrub names every case.
    assert result.outcomes["error"], result.summary(name)  # the queries' terms were refused
    assert set(result.outcomes) <= {"scrub-only", "refused", "error"}, result.summary(name)


@pytest.mark.parametrize("name", ["seg-000001.wseg", "seg-000002.wseg"])
def test_field_index_against_records(name: str, pristine: Path, tmp_path: Path) -> None:
    """A re-checksummed field index that disagrees with the stored records: scrub names the file.

    Scrub re-derives the field index from the stored records (as it re-derives
    the block metadata from the postings); before, every case below scrubbed ok.
    Whether a filtered search notices at first use is not asserted here: a value
    moved within its field's order passes every structural check (see FORMAT.md).
    """
    data = (pristine / name).read_bytes()
    directory = tmp_path / "index"
    shutil.copytree(pristine, directory)
    missed = []
    for case in field_index_cases(name, data, (pristine / MANIFEST).read_bytes()):
        _replace(directory / name, case.data)
        for other, replacement in case.also:
            _replace(directory / other, replacement)
        with deadline(CASE_SECONDS):
            problems = scrub_directory(directory).problems
        if not any(str(directory / name) in problem and "field index" in problem for problem in problems):
            missed.append(f"{case.label}: {problems}")
    assert not missed, "\n".join(missed)


@pytest.mark.slow
@pytest.mark.parametrize("name", FILES)
def test_byte_flips_full(name: str, pristine: Path, golden: Golden, tmp_path: Path) -> None:
    data = (pristine / name).read_bytes()
    result = sweep(pristine, tmp_path, golden, flip_cases(name, data, full=True))
    check(result, f"flips of {name} ({len(data)} bytes, every byte, 0xff and one bit)")


def test_deadline_interrupts_a_hang() -> None:
    started = time.perf_counter()
    with pytest.raises(CaseTimeout), deadline(0.2):
        while True:
            time.sleep(0.01)
    assert time.perf_counter() - started < 5


@pytest.fixture(scope="module")
def foreign(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The files of another index built from the very same documents (same names and sizes)."""
    path = tmp_path_factory.mktemp("foreign") / "index"
    build_index(path)
    return {name: (path / name).read_bytes() for name in FILES}


def files_of(pristine: Path) -> dict[str, bytes]:
    return {name: (pristine / name).read_bytes() for name in FILES}


def test_substitutions(pristine: Path, golden: Golden, foreign: dict[str, bytes], tmp_path: Path) -> None:
    """Swapped, copied, foreign and forged files and edited manifest identities: all refused, all scrubbed."""
    cases = substitution_cases(files_of(pristine), foreign, full=False)
    result = sweep(pristine, tmp_path, golden, cases)
    check(result, "substituted files")
    assert set(result.outcomes) == {"refused"}, result.summary("substitutions")


def test_crafted_counts(pristine: Path, golden: Golden, tmp_path: Path) -> None:
    """Inflated or inconsistent counts and other vector widths: refused before any large allocation."""
    cases = count_cases(files_of(pristine), full=False)
    tracemalloc.start()
    try:
        result = sweep(pristine, tmp_path, golden, cases)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    check(result, "crafted counts")
    assert set(result.outcomes) <= {"refused", "error"}, result.summary("crafted counts")
    # Postings counts the block table allows (+1, 100 and 1000 here) fail at the first read.
    assert result.outcomes["error"] <= 6, result.summary("crafted counts")
    assert peak < 64 << 20, f"peak {peak / 2**20:.0f} MiB while refusing crafted counts"


@pytest.mark.slow
def test_substitutions_full(
    pristine: Path, golden: Golden, foreign: dict[str, bytes], tmp_path: Path
) -> None:
    cases = substitution_cases(files_of(pristine), foreign, full=True)
    result = sweep(pristine, tmp_path, golden, cases)
    check(result, "substituted files (full)")
    assert set(result.outcomes) == {"refused"}, result.summary("substitutions")


@pytest.mark.slow
def test_crafted_counts_full(pristine: Path, golden: Golden, tmp_path: Path) -> None:
    cases = count_cases(files_of(pristine), full=True)
    tracemalloc.start()
    try:
        result = sweep(pristine, tmp_path, golden, cases)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    check(result, "crafted counts (every magnitude)")
    assert set(result.outcomes) <= {"refused", "error"}, result.summary("crafted counts")
    # Postings counts the block table allows (+1, 100 and 1000 here) fail at the first read.
    assert result.outcomes["error"] <= 6, result.summary("crafted counts")
    assert peak < 64 << 20, f"peak {peak / 2**20:.0f} MiB while refusing crafted counts"


def test_files_are_the_expected_ones(pristine: Path) -> None:
    assert swept_files(pristine) == FILES


# ---------------------------------------------------------------------- not regular files

#: What an index file may be replaced by that is not a regular file (issue 26, item 5).
SPECIAL_KINDS = ("fifo", "socket", "directory", "symlink to /dev/zero", "symlink to a copy")


def make_special(target: Path, kind: str, original: bytes, keep: list[socket.socket]) -> None:
    """Put a ``kind`` file at ``target`` (which must not exist)."""
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "socket":
        # A socket's path is limited to ~100 bytes: bind a short one and rename it into place.
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        keep.append(listener)
        short = Path(tempfile.mkdtemp(prefix="ws")) / "s"
        listener.bind(str(short))
        listener.listen(1)
        os.replace(short, target)
        short.parent.rmdir()
    elif kind == "directory":
        target.mkdir()
    elif kind == "symlink to /dev/zero":
        target.symlink_to("/dev/zero")
    else:  # even a link to the very same bytes is not a file this index wrote
        copy = target.with_name(target.name + ".elsewhere")
        copy.write_bytes(original)
        target.symlink_to(copy.name)
    assert target.is_symlink() or not target.is_file()


@pytest.mark.parametrize("kind", SPECIAL_KINDS)
@pytest.mark.parametrize("name", FILES)
def test_not_a_regular_file(name: str, kind: str, pristine: Path, tmp_path: Path) -> None:
    """Each index file replaced by a FIFO, socket, directory or link: refused at once, by name.

    A FIFO blocked ``Index.open`` for ever (issue 26, item 5); every other kind
    must not be opened either (a link to ``/dev/zero`` reads endlessly). The
    deadline turns a regression into a failure instead of a hang.
    """
    directory = tmp_path / "index"
    shutil.copytree(pristine, directory)
    target = directory / name
    original = target.read_bytes()
    target.unlink()
    keep: list[socket.socket] = []
    try:
        make_special(target, kind, original, keep)
        for readonly in (True, False):
            with deadline(CASE_SECONDS), pytest.raises(CorruptIndexError) as caught:
                Index.open(directory, readonly=readonly)
            message = str(caught.value)
            assert str(target) in message and "not a regular file" in message, message
        with deadline(CASE_SECONDS):
            report = scrub_directory(directory)
        named = [problem for problem in report.problems if str(target) in problem]
        assert any("not a regular file" in problem for problem in named), report.problems
    finally:
        for listener in keep:
            listener.close()
