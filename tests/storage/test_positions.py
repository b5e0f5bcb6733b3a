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
from weftsearch.storage.postings import (
    PostingsDecodeError,
    join_offsets,
    pack_positions,
    positions_chunks,
    split_offsets,
    unpack_positions,
)
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
    w = packed.data_offsets.astype(np.int64)
    for t in range(len(df)):
        a, b = int(offsets[t]), int(offsets[t + 1])
        words = packed.data[w[t] : w[t + 1]]
        starts, found = unpack_positions(words, tfs[a:b], np.array(lengths[a:b]))
        assert [found[int(starts[j]) : int(starts[j + 1])].tolist() for j in range(b - a)] == runs[a:b]
        # The term's widths are its last bytes; its chunks the words up to their last value.
        chunk_words, widths = positions_chunks(words, int(tfs[a:b].sum()))
        assert widths.shape[0] == -(-int(tfs[a:b].sum()) // 128) and int(widths.max()) <= 32
        assert chunk_words.shape[0] <= words.shape[0] <= chunk_words.shape[0] + 1 + widths.shape[0] // 4
    # Several terms at once (a merge's range) decode the same.
    _, together = unpack_positions(packed.data, tfs, np.array(lengths), offsets, w)
    assert together.tolist() == flat.tolist()


def test_a_position_past_its_document_is_refused() -> None:
    packed = pack_positions(np.array([0, 5]), np.array([2], np.uint32), np.array([0, 1]))
    with pytest.raises(PostingsDecodeError, match="past its document"):
        unpack_positions(packed.data, np.array([2]), np.array([5]))
    with pytest.raises(PostingsDecodeError, match="more positions than its document"):
        unpack_positions(packed.data, np.array([2]), np.array([1]))


def test_a_term_takes_the_fewest_words_holding_its_chunks_then_their_widths() -> None:
    # One position below 2^9 and its width (one byte): one word, no table beside it.
    packed = pack_positions(np.array([300]), np.array([1], np.uint32), np.array([0, 1]))
    assert packed.data.tolist() == [300 | 9 << 24] and packed.data_offsets.tolist() == [0, 1]
    # 129 positions 5, 7, 9, ...: codes 5 then 1 (a gap of 2), so chunks of widths 3 and 1:
    # 384 bits (12 words), then 1 bit, zero bits, and the widths as the 13th word's last bytes.
    at = np.array([5 + 2 * i for i in range(129)])
    packed = pack_positions(at, np.array([129], np.uint32), np.array([0, 1]))
    assert packed.data.shape[0] == 13 and int(packed.data[-1]) == 1 | 3 << 16 | 1 << 24
    words, widths = positions_chunks(packed.data, 129)
    assert widths.tolist() == [3, 1] and words.shape[0] == 13
    assert unpack_positions(packed.data, np.array([129]), np.array([300]))[1].tolist() == at.tolist()


def _one_term(values: list[int]) -> np.ndarray:
    return pack_positions(np.array(values), np.array([len(values)], np.uint32), np.array([0, 1])).data


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("width above 32", "above 32"),
        ("a width that needs more words", "do not fill"),
        ("a width that needs fewer words", "do not fill"),
        ("a word more", "do not fill"),
        ("a word less", "do not fill|cannot hold"),
        ("no words", "cannot hold"),
        ("stray bit before the widths", "not zero"),
    ],
)
def test_damaged_positions_words_are_refused_before_they_are_read(damage: str, message: str) -> None:
    words = _one_term([3, 7, 8, 200]).copy()  # codes 3, 3, 0, 191: width 8, 32 bits, then 1 byte
    assert words.shape[0] == 2 and int(words[1]) == 8 << 24
    lengths = np.array([201])
    if damage == "width above 32":
        words[1] = 33 << 24
    elif damage == "a width that needs more words":
        words[1] = 16 << 24  # 64 bits and a byte: 3 words
    elif damage == "a width that needs fewer words":
        words[1] = 6 << 24  # 24 bits and a byte: 1 word
    elif damage == "a word more":
        words = np.concatenate([words[:1], np.zeros(1, np.uint32), words[1:]])
    elif damage == "a word less":
        words = words[1:]
    elif damage == "no words":
        words = words[:0]
    else:
        words[1] |= 1 << 23
    with pytest.raises(PostingsDecodeError, match=message):
        unpack_positions(words, np.array([4]), lengths)


def test_word_offsets_that_do_not_cover_the_data_are_refused() -> None:
    words = np.concatenate([_one_term([1]), _one_term([0, 4])])
    tfs, lengths, terms = np.array([1, 2]), np.array([5, 5]), np.array([0, 1, 2])
    assert unpack_positions(words, tfs, lengths, terms, np.array([0, 1, 2]))[1].tolist() == [1, 0, 4]
    for bounds in ([0, 1, 3], [0, 2, 1], [1, 1, 2], [0, 1]):
        with pytest.raises(PostingsDecodeError):
            unpack_positions(words, tfs, lengths, terms, np.array(bounds))


@settings(max_examples=150, deadline=None)
@given(steps=st.lists(st.sampled_from([0, 1, 7, 2**31, 2**32 - 1, 2**32, 2**32 + 5, 3 * 2**32]), max_size=12))
def test_term_offsets_split_in_low_words_and_wrap_points_join_back(steps: list[int]) -> None:
    offsets = np.cumsum(np.array([0, *steps], dtype=np.uint64)).astype(np.uint64)
    low, wraps = split_offsets(offsets)
    assert low.dtype == np.uint32 and wraps.dtype == np.uint64
    assert wraps.shape[0] == int(offsets[-1]) >> 32  # none below 16 GiB of positions
    assert join_offsets(low, wraps).tolist() == offsets.tolist()


def test_wrap_points_that_are_not_terms_in_order_are_refused() -> None:
    low = np.array([0, 5, 3, 9], dtype=np.uint32)
    assert join_offsets(low, np.array([2], np.uint64)).tolist() == [0, 5, 2**32 + 3, 2**32 + 9]
    for wraps in ([0], [4], [3, 2], [2**64 - 1]):
        with pytest.raises(PostingsDecodeError, match="wrap points"):
            join_offsets(low, np.array(wraps, np.uint64))


def test_a_crafted_wrap_point_is_refused_when_the_segment_is_read() -> None:
    from weftsearch.storage.codec import SectionFile, encode_sections

    data = encode(corpus(12, seed=5))
    source = SectionFile(Path("<memory>"), data)
    sections = {name: source.array(name).copy() for name in source.names}
    sections["pos.data_wraps"] = np.array([1], np.uint64)  # 16 GiB of words the meta does not claim
    with pytest.raises(CorruptIndexError):
        reader = SegmentReader(Path("<memory>"), encode_sections(sections))
        reader.positions(reader.terms()[0])


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


def _sweep_cases(sections: dict[str, np.ndarray], prefix: str) -> list[tuple[str, dict[str, np.ndarray]]]:
    """Each value of the field's offsets and CRCs moved; words of ``pos.data`` (about 20, evenly
    spaced, the last included) with bit 0, 9 or 31 flipped."""
    cases = []
    for name in ("pos.data_offsets", "pos.crc", "pos.data"):
        array = sections[prefix + name]
        every: list[int] = list(range(array.shape[0]))
        if name == "pos.data":
            every = sorted({*range(0, array.shape[0], max(1, array.shape[0] // 20)), array.shape[0] - 1})
        for index in every:
            edits = (1 << 0, 1 << 9, 1 << 31) if name == "pos.data" else (1,)
            for flip in edits:
                edited = dict(sections)
                edited[prefix + name] = array.copy()
                if name == "pos.data_offsets":
                    edited[prefix + name][index] += np.uint64(flip)
                else:
                    edited[prefix + name][index] ^= np.array(flip).astype(array.dtype)
                cases.append((f"{prefix}{name}[{index}] ^ {flip}", edited))
    return cases


@pytest.mark.parametrize("field", ["text", "title"])
def test_every_rechecksummed_positions_edit_is_refused_never_read(field: str) -> None:
    """Each value of a field's positions sections edited, every section checksum re-sealed: a read of a
    term either raises CorruptIndexError (the term's CRC32C or the tables' checks) or gives the original
    positions, at least one read raises, and ``verify`` names a problem."""
    from weftsearch.storage.codec import SectionFile, encode_sections

    data = encode(corpus(12, seed=5))
    original = SegmentReader(Path("<memory>"), data).text_field(field)
    terms = original.terms()
    truth = {term: original.positions(term) for term in terms}
    source = SectionFile(Path("<memory>"), data)
    sections = {name: source.array(name).copy() for name in source.names}
    for label, edited in _sweep_cases(sections, "" if field == "text" else "tf.1."):
        reader = SegmentReader(Path("<memory>"), encode_sections(edited)).text_field(field)
        refused = 0
        for term in terms:
            try:
                got = reader.positions(term)
            except CorruptIndexError:
                refused += 1
                continue
            assert all(np.array_equal(got[i], truth[term][i]) for i in range(4)), label
        assert refused, label
        assert SegmentReader(Path("<memory>"), encode_sections(edited)).verify(), label


def test_builds_with_positions_are_byte_identical_whatever_the_worker_count(tmp_path: Path) -> None:
    documents = [
        Document(
            f"d{i:05d}",
            f"word{i % 97} alpha beta{i % 13} alpha word{i % 89}",
            text_fields={"title": f"gamma{i % 7} delta gamma{i % 7}"},
        )
        for i in range(2_100)
    ]  # 2,000 or more: add_many forks its workers
    schema = Schema((TextField("text", positions=True), TextField("title")))
    built = []
    for workers in (1, 2):
        path = tmp_path / str(workers)
        with Index.create(path, schema=schema, index_id="0123456789abcdef" * 2) as index:
            index.add_many(documents, workers=workers, progress=False)
            index.commit()
        built.append({file.name: file.read_bytes() for file in sorted(path.iterdir())})
    assert built[0] == built[1]
    reader = Index.open(tmp_path / "1", readonly=True).snapshot().parts[0].reader
    assert reader.has_positions and reader.positions("alpha")[3][:4].tolist() == [1, 3, 1, 3]
