"""The streamed build and merge: runs of a large add_many, term-range merges, section-by-section writes.

Whatever the run size, worker count or merge chunk, the committed segment is
the one a single build of the same live documents writes (its bytes after the
stamped header), and bad input still ends in a typed error with the index
unchanged and no file left behind.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest

from weftsearch import Document, Index
from weftsearch.analysis import EnglishAnalyzer, SimpleAnalyzer
from weftsearch.engine.ingest import analyse_documents
from weftsearch.errors import AnalysisError, DuplicateKeyError, VectorDimensionError
from weftsearch.fusion import RRF
from weftsearch.scorers import BM25Scorer
from weftsearch.storage import segment_merge as merge_module
from weftsearch.storage.codec import FileStamp, encode_sections, stamped_header
from weftsearch.storage.sectionwriter import ByteChunks, Section, materialize, write_section_file
from weftsearch.storage.segment import SegmentReader
from weftsearch.storage.segment_merge import merge_columns
from weftsearch.storage.segment_writer import SegmentDocument, encode_columns, encode_segment, write_columns

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="workers are forked (POSIX)")

WORDS = ["graph", "retrieval", "ranking", "fusion", "cat's", "dogs", "running", "ran", "the", "\u00e9t\u00e9"]
DIM = 3


def corpus(n: int, seed: int = 5, vectors: bool = True) -> list[Document]:
    """Documents with rare and common terms, repeated terms, empty texts, vectors, links, times."""
    rng = random.Random(seed)
    documents = []
    for i in range(n):
        words = [
            rng.choice(WORDS) + ("" if rng.random() < 0.7 else str(rng.randint(0, 60)))
            for _ in range(rng.randint(0, 25))
        ]
        vector = np.array([rng.random() for _ in range(DIM)], np.float32) if vectors and i % 3 else None
        links = (f"d{(i * 7) % n:04d}",) if i % 5 == 0 else ()
        time = None if i % 4 else 1e9 + i
        documents.append(Document(f"d{i:04d}", " ".join(words), vector=vector, links=links, time=time))
    rng.shuffle(documents)  # arrival order never matters
    return documents


def analysed(documents: list[Document]) -> list[SegmentDocument]:
    return analyse_documents(EnglishAnalyzer(), documents, 1)


def segment_files(index: Index) -> list[Path]:
    assert index.path is not None
    return [index.path / segment.name for segment in index._segments if segment.name]


def body(path: Path) -> bytes:
    """A segment file's bytes after the 64-byte header (which holds the stamp: index id, number)."""
    return path.read_bytes()[64:]


def build(path: Path, documents: list[Document], flush: int, workers: int) -> Index:
    index = Index.create(path)
    index._flush_documents = flush
    index.add_many(documents[:9], workers=1)  # buffered first: the commit merges it with the runs
    index.add_many(documents[9:], workers=workers)
    index.add(Document(documents[0].key, "replaced graph text", vector=np.ones(DIM, np.float32)))
    index.commit()
    return index


@pytest.mark.parametrize(("flush", "workers"), [(1, 1), (7, 2), (40, 1), (41, 3), (10**9, 2)])
def test_run_size_and_workers_never_change_the_committed_segment(
    tmp_path: Path, flush: int, workers: int
) -> None:
    documents = corpus(160)
    index = build(tmp_path / "index", documents, flush, workers)
    [file] = segment_files(index)
    live = [
        Document(documents[0].key, "replaced graph text", vector=np.ones(DIM, np.float32)),
        *documents[1:],
    ]
    assert body(file) == encode_segment(analysed(live), DIM)[64:]
    reference = build(tmp_path / "reference", documents, 10**9, 1)
    assert body(file) == body(segment_files(reference)[0])
    for query in ("graph ranking", "cat dogs", "\u00e9t\u00e9 run"):
        got = index.search(query, 20, RRF(), BM25Scorer())
        expected = reference.search(query, 20, RRF(), BM25Scorer())
        assert [(h.key, h.score) for h in got] == [(h.key, h.score) for h in expected]
    assert not [p.name for p in (tmp_path / "index").iterdir() if ".tmp" in p.name]
    index.close()
    reference.close()


def test_runs_are_searchable_and_deletes_before_the_commit_apply(tmp_path: Path) -> None:
    documents = corpus(120, seed=9)
    index = Index.create(tmp_path / "index")
    index._flush_documents = 25
    index.add_many(documents, workers=1)
    assert len(index) == 120 and len(index._segments) == 5  # five runs, visible before the commit
    gone = [documents[3].key, documents[50].key, documents[119].key]
    assert index.delete_many(gone) == 3
    assert index.get(documents[60].key) == documents[60]
    index.commit()
    [file] = segment_files(index)
    live = [d for d in documents if d.key not in gone]
    assert body(file) == encode_segment(analysed(live), DIM)[64:]
    with Index.open(tmp_path / "index", readonly=True) as reopened:
        assert sorted(reopened.keys()) == sorted(d.key for d in live)
    index.close()


@pytest.mark.parametrize("chunk", [1, 3, 50])
def test_merge_chunks_never_change_the_merged_segment(
    tmp_path: Path, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(merge_module, "MERGE_CHUNK_POSTINGS", chunk)
    documents = sorted(corpus(90, seed=11), key=lambda d: d.key)
    deleted = {documents[i].key for i in (0, 4, 33, 34, 89)}
    sources = []
    for part in (documents[:30], documents[30:31], documents[31:70], documents[70:]):
        reader = SegmentReader(Path("<memory>"), encode_segment(analysed(part), DIM))
        sources.append((reader, np.array([k not in deleted for k in reader.keys().tolist()])))
    fresh = encode_segment(analysed([d for d in documents if d.key not in deleted]), DIM)
    assert encode_columns(merge_columns(sources)) == fresh
    stamp = FileStamp("ab" * 16, 7)
    size, identity = write_columns(merge_columns(sources, spill=tmp_path), tmp_path / "merged", stamp)
    written = (tmp_path / "merged").read_bytes()
    assert written == stamped_header(fresh, stamp) + fresh[64:]
    assert size == len(written)
    assert identity == SegmentReader(tmp_path / "merged").identity[1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["merged"]  # the spill file was never named


def test_an_index_merge_of_many_segments_equals_one_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(merge_module, "MERGE_CHUNK_POSTINGS", 5)
    documents = corpus(100, seed=13)
    merged = Index.create(tmp_path / "merged")
    for start in range(0, 100, 9):
        merged.add_many(documents[start : start + 9])
        merged.commit()
    merged.delete_many([documents[5].key, documents[77].key])
    merged.commit()
    assert merged.merge(force=True) > 5
    single = Index.create(tmp_path / "single")
    single.add_many([d for d in documents if d.key not in {documents[5].key, documents[77].key}])
    single.commit()
    assert body(segment_files(merged)[0]) == body(segment_files(single)[0])
    for query in ("graph", "ran the dogs", "fusion5"):
        a = merged.search(query, 100, RRF(), BM25Scorer())
        b = single.search(query, 100, RRF(), BM25Scorer())
        assert [(h.key, h.score) for h in a] == [(h.key, h.score) for h in b]
    merged.close()
    single.close()


def test_the_section_writer_writes_the_codec_bytes(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    blob = rng.integers(0, 256, 1000, dtype=np.uint8).tobytes()
    ids = rng.integers(0, 2**32, 77, dtype=np.uint32)
    sections: dict[str, Section] = {
        "b.chunks": ByteChunks(len(blob), lambda: [blob[:1], blob[1:500], b"", blob[500:]]),
        "a.floats": rng.standard_normal(13),
        "c.ids": ByteChunks(4 * 77, lambda: [ids[:10].tobytes(), ids[10:].tobytes()], "<u4"),
        "d.empty": np.zeros(0, np.uint32),
        "e.i8": np.arange(-5, 5, dtype=np.int64),
    }
    expected = encode_sections({name: materialize(s) for name, s in sections.items()})
    assert materialize(sections["c.ids"]).tolist() == ids.tolist()
    stamp = FileStamp("0f" * 16, 3, 2)
    for given, wanted in ((None, expected), (stamp, stamped_header(expected, stamp) + expected[64:])):
        size, _ = write_section_file(tmp_path / "file", sections, given)
        assert (tmp_path / "file").read_bytes() == wanted and size == len(wanted)
    with pytest.raises(ValueError, match="chunks total"):
        write_section_file(tmp_path / "bad", {"x": ByteChunks(5, lambda: [b"1234"])}, None)


class FailingAnalyzer(SimpleAnalyzer):
    """Raises on texts holding a marker word."""

    def analyze(self, text: str) -> list[str]:
        if "boom" in text:
            raise RuntimeError("cannot analyse this")
        return super().analyze(text)


def test_bad_input_in_a_later_run_leaves_the_index_and_folder_unchanged(tmp_path: Path) -> None:
    documents = corpus(60, seed=2, vectors=False)
    index = Index.create(tmp_path / "index", FailingAnalyzer())
    index._flush_documents = 10
    index.add_many(documents[:20])
    index.commit()
    before = sorted(p.name for p in (tmp_path / "index").iterdir())
    failing = [*documents[20:], Document("z-boom", "a boom here")]  # the last run fails
    with pytest.raises(AnalysisError, match="z-boom"):
        index.add_many(failing)
    assert len(index) == 20 and len(index._segments) == 1
    assert sorted(p.name for p in (tmp_path / "index").iterdir()) == before  # its runs removed
    with pytest.raises(DuplicateKeyError):
        index.add_many([*documents[20:], documents[25]])
    with pytest.raises(VectorDimensionError):
        index.add_many([Document(f"v{i}", "x", vector=np.ones(2 + (i == 30), np.float32)) for i in range(40)])
    assert len(index) == 20
    index.add_many(documents[20:])
    index.commit()
    assert len(index) == 60
    index.close()


@pytest.mark.parametrize("flush", [1, 7])
def test_runs_drop_the_text_when_store_text_is_false(tmp_path: Path, flush: int) -> None:
    """A large add_many cut into runs stores no text either: the committed segment is a single build's."""
    documents = corpus(60)
    single = Index.create(tmp_path / "single", store_text=False)
    single.add_many(documents)
    single.commit()
    runs = Index.create(tmp_path / "runs", store_text=False)
    runs._flush_documents = flush
    runs.add_many(documents)
    runs.commit()
    assert [body(path) for path in segment_files(runs)] == [body(path) for path in segment_files(single)]
    assert all(runs.get(document.key).text == "" for document in documents)
