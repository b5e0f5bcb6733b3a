"""The compressed document store (docs/FORMAT.md, "Stored text"; weftsearch.storage.docstore).

Records round-trip through zstd blocks cut by bytes and count; the bytes are
deterministic; a block table that claims more raw bytes than the file can back
is refused with CorruptIndexError before anything is allocated; any flipped
byte of a ``stored.*`` section makes a read fail or return the right record,
never another one; the per-reader block cache stays within its bound under
threads.
"""

from __future__ import annotations

import io
import itertools
import random
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weftsearch import Document
from weftsearch.errors import CorruptIndexError
from weftsearch.storage import docstore
from weftsearch.storage.codec import SectionFile, encode_sections
from weftsearch.storage.docstore import (
    BLOCK_COLUMNS,
    METHOD_RAW,
    METHOD_ZSTD,
    STORED_BLOCK_BYTES,
    STORED_BLOCK_RECORDS,
    STORED_MAX_RATIO,
    BlockCache,
    decompress_block,
    stored_sections,
)
from weftsearch.storage.sectionwriter import materialize
from weftsearch.storage.segment import SegmentReader
from weftsearch.storage.segment_writer import SegmentDocument, encode_segment, stored_record

PATH = Path("<docstore>")
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]


def _documents(count: int, seed: int = 7) -> list[SegmentDocument]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        size = rng.choice([0, 1, 5, 40, 300])
        text = " ".join(rng.choice(WORDS) for _ in range(size))
        if i == 3:
            text = "a" * 200_000  # compresses past the ratio limit: stored raw
        if i == 5:
            text = "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(9000))  # 27 KB, alone
        document = Document(f"doc-{i:04d}", text, fields={"n": i, "tag": WORDS[i % 5]})
        terms = {word: text.split().count(word) for word in set(text.split())} or {"empty": 1}
        out.append(SegmentDocument(document, terms, sum(terms.values())))
    return out


DOCUMENTS = _documents(400)
SEGMENT = encode_segment(DOCUMENTS, None)
RECORDS = [stored_record(d.document) for d in sorted(DOCUMENTS, key=lambda d: d.document.key)]


def _sections(data: bytes) -> dict[str, Any]:
    source = SectionFile(PATH, data)
    return {name: source.array(name).copy() for name in source.names}


def _table(data: bytes) -> list[list[int]]:
    rows: list[list[int]] = SectionFile(PATH, data).array("stored.blocks").reshape(-1, BLOCK_COLUMNS).tolist()
    return rows


def test_records_round_trip_through_blocks_cut_by_bytes_and_count() -> None:
    reader = SegmentReader(PATH, SEGMENT)
    assert [reader.record(i) for i in range(reader.n_docs)] == RECORDS
    rows = _table(SEGMENT)
    firsts = [row[0] for row in rows]
    ends = [*firsts[1:], len(RECORDS)]
    assert firsts[0] == 0 and len(rows) > 3
    for (first, _, packed, raw, method), end in zip(rows, ends, strict=True):
        sizes = [len(r) for r in RECORDS[first:end]]
        assert raw == sum(sizes)
        assert end - first <= STORED_BLOCK_RECORDS
        # Cut before the record that would overflow the block, unless the block would be empty.
        assert raw <= STORED_BLOCK_BYTES or end - first == 1
        if end < len(RECORDS):
            assert raw + len(RECORDS[end]) > STORED_BLOCK_BYTES or end - first == STORED_BLOCK_RECORDS
        assert method in (METHOD_RAW, METHOD_ZSTD)
        assert (method == METHOD_RAW) == (packed == raw)
    methods = {row[4] for row in rows}
    assert methods == {METHOD_RAW, METHOD_ZSTD}  # doc 3's block is too compressible to be trusted
    rest = sum(map(len, RECORDS)) - len(RECORDS[3])  # doc 3 is stored raw
    assert len(SectionFile(PATH, SEGMENT).raw("stored.blob")) < len(RECORDS[3]) + rest // 2
    assert reader.verify() == []


def test_tiny_records_are_cut_by_count() -> None:
    documents = [
        SegmentDocument(Document(f"k{i:04d}", ""), {"x": 1}, 1) for i in range(2 * STORED_BLOCK_RECORDS + 1)
    ]
    rows = _table(encode_segment(documents, None))
    assert [row[0] for row in rows] == [0, STORED_BLOCK_RECORDS, 2 * STORED_BLOCK_RECORDS]


def test_the_store_is_deterministic() -> None:
    shuffled = list(DOCUMENTS)
    random.Random(3).shuffle(shuffled)
    assert encode_segment(shuffled, None) == SEGMENT
    assert encode_segment([], None) == encode_segment([], None)


def _with_table(edit: Any) -> bytes:
    sections = _sections(SEGMENT)
    table = sections["stored.blocks"].reshape(-1, BLOCK_COLUMNS)
    edit(table, sections)
    return encode_sections(sections)  # every section checksum valid: only the table rules can refuse


FOUR_GB = 4 << 30


@pytest.mark.parametrize(
    "case",
    [
        "raw length",  # a zstd block claims 4 GB of raw bytes
        "raw length and offsets",  # and the record offsets agree with the claim
        "stored raw",  # a stored (uncompressed) block claims 4 GB
        "total",  # the records claim 4 GB in all
    ],
)
def test_a_block_claiming_4_gb_is_refused_before_allocation(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def edit(table: Any, sections: dict[str, Any]) -> None:
        block = next(b for b in range(table.shape[0] - 1) if int(table[b, 4]) == METHOD_ZSTD)
        first, end = int(table[block, 0]), int(table[block + 1, 0])
        if case == "stored raw":
            table[block, 4] = METHOD_RAW
        table[block, 3] = FOUR_GB
        if case in ("raw length and offsets", "total"):
            offsets = sections["stored.offsets"]
            offsets[end:] += np.uint64(FOUR_GB - int(offsets[end] - offsets[first]))
        if case == "total":
            table[block, 3] = int(sections["stored.offsets"][end] - sections["stored.offsets"][first])

    data = _with_table(edit)

    def never(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("decompression was reached")

    monkeypatch.setattr(docstore, "decompress_block", never)
    monkeypatch.setattr("weftsearch.storage.segment.decompress_block", never)
    reader = SegmentReader(PATH, data)
    tracemalloc.start()
    try:
        for local in (0, 40, reader.n_docs - 1):
            with pytest.raises(CorruptIndexError, match="stored"):
                reader.record(local)
            with pytest.raises(CorruptIndexError):
                reader.document(local)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20
    assert any("stored" in problem for problem in reader.verify())


def test_a_frame_claiming_4_gb_is_not_decompressed() -> None:
    """A zstd frame whose header claims 4 GB, under a table claiming its real size: no allocation."""
    sink = io.BytesIO()
    writer = zstandard.ZstdCompressor().stream_writer(sink, size=FOUR_GB, closefd=False)
    writer.write(b"x" * 1000)
    writer.flush(zstandard.FLUSH_BLOCK)
    frame = sink.getvalue()
    assert zstandard.frame_content_size(frame) == FOUR_GB
    tracemalloc.start()
    try:
        assert decompress_block(frame, 1000, METHOD_ZSTD) is None
        assert decompress_block(frame, STORED_MAX_RATIO * len(frame) + 1, METHOD_ZSTD) is None
        assert decompress_block(frame, len(frame), 7) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


STORED_SECTIONS = ["stored.blob", "stored.offsets", "stored.crc", "stored.blocks", "stored.block_crc"]


def _flip_positions(size: int, budget: int = 30) -> list[int]:
    step = max(1, size // budget)
    return sorted({*range(0, size, step), size - 1})


def _read_everything(data: bytes) -> tuple[int, int]:
    """Read every record of ``data``: each must be the right one, absent or CorruptIndexError."""
    right = failed = 0
    try:
        reader = SegmentReader(PATH, data)
    except CorruptIndexError:
        return 0, 1
    for local, want in enumerate(RECORDS):
        try:
            got = reader.record(local)
        except CorruptIndexError:
            failed += 1
        else:
            assert got == want, f"record {local} read back as another"
            right += 1
        try:
            document = reader.document(local)
        except CorruptIndexError:
            continue
        if document is not None:
            assert stored_record(document) == want, f"document {local} read back as another"
    return right, failed


@pytest.mark.parametrize("name", STORED_SECTIONS)
@pytest.mark.parametrize("resealed", [False, True])
def test_flipped_bytes_never_give_a_wrong_record(name: str, resealed: bool) -> None:
    """The corruption sweep: flip bytes of each stored.* section, with or without its checksum re-sealed."""
    pristine = _sections(SEGMENT)
    raw = pristine[name].view(np.uint8)
    caught = 0
    start = SectionFile(PATH, SEGMENT)._entry(name).offset
    for position in _flip_positions(raw.shape[0]):
        sections = {key: value.copy() for key, value in pristine.items()}
        sections[name].view(np.uint8)[position] ^= 0x5A
        if resealed:
            data = encode_sections(sections)
        else:
            damaged = bytearray(SEGMENT)
            damaged[start + position] ^= 0x5A
            data = bytes(damaged)
        _, failed = _read_everything(data)
        caught += failed > 0
    assert caught  # the damage was noticed at least somewhere


def test_scrub_names_a_damaged_block() -> None:
    sections = _sections(SEGMENT)
    sections["stored.blob"][10] ^= 0xFF
    reader = SegmentReader(PATH, encode_sections(sections))
    problems = reader.verify()
    assert any("stored block 0 (documents 0.." in problem for problem in problems), problems
    assert reader.document(0) is None


def test_the_block_cache_is_bounded_and_thread_safe() -> None:
    cache = BlockCache(limit=100)
    for block in range(10):
        cache.put(block, bytes(30))
    assert cache.size <= 100 and len(cache) == 3
    assert cache.get(9) is not None and cache.get(0) is None
    cache.put(99, bytes(101))  # longer than the whole cache: not kept
    assert cache.get(99) is None and cache.size <= 100

    reader = SegmentReader(PATH, SEGMENT)
    errors: list[str] = []

    def work(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(400):
            local = rng.randrange(len(RECORDS))
            if reader.record(local) != RECORDS[local]:
                errors.append(f"record {local}")

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert reader._blocks_cache.size <= docstore.STORED_CACHE_BYTES


def test_spilled_blocks_give_the_same_bytes_and_leave_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A merge's compressed blocks past the in-memory allowance wait in an unlinked file, same bytes."""
    kept = {name: materialize(part).tobytes() for name, part in stored_sections(RECORDS).items()}
    monkeypatch.setattr(docstore, "_SPILL_AFTER", 1000)
    sections = stored_sections(RECORDS, spill=tmp_path)
    assert list(tmp_path.iterdir()) == []  # unlinked at creation
    assert {name: materialize(part).tobytes() for name, part in sections.items()} == kept


def test_a_merge_that_spills_its_blocks_reads_back_every_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from weftsearch import Index

    monkeypatch.setattr(docstore, "_SPILL_AFTER", 1000)
    path = tmp_path / "idx"
    with Index.create(path) as index:
        index.add_many([d.document for d in DOCUMENTS[:200]], progress=False)
        index.commit()
        index.add_many([d.document for d in DOCUMENTS[200:]], progress=False)
        index.commit()
        assert index.merge(force=True) == 2
        assert index.scrub().ok
        for entry in DOCUMENTS[::37]:
            assert stored_record(index.get(entry.document.key)) == stored_record(entry.document)
    assert sorted(p.name for p in path.iterdir() if p.name.startswith("seg-")) == ["seg-000003.wseg"]


def test_an_index_written_at_level_3_opens_merges_and_scrubs_at_today_s_level(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Level 3 was the store's level before stop 38: such version-4 indexes keep working."""
    from weftsearch import Index

    path = tmp_path / "idx"
    monkeypatch.setattr(docstore, "STORED_LEVEL", 3)
    with Index.create(path) as index:
        index.add_many([d.document for d in DOCUMENTS[:200]], progress=False)
        index.commit()
    old = {p.name: p.read_bytes() for p in path.iterdir() if p.name.startswith("seg-")}
    monkeypatch.setattr(docstore, "STORED_LEVEL", 1)
    (old_bytes,) = old.values()
    level_1 = SectionFile(PATH, encode_segment(DOCUMENTS[:200], None)).raw("stored.blob")
    assert SectionFile(PATH, old_bytes).raw("stored.blob") != level_1  # level 3's bytes really differ
    with Index.open(path) as index:
        assert index.scrub().ok
        for entry in DOCUMENTS[:200:23]:
            assert stored_record(index.get(entry.document.key)) == stored_record(entry.document)
        index.add_many([d.document for d in DOCUMENTS[200:]], progress=False)
        index.commit()
        assert index.merge(force=True) == 2
        assert index.scrub().ok
        for entry in DOCUMENTS[::29]:
            assert stored_record(index.get(entry.document.key)) == stored_record(entry.document)
    # The merge copied the level-3 blocks it could take whole (a rebuild writes level 1 throughout).
    (merged,) = [p for p in path.iterdir() if p.name.startswith("seg-")]
    blob = bytes(SectionFile(PATH, merged.read_bytes()).raw("stored.blob"))
    assert bytes(SectionFile(PATH, old_bytes).raw("stored.blob"))[:1000] in blob


# ---------------------------------------------------------------------------- merges copy whole blocks


def _merged(parts: list[list[SegmentDocument]], deleted: frozenset[str] = frozenset()) -> bytes:
    """The segment a merge of one segment per part writes (documents of ``deleted`` dropped)."""
    from weftsearch.storage.segment_merge import merge_columns
    from weftsearch.storage.segment_writer import encode_columns

    sources = []
    for part in parts:
        reader = SegmentReader(PATH, encode_segment(part, None))
        live = np.array([str(key) not in deleted for key in reader.keys().tolist()], dtype=bool)
        sources.append((reader, live))
    return encode_columns(merge_columns(sources))


def _text(rng: random.Random, size: int) -> str:
    if rng.random() < 0.2:  # incompressible: such a block is stored raw
        return "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(size // 3))
    return " ".join(rng.choice(WORDS) for _ in range(size // 6))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.sampled_from([0, 6, 60, 400, 3000, 20_000]), min_size=1, max_size=120),
    cuts=st.lists(st.integers(0, 120), max_size=4),
    interleave=st.booleans(),
    deletes=st.sets(st.integers(0, 119), max_size=6),
    seed=st.integers(0, 1000),
)
def test_a_merge_copying_whole_blocks_writes_what_a_fresh_build_writes(
    sizes: list[int], cuts: list[int], interleave: bool, deletes: set[int], seed: int
) -> None:
    """Block copying (sources cut at random runs of keys, or interleaved) gives a fresh build's bytes."""
    rng = random.Random(seed)
    documents = [
        SegmentDocument(Document(f"k{i:04d}", _text(rng, size)), {"w": 1}, 1) for i, size in enumerate(sizes)
    ]
    if interleave:  # every source holds every other key: no merged block is a source's block
        parts = [documents[0::2], documents[1::2]]
    else:
        bounds = sorted({0, len(documents), *(min(c, len(documents)) for c in cuts)})
        parts = [documents[a:b] for a, b in itertools.pairwise(bounds)]
    deleted = frozenset(f"k{i:04d}" for i in deletes)
    live = [d for d in documents if d.document.key not in deleted]
    merged = _merged([p for p in parts if p], deleted)
    assert merged == encode_segment(live, None)
    reader = SegmentReader(PATH, merged)
    assert reader.verify() == []


def test_a_merge_of_runs_copies_their_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    copied: list[int] = []
    real = docstore._Blocks.copy

    def counting(self: Any, first: int, packed: bytes, raw_length: int, method: int) -> None:
        copied.append(first)
        real(self, first, packed, raw_length, method)

    monkeypatch.setattr(docstore._Blocks, "copy", counting)
    ordered = sorted(DOCUMENTS, key=lambda d: d.document.key)
    merged = _merged([ordered[:150], ordered[150:]])
    assert merged == SEGMENT
    assert len(copied) >= len(_table(SEGMENT)) // 2  # most blocks came whole from a run
    copied.clear()
    assert _merged([ordered[0::2], ordered[1::2]]) == SEGMENT
    # Interleaved sources: only the long records, alone in a block in every segment, are copied;
    # every other block is decompressed and compressed again.
    assert copied == [3, 5]


def test_a_merge_never_copies_a_damaged_block() -> None:
    """A source block failing its CRC32C is read record by record, which refuses it (no laundering)."""
    from weftsearch.storage.segment_merge import merge_columns
    from weftsearch.storage.segment_writer import encode_columns

    ordered = sorted(DOCUMENTS, key=lambda d: d.document.key)
    sections = _sections(encode_segment(ordered[:150], None))
    sections["stored.blob"][10] ^= 0xFF  # block 0, its section checksum resealed
    damaged = SegmentReader(PATH, encode_sections(sections))
    other = SegmentReader(PATH, encode_segment(ordered[150:], None))
    sources = [(damaged, np.ones(150, dtype=bool)), (other, np.ones(other.n_docs, dtype=bool))]
    with pytest.raises(CorruptIndexError, match="stored document 0"):
        encode_columns(merge_columns(sources))


def test_scrub_finds_a_damaged_copied_block() -> None:
    ordered = sorted(DOCUMENTS, key=lambda d: d.document.key)
    sections = _sections(_merged([ordered[:150], ordered[150:]]))
    sections["stored.blob"][10] ^= 0xFF
    reader = SegmentReader(PATH, encode_sections(sections))
    assert any("stored block 0 (documents 0.." in problem for problem in reader.verify())
    assert reader.document(0) is None


def test_a_merge_of_only_deleted_documents_stores_nothing() -> None:
    ordered = sorted(DOCUMENTS, key=lambda d: d.document.key)
    keys = frozenset(d.document.key for d in ordered[:10])
    assert _merged([ordered[:5], ordered[5:10]], keys) == encode_segment([], None)
