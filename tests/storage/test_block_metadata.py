"""Block metadata in the segment format (docs/FORMAT.md, "Block metadata").

The segment writer stores, per term, blocks of 128 postings with their last local id,
largest tf and smallest document length (``post.block_offsets``, ``post.blocks``). These
tests check that the stored tables equal three independent derivations (a plain Python
loop, the writer's vectorised one, the C kernel's), that merges write what a fresh build
writes, and that metadata which disagrees with its postings, even in a file whose every
checksum was recomputed, is refused at first use and named by scrub, never used to prune:
with the first-use check bypassed, the same crafted file makes the compiled BM25 return
a wrong ranking, so the check is what keeps the answer right.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

import weftsearch.scorers.bm25 as bm25_module
from tests.scorers.test_bm25_kernel import block_max_everywhere
from weftsearch import RRF, BM25Scorer, Document, Index, Query
from weftsearch.errors import CorruptIndexError
from weftsearch.native import bm25 as native_bm25
from weftsearch.storage import SectionFile, scrub_directory
from weftsearch.storage.segment import POSTINGS_BLOCK, SegmentReader, derive_blocks
from weftsearch.storage.segment_merge import merge_columns
from weftsearch.storage.segment_writer import encode_columns

from .crafting import refresh_identities, rewrite_sections
from .test_segments import section_extents

DISABLED = native_bm25.compiled_bm25() is None
needs_compiled = pytest.mark.skipif(DISABLED, reason="the compiled BM25 is not available")
TARGET = "doc-1337"  # the one document with a high tf of 'common', deep in its list's blocks
DOCUMENTS = 1500


def corpus(count: int = DOCUMENTS, start: int = 0) -> list[Document]:
    """'common' in every document (tf 1, one length: ties), 'rare' in a few, 'common' x 9 in TARGET.

    Lists of 1,500 postings cut into 12 blocks; the top document of 'common' sits in block 10.
    ``start`` numbers the keys from there.
    """
    documents = []
    for i in range(start, start + count):
        key = f"doc-{i:04d}"
        if key == TARGET:
            text = " ".join(["common"] * 9 + ["filler"] * 3)
        else:
            words = ["common", "filler", "filler", "filler", "filler", "filler", "filler", "filler"]
            if i % 97 == 0:
                words[1] = "rare"
            # Shorter (higher-scoring) documents only in the first block: the k-th score is set
            # there, and every later block's true bound (tf 1, length 8) is below it, so the
            # kernel skips every window past the first that holds no TARGET (its windows widen
            # to 4,096 ids once there is a threshold: WEFT_MIN_WINDOW).
            text = " ".join(words[: 8 - (i % 5)]) if i % 7 == 0 and i < 128 else " ".join(words)
        documents.append(Document(key, text))
    return documents


def build(path: Path, segments: int = 1) -> Path:
    docs = corpus()
    share = math.ceil(len(docs) / segments)
    with Index.create(path, analyzer="simple") as index:
        for start in range(0, len(docs), share):
            index.add_many(docs[start : start + share])
            index.commit()
    return path


def segment_files(path: Path) -> list[Path]:
    return sorted(path.glob("seg-*.wseg"))


def naive_blocks(ids: NDArray[Any], tfs: NDArray[Any], lengths: NDArray[Any]) -> list[int]:
    """One term's metadata by a plain loop: lasts, then max tfs, then min lengths, then widths."""
    lasts, tops, shortest, widths = [], [], [], []
    for start in range(0, len(ids), POSTINGS_BLOCK):
        block = slice(start, start + POSTINGS_BLOCK)
        lasts.append(int(ids[block][-1]))
        tops.append(int(tfs[block].max()))
        shortest.append(int(lengths[ids[block]].min()))
        previous = [int(ids[start - 1]) if start else -1, *ids[block][:-1].tolist()]
        gap = max(int(i) - p - 1 for i, p in zip(ids[block].tolist(), previous, strict=True))
        widths.append(gap.bit_length() | (int(tfs[block].max()) - 1).bit_length() << 8)
    return lasts + tops + shortest + widths


@pytest.fixture
def compiled(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """BM25Scorer.score goes compiled on this small corpus too (it takes numpy below 20,000 documents)."""
    monkeypatch.setattr(bm25_module, "_COMPILED_FROM_DOCS", 0)
    yield


def top(index: Index, text: str = "common", k: int = 3) -> list[tuple[str, float]]:
    """The top ``k`` (key, score) of one BM25 stream, asked to depth ``k`` (so the k-th score prunes)."""
    return [(hit.key, hit.score) for hit in index.search(Query(text), k, RRF(), BM25Scorer(), depth=k)]


# ---------------------------------------------------------------------- the stored tables


@pytest.mark.parametrize("segments", [1, 3])
def test_stored_blocks_equal_every_derivation(tmp_path: Path, segments: int) -> None:
    path = build(tmp_path / "index", segments)
    library = native_bm25.compiled_bm25()
    multi_block = 0
    for file in segment_files(path):
        sections = SectionFile(file)
        assert {"post.block_offsets", "post.blocks"} <= set(sections.names)
        meta = json.loads(bytes(sections.array("meta")))
        reader = SegmentReader(file)
        lengths = reader.doc_lengths()
        offsets = sections.array("post.block_offsets")
        table = sections.array("post.blocks")
        assert meta["blocks"] == int(offsets[-1]) == table.shape[0] // 4
        for position, term in enumerate(reader.terms()):
            ids, tfs = reader.postings(term)
            stored = table[4 * int(offsets[position]) : 4 * int(offsets[position + 1])]
            assert stored.tolist() == naive_blocks(ids, tfs, lengths), term
            assert reader.term_blocks(term)[2].tolist() == stored.tolist()
            if library is not None:
                assert native_bm25.compiled_blocks(library, ids, tfs, lengths).tolist() == stored.tolist()
            multi_block += int(offsets[position + 1] - offsets[position]) > 1
        _, _, all_ids, all_tfs = reader.all_postings()
        _, derived = derive_blocks(all_ids, all_tfs, sections.array("post.offsets"), lengths)
        assert derived.tolist() == table.tolist()
        assert reader.verify() == []
    assert multi_block  # some list spans several blocks (the last one shorter)


@pytest.mark.parametrize("seed", range(3))
def test_the_vectorised_derivations_equal_a_plain_loop(seed: int) -> None:
    """Whole-segment and one-term derivations at every block edge (127..129, 255..257) and empty terms."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 40, 2000).astype(np.uint32)
    sizes = [1, 127, 128, 129, 0, 255, 256, 257, 0, 0, 1000, 2, int(rng.integers(1, 2000))]
    id_parts, tf_parts = [], []
    for size in sizes:
        id_parts.append(np.sort(rng.choice(2000, size, replace=False)).astype(np.uint32))
        tf_parts.append(rng.integers(1, 9, size).astype(np.uint32))
    ids, tfs = np.concatenate(id_parts), np.concatenate(tf_parts)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.uint64)
    block_offsets, table = derive_blocks(ids, tfs, offsets, lengths, pause=lambda: None)
    assert np.diff(block_offsets.astype(np.int64)).tolist() == [math.ceil(n / POSTINGS_BLOCK) for n in sizes]
    for term, (part_ids, part_tfs) in enumerate(zip(id_parts, tf_parts, strict=True)):
        stored = table[4 * int(block_offsets[term]) : 4 * int(block_offsets[term + 1])].tolist()
        assert stored == naive_blocks(part_ids, part_tfs, lengths)
        if part_ids.size:
            one = np.array([0, part_ids.shape[0]], dtype=np.uint64)
            assert derive_blocks(part_ids, part_tfs, one, lengths)[1].tolist() == stored


def test_absent_term_has_no_blocks(tmp_path: Path) -> None:
    reader = SegmentReader(segment_files(build(tmp_path / "index"))[0])
    ids, tfs, blocks = reader.term_blocks("absent")
    assert ids.size == tfs.size == blocks.size == 0


def test_merge_writes_the_blocks_of_a_fresh_build(tmp_path: Path) -> None:
    """Merging three multi-block segments gives the bytes (block tables included) of one fresh build."""
    merged_path = build(tmp_path / "three", segments=3)
    readers = [SegmentReader(file) for file in segment_files(merged_path)]
    merged = encode_columns(merge_columns([(r, np.ones(r.n_docs, dtype=bool)) for r in readers]))
    fresh_path = build(tmp_path / "one", segments=1)
    fresh = SegmentReader(segment_files(fresh_path)[0])
    fresh_bytes = encode_columns(merge_columns([(fresh, np.ones(fresh.n_docs, dtype=bool))]))
    assert merged == fresh_bytes
    again = SegmentReader(Path("<merged>"), merged)
    assert (
        again.section_file.array("post.blocks").tolist() == fresh.section_file.array("post.blocks").tolist()
    )


# ---------------------------------------------------------------------- crafted metadata


def _target_block(path: Path) -> tuple[int, int, int]:
    """(term position of 'common', its number of blocks, the block holding TARGET) in the one segment."""
    reader = SegmentReader(segment_files(path)[0])
    position = reader.term_position("common")
    ids, _ = reader.postings("common")
    local = reader.find(TARGET)
    block = int(np.searchsorted(ids, local)) // POSTINGS_BLOCK
    return position, math.ceil(ids.shape[0] / POSTINGS_BLOCK), block


def craft(path: Path, edit: Callable[[dict[str, Any], int, int, int], None]) -> None:
    """Edit the segment's sections (every checksum recomputed, the manifest recording the new file)."""
    position, n_blocks, block = _target_block(path)

    def apply(sections: dict[str, Any]) -> None:
        edit(sections, position, n_blocks, block)

    rewrite_sections(segment_files(path)[0], apply)
    refresh_identities(path)


def _first(sections: dict[str, Any], position: int) -> int:
    return 4 * int(sections["post.block_offsets"][position])


def understate_max_tf(sections: dict[str, Any], position: int, n_blocks: int, block: int) -> None:
    sections["post.blocks"][_first(sections, position) + n_blocks + block] = 1


def overstate_min_length(sections: dict[str, Any], position: int, n_blocks: int, block: int) -> None:
    sections["post.blocks"][_first(sections, position) + 2 * n_blocks + block] = 10**6


def shift_last_id(sections: dict[str, Any], position: int, n_blocks: int, block: int) -> None:
    sections["post.blocks"][_first(sections, position) + block - 1] += 1


def swap_term_blocks(sections: dict[str, Any], position: int, n_blocks: int, block: int) -> None:
    """Another term's block table moved under 'common' (same size, counts still consistent)."""
    offsets = sections["post.block_offsets"].astype(np.int64)
    sizes = np.diff(offsets)
    other = next(t for t in range(sizes.shape[0]) if t != position and sizes[t] == sizes[position])
    table = sections["post.blocks"]
    mine = slice(4 * offsets[position], 4 * offsets[position + 1])
    theirs = slice(4 * offsets[other], 4 * offsets[other + 1])
    table[mine], table[theirs] = table[theirs].copy(), table[mine].copy()


def wrong_offsets(sections: dict[str, Any], position: int, n_blocks: int, block: int) -> None:
    sections["post.block_offsets"][position + 1] -= 1


CRAFTS = {
    "max-tf-understated": understate_max_tf,
    "min-length-overstated": overstate_min_length,
    "last-id-shifted": shift_last_id,
    "two-terms-swapped": swap_term_blocks,
    "offsets-wrong": wrong_offsets,
}


@needs_compiled
@pytest.mark.usefixtures("compiled")
@pytest.mark.parametrize("label", sorted(CRAFTS))
def test_crafted_metadata_is_refused_at_first_use_and_named_by_scrub(tmp_path: Path, label: str) -> None:
    path = build(tmp_path / "index")
    golden = top(Index.open(path, readonly=True))
    assert golden[0][0] == TARGET
    craft(path, CRAFTS[label])
    index = Index.open(path, readonly=True)  # every checksum and count is consistent
    with pytest.raises(CorruptIndexError, match="block"):
        top(index)
    if label != "offsets-wrong":  # a table cut wrongly refuses every term of the segment
        assert top(index, "rare", 5)  # another term's lists are unaffected
    report = index.scrub()
    assert not report.ok and any("block" in problem for problem in report.problems), report.problems
    assert not scrub_directory(path).ok


@pytest.mark.usefixtures("compiled")
@pytest.mark.parametrize("label", ["max-tf-understated", "min-length-overstated"])
def test_without_the_first_use_check_the_crafted_bound_prunes_the_best_document(
    tmp_path: Path, label: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check is what protects the ranking: trusting the crafted table drops TARGET from the top."""
    block_max_everywhere(monkeypatch)  # a small part: else scored densely, every block read
    if DISABLED:
        pytest.skip("the compiled BM25 is not available")
    path = build(tmp_path / "index")
    golden = top(Index.open(path, readonly=True))
    craft(path, CRAFTS[label])

    def trusting(self: SegmentReader, term: str) -> tuple[Any, Any, int] | None:
        """term_packed without its first-use check: the stored table taken as it is."""
        position = self.term_position(term)
        if position < 0:
            return None
        offsets = self.section_file.array("post.block_offsets")
        data_offsets = self.section_file.array("post.data_offsets")
        postings = self.section_file.array("post.offsets")
        table = self.section_file.array("post.blocks")
        words = self.section_file.array("post.data")[
            int(data_offsets[position]) : int(data_offsets[position + 1])
        ]
        stored = table[4 * int(offsets[position]) : 4 * int(offsets[position + 1])]
        return words, stored, int(postings[position + 1] - postings[position])

    monkeypatch.setattr(SegmentReader, "term_packed", trusting)
    wrong = top(Index.open(path, readonly=True))
    assert wrong != golden and TARGET not in [key for key, _ in wrong]


def test_numpy_path_refuses_too_and_scrub_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The exhaustive path decodes through the same table (version 3): it refuses the term too, never
    answers differently; scrub names the damage. Another term still answers as before."""
    monkeypatch.setenv(native_bm25.DISABLE_VARIABLE, "1")
    native_bm25.compiled_bm25.cache_clear()
    try:
        path = build(tmp_path / "index")
        golden_rare = top(Index.open(path, readonly=True), "rare", 5)
        craft(path, understate_max_tf)
        index = Index.open(path, readonly=True)
        with pytest.raises(CorruptIndexError, match="block"):
            top(index)
        assert top(index, "rare", 5) == golden_rare
        assert not index.scrub().ok
    finally:
        monkeypatch.delenv(native_bm25.DISABLE_VARIABLE)
        native_bm25.compiled_bm25.cache_clear()


def test_block_sections_are_required(tmp_path: Path) -> None:
    path = build(tmp_path / "index")

    def drop(sections: dict[str, Any]) -> None:
        del sections["post.blocks"]

    rewrite_sections(segment_files(path)[0], drop)
    refresh_identities(path)
    with pytest.raises(CorruptIndexError, match=r"post\.blocks"):
        Index.open(path, readonly=True)


# ---------------------------------------------------------------------- segments this writer wrote


def _writer_with_every_kind_of_own_segment(path: Path) -> Index:
    """An in-thread commit, a forked one, then a forced merge (forked): every reader is the writer's own."""
    documents = corpus()
    index = Index.create(path, analyzer="simple")
    index.add_many(documents[:700])
    index.commit()
    index._fork_encode_min = 10
    index.add_many(documents[700:])
    index.commit()
    return index


@pytest.mark.parametrize("kernel", ["compiled", "numpy"])
def test_the_writer_trusts_the_tables_it_wrote_and_a_reader_of_the_files_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel: str
) -> None:
    """A fresh segment's first searches check checksums, not a derivation of each table (same answers)."""
    import weftsearch.storage.segment as segment_module

    if kernel == "compiled":
        if DISABLED:
            pytest.skip("the compiled BM25 is not available")
        monkeypatch.setattr(bm25_module, "_COMPILED_FROM_DOCS", 0)
    else:
        monkeypatch.setenv(native_bm25.DISABLE_VARIABLE, "1")
    path = tmp_path / "index"
    writer = _writer_with_every_kind_of_own_segment(path)
    assert len(writer._segments) == 2 and all(s.reader._tables_trusted for s in writer._segments)
    derived: list[int] = []

    def counting(real: Any) -> Any:
        def count(*args: Any, **kwargs: Any) -> Any:
            derived.append(1)
            return real(*args, **kwargs)

        return count

    # A table is checked against its postings through either: a term's first read
    # (unpack_checked, in C where built) or a whole derivation.
    for name in ("derive_blocks", "unpack_checked"):
        monkeypatch.setattr(segment_module, name, counting(getattr(segment_module, name)))
    mine = top(writer)
    assert derived == []
    reader = Index.open(path, readonly=True)
    assert not any(s.reader._tables_trusted for s in reader._segments)
    assert top(reader) == mine and derived  # a reader of the files derives every table it uses
    rare = top(reader, "rare", 5)
    derived.clear()
    writer.merge(force=True)
    [merged] = writer._segments
    assert merged.reader._tables_trusted
    assert top(writer) == mine and top(writer, "rare", 5) == rare
    assert derived == []
    writer.close()


def test_a_trusted_table_still_refuses_damaged_postings(tmp_path: Path) -> None:
    """Trust covers the table's agreement with its postings, never the bytes: each term's CRC is checked."""
    path = tmp_path / "index"
    writer = _writer_with_every_kind_of_own_segment(path)
    segment = writer._segments[1]
    assert segment.reader._tables_trusted and segment.name is not None
    file = path / segment.name
    data_offsets = SectionFile(file).array("post.data_offsets")
    position = segment.reader.term_position("common")
    offset, _ = section_extents(file.read_bytes())["post.data"]
    with file.open("r+b") as handle:  # in place: the writer's map sees it before the term's first use
        handle.seek(offset + 4 * int(data_offsets[position]) + 1)
        byte = handle.read(1)
        handle.seek(-1, 1)
        handle.write(bytes([byte[0] ^ 0x40]))
    with pytest.raises(CorruptIndexError, match="checksum"):
        top(writer)
    writer.close(discard=True)
