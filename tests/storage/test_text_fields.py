"""Named text fields in segments: per-field postings and lengths written, read, merged and scrubbed.

The reference is a brute force over the analysed documents; bytes are compared across input
orders (determinism) and between a merge and a fresh build.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from tests.storage.crafting import refresh_identities, rewrite_sections
from weftsearch import Document, Index, get_analyzer
from weftsearch.errors import CorruptIndexError
from weftsearch.schema import Schema, TextField
from weftsearch.storage.segment import SegmentReader
from weftsearch.storage.segment_merge import merge_columns
from weftsearch.storage.segment_writer import SegmentDocument, encode_columns, encode_segment

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
FIELDS = ("title", "tags")


def corpus(count: int, seed: int = 1) -> list[Document]:
    rng = random.Random(seed)
    documents = []
    for i in range(count):
        named = {}
        if i % 3:
            named["title"] = " ".join(rng.choices(WORDS, k=rng.randint(1, 4)))
        if i % 4 == 1:
            named["tags"] = " ".join(rng.choices(WORDS[:4], k=rng.randint(1, 3)))
        documents.append(
            Document(f"d{i:03d}", " ".join(rng.choices(WORDS, k=rng.randint(0, 9))), text_fields=named)
        )
    return documents


def analysed(documents: Sequence[Document]) -> list[SegmentDocument]:
    english, simple = get_analyzer("english"), get_analyzer("simple")
    out = []
    for document in documents:
        terms = english.analyze(document.text)
        named = {}
        for name, text in document.text_fields.items():
            field_terms = (english if name == "title" else simple).analyze(text)
            named[name] = (Counter(field_terms), len(field_terms))
        out.append(SegmentDocument(document, Counter(terms), len(terms), None, named))
    return out


def reader_of(data: bytes) -> SegmentReader:
    return SegmentReader(Path("<memory>"), data)


def test_each_field_reads_back_its_own_postings_and_lengths() -> None:
    documents = corpus(300)  # over 128 postings a term: several blocks
    entries = analysed(documents)
    reader = reader_of(encode_segment(entries, None, text_fields=FIELDS))
    assert reader.text_field_names == ("text", *FIELDS)
    assert reader.text_field("text") is reader
    order = sorted(range(len(entries)), key=lambda i: entries[i].document.key)
    for name in FIELDS:
        field = reader.text_field(name)
        assert field.field_name == name
        per_doc = [entries[i].field_terms.get(name, ({}, 0)) for i in order]
        assert field.doc_lengths().tolist() == [length for _, length in per_doc]
        vocabulary = sorted({t for terms, _ in per_doc for t in terms})
        assert field.terms() == vocabulary
        for term in vocabulary:
            ids, tfs = field.postings(term)
            expected = [(local, terms[term]) for local, (terms, _) in enumerate(per_doc) if term in terms]
            assert list(zip(ids.tolist(), tfs.tolist(), strict=True)) == expected
        assert field.postings("absent")[0].shape == (0,)
    # The default field is unchanged by the named ones.
    plain = reader_of(encode_segment(analysed([Document(d.key, d.text) for d in documents]), None))
    assert reader.terms() == plain.terms()
    for term in plain.terms():
        assert all(
            np.array_equal(a, b) for a, b in zip(reader.postings(term), plain.postings(term), strict=True)
        )
    assert reader.verify() == []
    with pytest.raises(KeyError, match="body"):
        reader.text_field("body")


def test_a_segment_of_the_default_field_has_no_field_sections() -> None:
    reader = reader_of(encode_segment(analysed([Document("a", "alpha")]), None))
    assert reader.text_field_names == ("text",)
    assert not [name for name in reader.section_file.names if name.startswith("tf.")]
    assert "text_fields" not in reader._meta_cache


def test_named_fields_are_deterministic() -> None:
    entries = analysed(corpus(80))
    data = encode_segment(entries, None, text_fields=FIELDS)
    shuffled = list(entries)
    random.Random(4).shuffle(shuffled)
    assert encode_segment(shuffled, None, text_fields=FIELDS) == data
    reordered = [
        SegmentDocument(
            e.document,
            e.terms,
            e.length,
            None,
            {k: (dict(reversed(list(t.items()))), n) for k, (t, n) in e.field_terms.items()},
        )
        for e in entries
    ]
    assert encode_segment(reordered, None, text_fields=FIELDS) == data
    changed = list(entries)
    first = changed[0]
    changed[0] = SegmentDocument(
        first.document, first.terms, first.length, None, {"title": (Counter(["other"]), 1)}
    )
    assert encode_segment(changed, None, text_fields=FIELDS) != data


def test_merge_gives_the_bytes_of_a_fresh_build() -> None:
    documents = corpus(200)
    deleted = {"d002", "d050", "d051", "d199"}
    sources = []
    for part in (documents[:70], documents[70:90], documents[90:]):
        reader = reader_of(encode_segment(analysed(part), None, text_fields=FIELDS))
        live = np.array([key not in deleted for key in reader.keys().tolist()], dtype=bool)
        sources.append((reader, live))
    expected = encode_segment(
        analysed([d for d in documents if d.key not in deleted]), None, text_fields=FIELDS
    )
    assert encode_columns(merge_columns(sources)) == expected
    assert encode_columns(merge_columns(list(reversed(sources)))) == expected


def test_merge_refuses_segments_that_disagree_on_their_fields() -> None:
    documents = corpus(10)
    one = reader_of(encode_segment(analysed(documents[:5]), None, text_fields=FIELDS))
    two = reader_of(encode_segment(analysed(documents[5:]), None, text_fields=("title",)))
    with pytest.raises(CorruptIndexError, match="disagree on their text fields"):
        merge_columns([(one, np.ones(5, bool)), (two, np.ones(5, bool))])


def _index_with_fields(path: Path) -> Path:
    schema = Schema((TextField("title"), TextField("tags", analyzer="simple")))
    with Index.create(path, schema=schema, index_id="7" * 32) as index:
        index.add_many(corpus(300))
    return path


def test_scrub_names_a_field_whose_block_table_was_forged(tmp_path: Path) -> None:
    """A re-checksummed edit of a named field's block table: only the re-derivation notices it."""
    path = _index_with_fields(tmp_path / "index")
    assert Index.open(path, readonly=True).scrub().ok
    segment = next(path.glob("seg-*.wseg"))

    def forge(sections: dict[str, np.ndarray]) -> None:
        blocks = sections["tf.1.post.blocks"]
        # Row 2 of term 0's blocks: the smallest document length; larger understates a bound.
        blocks[2] += 1

    rewrite_sections(segment, forge)
    refresh_identities(path)
    report = Index.open(path, readonly=True).scrub()
    assert not report.ok
    assert any("text field 'title'" in problem and "block metadata" in problem for problem in report.problems)
    reader = SegmentReader(segment)
    title = reader.text_field("title")
    with pytest.raises(CorruptIndexError, match="text field 'title'"):
        for term in title.terms():
            title.postings(term)


def test_a_damaged_field_section_is_named_by_scrub(tmp_path: Path) -> None:
    path = _index_with_fields(tmp_path / "index")
    segment = next(path.glob("seg-*.wseg"))
    offset = SegmentReader(segment).section_file._entry("tf.2.post.data").offset
    data = bytearray(segment.read_bytes())
    data[offset] ^= 0xFF
    segment.write_bytes(bytes(data))
    report = Index.open(path, readonly=True).scrub()
    assert not report.ok
    assert any("tf.2.post.data" in problem for problem in report.problems)


def test_meta_counts_of_a_field_are_checked_at_open(tmp_path: Path) -> None:
    path = _index_with_fields(tmp_path / "index")
    segment = next(path.glob("seg-*.wseg"))
    import json

    def edit(sections: dict[str, np.ndarray]) -> None:
        meta = json.loads(bytes(sections["meta"]))
        meta["text_fields"][0]["terms"] += 1
        sections["meta"] = np.frombuffer(
            json.dumps(meta, sort_keys=True, separators=(",", ":")).encode(), np.uint8
        )

    rewrite_sections(segment, edit)
    with pytest.raises(CorruptIndexError, match=r"tf\.1"):
        SegmentReader(segment)
