"""Positions: the codec against a brute force, segments against the analyzer's output, merges
against a fresh build, and damage (re-checksummed edits included) refused with the term named."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.storage.crafting import refresh_identities, rewrite_sections
from weftsearch import Document, Index, Schema, TextField, get_analyzer
from weftsearch.engine.ingest import FieldAnalysis, analyse_documents
from weftsearch.errors import CorruptIndexError
from weftsearch.storage.postings import PostingsDecodeError, pack_positions, unpack_positions
from weftsearch.storage.segment import SegmentReader
from weftsearch.storage.segment_merge import merge_columns
from weftsearch.storage.segment_writer import SegmentDocument, encode_columns, encode_segment

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "the", "of"]
KEEP = {"text", "title"}


@st.composite
def postings_with_positions(draw: st.DrawFn) -> tuple[list[int], list[list[int]], list[int]]:
    """Terms' postings: per term a df, per posting a document length and its positions below it."""
    df = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    lengths, runs = [], []
    for _ in range(sum(df)):
        length = draw(st.sampled_from([1, 2, 7, 300, 70_000, 2**31]))
        count = draw(st.integers(1, min(length, 140)))
        runs.append(sorted(draw(st.sets(st.integers(0, length - 1), min_size=count, max_size=count))))
        lengths.append(length)
    return df, runs, lengths


@settings(max_examples=80, deadline=None)
@given(case=postings_with_positions())
def test_positions_round_trip(case: tuple[list[int], list[list[int]], list[int]]) -> None:
    df, runs, lengths = case
    offsets = np.concatenate([[0], np.cumsum(df)]).astype(np.int64)
    tfs = np.array([len(r) for r in runs], dtype=np.uint32)
    flat = np.array([p for r in runs for p in r], dtype=np.int64)
    packed = pack_positions(flat, tfs, offsets)
    assert int(packed.widths.max()) <= 32
    for t in range(len(df)):
        a, b = int(offsets[t]), int(offsets[t + 1])
        c = packed.chunk_offsets.astype(np.int64)
        w = packed.data_offsets.astype(np.int64)
        starts, found = unpack_positions(
            packed.data[w[t] : w[t + 1]], packed.widths[c[t] : c[t + 1]], tfs[a:b], np.array(lengths[a:b])
        )
        assert [found[int(starts[j]) : int(starts[j + 1])].tolist() for j in range(b - a)] == runs[a:b]
    # Several terms at once (a merge's range) decode the same.
    _, together = unpack_positions(packed.data, packed.widths, tfs, np.array(lengths), offsets)
    assert together.tolist() == flat.tolist()


def test_a_position_past_its_document_is_refused() -> None:
    packed = pack_positions(np.array([0, 5]), np.array([2], np.uint32), np.array([0, 1]))
    with pytest.raises(PostingsDecodeError, match="past its document"):
        unpack_positions(packed.data, packed.widths, np.array([2]), np.array([5]))
    with pytest.raises(PostingsDecodeError, match="chunks"):
        unpack_positions(packed.data, packed.widths[:0], np.array([2]), np.array([6]))


def corpus(count: int, seed: int = 3) -> list[Document]:
    rng = random.Random(seed)
    return [
        Document(
            f"d{i:03d}",
            " ".join(rng.choices(WORDS, k=rng.randint(0, 200))),
            text_fields={"title": " ".join(rng.choices(WORDS, k=rng.randint(1, 6)))} if i % 3 else {},
        )
        for i in range(count)
    ]


def analysed(documents: list[Document]) -> list[SegmentDocument]:
    english = get_analyzer("english")
    return analyse_documents(
        english, documents, 1, fields=FieldAnalysis({"title": english}, frozenset(), frozenset(KEEP))
    )


def encode(documents: list[Document]) -> bytes:
    return encode_segment(analysed(documents), None, text_fields=("title",), positions_fields=KEEP)


def test_positions_are_the_analyzers_indexes() -> None:
    documents = corpus(120)
    reader = SegmentReader(Path("<memory>"), encode(documents))
    english = get_analyzer("english")
    by_key = {d.key: d for d in documents}
    keys = reader.keys().tolist()
    for name in ("text", "title"):
        field = reader.text_field(name)
        assert field.has_positions
        for term in field.terms():
            ids, tfs, starts, positions = field.positions(term)
            assert starts.shape[0] == ids.shape[0] + 1
            for j, local in enumerate(ids.tolist()):
                document = by_key[keys[local]]
                text = document.text if name == "text" else document.text_fields[name]
                expected = [i for i, t in enumerate(english.analyze(text)) if t == term]
                assert positions[int(starts[j]) : int(starts[j + 1])].tolist() == expected
                assert int(tfs[j]) == len(expected)
    assert reader.verify() == []


def test_positions_are_deterministic_and_merge_as_a_fresh_build() -> None:
    documents = corpus(200)
    data = encode(documents)
    shuffled = list(documents)
    random.Random(1).shuffle(shuffled)
    assert encode(shuffled) == data
    deleted = {"d000", "d050", "d199"}
    sources = []
    for part in (documents[:90], documents[90:100], documents[100:]):
        reader = SegmentReader(Path("<memory>"), encode(part))
        sources.append((reader, np.array([k not in deleted for k in reader.keys().tolist()])))
    assert encode_columns(merge_columns(sources)) == encode([d for d in documents if d.key not in deleted])


def test_a_field_without_positions_has_no_sections_and_says_so() -> None:
    reader = SegmentReader(Path("<memory>"), encode_segment(analysed(corpus(5))[:0] or [], None))
    assert not reader.has_positions
    assert not [n for n in reader.section_file.names if n.startswith("pos.")]
    with pytest.raises(KeyError, match="keeps no positions"):
        reader.positions("alpha")


def _index(path: Path) -> Path:
    with Index.create(path, schema=Schema((TextField("title"),)), index_id="9" * 32) as index:
        index.add_many(corpus(150))
    return path


@pytest.mark.parametrize("section", ["pos.data", "tf.1.pos.data"])
def test_rechecksummed_position_edits_are_refused_naming_the_term(tmp_path: Path, section: str) -> None:
    path = _index(tmp_path / "index")
    segment = next(path.glob("seg-*.wseg"))

    def edit(sections: dict[str, np.ndarray]) -> None:
        sections[section][0] ^= 1  # the section's checksum is recomputed; the term's CRC32C is not

    rewrite_sections(segment, edit)
    refresh_identities(path)
    index = Index.open(path, readonly=True)
    report = index.scrub()
    assert not report.ok
    assert any(
        "positions of term" in problem and "fail their checksum" in problem for problem in report.problems
    )
    field = index.snapshot().parts[0].reader.text_field("text" if section == "pos.data" else "title")
    first = field.terms()[0]
    with pytest.raises(CorruptIndexError, match=f"positions of term '{first}'"):
        field.positions(first)


def test_an_index_keeps_positions_only_when_its_schema_says_so(tmp_path: Path) -> None:
    with Index.create(tmp_path / "plain") as index:
        index.add_many([Document(d.key, d.text) for d in corpus(5)])
    reader = Index.open(tmp_path / "plain", readonly=True).snapshot().parts[0].reader
    assert not reader.has_positions
    schema = Schema((TextField("text", positions=False), TextField("title")))
    with Index.create(tmp_path / "titles", schema=schema) as index:
        index.add_many(corpus(5))
    reader = Index.open(tmp_path / "titles", readonly=True).snapshot().parts[0].reader
    assert not reader.has_positions and reader.text_field("title").has_positions
