"""Segments on disk: determinism, merges that never change a ranking, the merge policy,
incremental commits, the sweep of orphan files, read-only readers, lazy opens and
per-term postings checks.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import struct
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from tests.storage.crafting import refresh_identities, stamp_of
from weftsearch import (
    RRF,
    BM25Scorer,
    Document,
    GraphScorer,
    Index,
    PageRankScorer,
    Query,
    RecencyScorer,
    ScoreFusion,
    Scorer,
    SearchResults,
    VectorScorer,
    WeightedRRF,
    get_analyzer,
)
from weftsearch.engine.merge_policy import MergePolicy
from weftsearch.engine.protocols import Fuser
from weftsearch.errors import (
    CorruptIndexError,
    IndexLockedError,
    IndexStorageError,
    InvalidParameterError,
)
from weftsearch.storage import LOCK, MANIFEST, IndexDirectory, Manifest, SectionFile, checksum
from weftsearch.storage.codec import FileStamp, stamped_header
from weftsearch.storage.pausing import SLICE, sorted_in_slices
from weftsearch.storage.segment import SegmentReader
from weftsearch.storage.segment_merge import merge_columns
from weftsearch.storage.segment_writer import SegmentDocument, encode_columns, encode_segment

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
    "posting",
]
DIM = 8
BASE = datetime(2022, 6, 1, tzinfo=timezone.utc)
SEGMENT_FILE = re.compile(r"^seg-\d{6}\.wseg$")
TOMBSTONE_FILE = re.compile(r"^seg-\d{6}\.del-\d{6}$")


# ---------------------------------------------------------------------------- helpers


def make_corpus(count: int = 60, seed: int = 3, prefix: str = "doc") -> list[Document]:
    """Documents with text, most with vectors, links (some dangling), times and fields."""
    rng = np.random.default_rng(seed)
    documents = []
    for i in range(count):
        words = rng.choice(WORDS, size=int(rng.integers(1, 14)))
        time: datetime | float | None = None
        if i % 3 == 1:
            time = BASE + timedelta(days=int(i), hours=int(rng.integers(0, 24)))
        elif i % 3 == 2:
            time = float((BASE + timedelta(days=2 * i)).timestamp())
        links = tuple(f"{prefix}-{int(j):02d}" for j in rng.choice(count + 5, size=int(rng.integers(0, 5))))
        documents.append(
            Document(
                key=f"{prefix}-{i:02d}",
                text=" ".join(str(w) for w in words),
                vector=None if i % 7 == 3 else rng.standard_normal(DIM).astype(np.float32),
                links=links,
                time=time,
                fields={"title": f"Title {i}", "year": 1990 + i, "weight": i / 9, "odd": i % 2 == 1},
            )
        )
    return documents


def analysed(documents: Sequence[Document], analyzer: str = "english") -> list[SegmentDocument]:
    """The documents as the index hands them to the segment writer."""
    analyse = get_analyzer(analyzer)
    out = []
    for document in documents:
        terms = analyse.analyze(document.text)
        out.append(SegmentDocument(document, Counter(terms), len(terms)))
    return out


def file_hashes(path: Path) -> dict[str, str]:
    """SHA-256 of every file of an index directory except the (empty, content-free) lock."""
    return {
        child.name: hashlib.sha256(child.read_bytes()).hexdigest()
        for child in sorted(path.iterdir())
        if child.name != LOCK
    }


def file_stats(path: Path) -> dict[str, tuple[int, int, str]]:
    """(inode, mtime in ns, SHA-256) of every segment and tombstone file."""
    stats = {}
    for child in sorted(path.iterdir()):
        if SEGMENT_FILE.match(child.name) or TOMBSTONE_FILE.match(child.name):
            info = child.stat()
            stats[child.name] = (
                info.st_ino,
                info.st_mtime_ns,
                hashlib.sha256(child.read_bytes()).hexdigest(),
            )
    return stats


def manifest_body(path: Path) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((path / MANIFEST).read_text())["body"]
    return body


def manifest_segments(path: Path) -> list[str]:
    return [str(s["name"]) for s in manifest_body(path)["segments"]]


def hits(results: SearchResults) -> list[dict[str, Any]]:
    """Keys, ranks, fused scores, fields and every signal's rank/score/contribution."""
    return [hit.to_dict() for hit in results]


# Section-file layout (docs/FORMAT.md): a 64-byte header, then 64-byte table entries.
_HEAD = struct.Struct("<8sIIQI")  # magic, version, section count, file length, table CRC32C
_ENTRY = struct.Struct("<24s8sQQQI")  # name, dtype, offset, byte length, element count, CRC32C


def section_extents(data: bytes) -> dict[str, tuple[int, int]]:
    """Section name -> (offset, byte length), parsed straight from the bytes."""
    _, _, count, _, _ = _HEAD.unpack_from(data, 0)
    extents = {}
    for position in range(count):
        name, _, offset, length, _, _ = _ENTRY.unpack_from(data, 64 + 64 * position)
        extents[name.rstrip(b"\x00").decode("ascii")] = (int(offset), int(length))
    return extents


def reseal(data: bytes) -> bytes:
    """Recompute every section's CRC32C, then the table's and the header's, as a writer would."""
    out = bytearray(data)
    magic, version, count, length, _ = _HEAD.unpack_from(out, 0)
    table_end = 64 + 64 * count
    data_start = table_end + (-table_end) % 64
    for position in range(count):
        at = 64 + 64 * position
        name, code, offset, size, elements, _ = _ENTRY.unpack_from(out, at)
        _ENTRY.pack_into(
            out, at, name, code, offset, size, elements, checksum(bytes(out[offset : offset + size]))
        )
    table_crc = checksum(bytes(out[64:data_start]))
    _HEAD.pack_into(out, 0, magic, version, count, length, table_crc)
    struct.pack_into("<I", out, 28, checksum(bytes(out[:28]) + bytes(out[32:64])))
    return bytes(out)


# ---------------------------------------------------------------------------- determinism


#: Determinism is per index id (docs/FORMAT.md, "Determinism"): the id is stamped into every file.
FIXED_ID = "0123456789abcdef0123456789abcdef"


def build_into(
    path: Path, batches: Sequence[Sequence[Document]], deletes: Sequence[str], index_id: str = FIXED_ID
) -> Index:
    index = Index.create(path, analyzer="english", index_id=index_id)
    for batch in batches:
        index.add_many(batch)
        index.commit()
    index.delete_many(deletes)
    index.commit()
    return index


def test_same_documents_give_byte_identical_files(tmp_path: Path) -> None:
    documents = make_corpus(30)
    batches = [documents[:12], documents[12:25], documents[25:]]
    deletes = ["doc-03", "doc-14", "doc-27"]
    first = build_into(tmp_path / "a", batches, deletes)
    first.close()
    shuffled = []
    for seed, batch in enumerate(batches):
        copy = list(batch)
        random.Random(seed).shuffle(copy)
        assert copy != list(batch)
        shuffled.append(copy)
    second = build_into(tmp_path / "b", shuffled, list(reversed(deletes)))
    second.close()
    third = build_into(tmp_path / "c", batches, deletes)
    third.close()
    hashes = file_hashes(tmp_path / "a")
    assert sum(1 for name in hashes if SEGMENT_FILE.match(name)) == 3
    assert any(TOMBSTONE_FILE.match(name) for name in hashes)
    assert MANIFEST in hashes
    assert file_hashes(tmp_path / "b") == hashes
    assert file_hashes(tmp_path / "c") == hashes


def test_index_id_changes_only_the_stamp(tmp_path: Path) -> None:
    """Another index id: every file differs, but only in header bytes 28..63 (CRC and stamp)."""
    documents = make_corpus(12)
    build_into(tmp_path / "a", [documents], ["doc-03"]).close()
    build_into(tmp_path / "b", [documents], ["doc-03"], index_id="f" * 32).close()
    for name in os.listdir(tmp_path / "a"):
        if SEGMENT_FILE.match(name) or TOMBSTONE_FILE.match(name):
            first, second = (tmp_path / "a" / name).read_bytes(), (tmp_path / "b" / name).read_bytes()
            assert first != second
            assert first[:28] == second[:28] and first[64:] == second[64:]


def test_one_by_one_adds_in_any_order_give_identical_segments(tmp_path: Path) -> None:
    documents = make_corpus(20)
    for name, order in [("forward", documents), ("backward", list(reversed(documents)))]:
        index = Index.create(tmp_path / name, index_id=FIXED_ID)
        for document in order:
            index.add(document)
        index.commit()
        index.close()
    forward = {n: h for n, h in file_hashes(tmp_path / "forward").items() if SEGMENT_FILE.match(n)}
    backward = {n: h for n, h in file_hashes(tmp_path / "backward").items() if SEGMENT_FILE.match(n)}
    assert len(forward) == 1
    assert forward == backward


def test_encode_segment_is_deterministic() -> None:
    documents = analysed(make_corpus(25))
    data = encode_segment(documents, DIM)
    assert encode_segment(documents, DIM) == data
    assert encode_segment(list(reversed(documents)), DIM) == data
    shuffled = list(documents)
    random.Random(5).shuffle(shuffled)
    assert encode_segment(shuffled, DIM) == data
    # A postings dict in another insertion order is the same document.
    reordered = [
        SegmentDocument(d.document, dict(reversed(list(d.terms.items()))), d.length) for d in documents
    ]
    assert encode_segment(reordered, DIM) == data
    # ...and a different document is different bytes (the comparison can fail).
    changed = [*documents[:-1], analysed([Document(documents[-1].document.key, "other words")])[0]]
    assert encode_segment(changed, DIM) != data


def in_memory(data: bytes) -> SegmentReader:
    return SegmentReader(Path("<memory>"), data)


def test_merge_gives_the_bytes_of_a_fresh_build() -> None:
    documents = make_corpus(40)
    parts = [documents[0:15], documents[15:22], documents[22:40]]
    deleted = {"doc-02", "doc-15", "doc-16", "doc-30", "doc-39"}
    sources = []
    for part in parts:
        reader = in_memory(encode_segment(analysed(part), DIM))
        live = np.array([str(key) not in deleted for key in reader.keys().tolist()], dtype=bool)
        sources.append((reader, live))
    survivors = [d for d in documents if d.key not in deleted]
    expected = encode_segment(analysed(survivors), DIM)
    assert encode_columns(merge_columns(sources)) == expected
    # The merge is also independent of the order of its sources.
    assert encode_columns(merge_columns(list(reversed(sources)))) == expected
    # Merging a merge changes nothing.
    merged = in_memory(expected)
    assert encode_columns(merge_columns([(merged, np.ones(merged.n_docs, dtype=bool))])) == expected


def test_merge_with_a_fully_deleted_source() -> None:
    documents = make_corpus(20)
    first = in_memory(encode_segment(analysed(documents[:10]), DIM))
    second = in_memory(encode_segment(analysed(documents[10:]), DIM))
    columns = merge_columns([(first, np.zeros(10, dtype=bool)), (second, np.ones(10, dtype=bool))])
    assert encode_columns(columns) == encode_segment(analysed(documents[10:]), DIM)


def test_merge_of_a_segment_without_vectors_and_one_with_vectors() -> None:
    """A segment sealed before the first vector arrived has no vector width of its own."""
    plain = [Document(f"p-{i}", f"plain text {WORDS[i]}") for i in range(5)]
    with_vectors = [
        Document(f"v-{i}", f"vector text {WORDS[i]}", vector=np.full(4, i + 1.0, np.float32))
        for i in range(5)
    ]
    first = in_memory(encode_segment(analysed(plain), None))
    second = in_memory(encode_segment(analysed(with_vectors), 4))
    sources = [(first, np.ones(5, dtype=bool)), (second, np.ones(5, dtype=bool))]
    assert encode_columns(merge_columns(sources)) == encode_segment(analysed(plain + with_vectors), 4)


def test_index_merge_of_a_segment_sealed_before_any_vector(tmp_path: Path) -> None:
    index = Index.create(tmp_path / "index")
    index.add_many([Document("a", "alpha beta"), Document("b", "beta gamma")])
    index.commit()
    index.add_many([Document("c", "gamma", vector=np.ones(4, np.float32))])
    index.commit()
    query = Query("beta gamma", vector=np.ones(4, np.float32))
    before = hits(index.search(query, 10, RRF(), BM25Scorer(), VectorScorer()))
    assert index.merge(force=True) == 2
    assert hits(index.search(query, 10, RRF(), BM25Scorer(), VectorScorer())) == before


def test_index_merge_writes_the_bytes_of_a_fresh_build(tmp_path: Path) -> None:
    path = tmp_path / "index"
    documents = make_corpus(30)
    index = Index.create(path, analyzer="english")
    for start in range(0, 30, 10):
        index.add_many(documents[start : start + 10])
        index.commit()
    index.delete_many(["doc-01", "doc-12", "doc-29"])
    index.add(Document("doc-05", "replaced text about graph ranking", vector=np.ones(DIM, np.float32)))
    index.commit()
    assert index.merge(force=True) >= 3
    [name] = manifest_segments(path)
    live = [index.get(key) for key in index.keys()]  # noqa: SIM118 (Index is not a mapping)
    fresh = encode_segment(analysed(live), DIM)
    stamp = stamp_of(path / name)
    assert stamp == FileStamp(index._index_id, int(name[4:10]), 0)
    assert (path / name).read_bytes() == stamped_header(fresh, stamp) + fresh[64:]


# ---------------------------------------------------------------------------- merges never change a ranking

QUERY_VECTOR = np.random.default_rng(17).standard_normal(DIM).astype(np.float32)

SEARCHES: list[tuple[str, Query, int, Fuser, tuple[Scorer, ...]]] = [
    ("text-only", Query("graph retrieval ranking"), 10, RRF(), (BM25Scorer(),)),
    ("text-only-params", Query("dense vector posting"), 7, RRF(), (BM25Scorer(k1=0.9, b=0.3),)),
    (
        "hybrid-rrf",
        Query("sparse search fusion", vector=QUERY_VECTOR),
        10,
        RRF(),
        (BM25Scorer(), VectorScorer()),
    ),
    (
        "hybrid-score-minmax",
        Query("citation index merge", vector=QUERY_VECTOR),
        10,
        ScoreFusion(),
        (BM25Scorer(), VectorScorer()),
    ),
    (
        "hybrid-score-zscore",
        Query("segment term", vector=QUERY_VECTOR),
        10,
        ScoreFusion(norm="zscore"),
        (BM25Scorer(), VectorScorer()),
    ),
    ("vector-only", Query(vector=QUERY_VECTOR), 15, RRF(), (VectorScorer(),)),
    ("graph-seeded", Query("recency query"), 12, RRF(), (GraphScorer(BM25Scorer()),)),
    ("pagerank-seeded", Query("fusion ranking"), 12, RRF(), (PageRankScorer(BM25Scorer()),)),
    (
        "text-graph-pagerank",
        Query("graph citation"),
        10,
        WeightedRRF([1.0, 0.5, 0.5]),
        (BM25Scorer(), GraphScorer(BM25Scorer(), seed_n=3), PageRankScorer(BM25Scorer(), seed_n=3)),
    ),
    (
        "explicit-seeds",
        Query(seeds=("doc-07", "doc-33", "doc-04", "nowhere")),
        10,
        RRF(),
        (GraphScorer(keep_seeds=True), PageRankScorer()),
    ),
    ("recency", Query("term index"), 10, RRF(), (BM25Scorer(), RecencyScorer(timedelta(days=10)))),
    ("empty-result", Query("zzzunknownword"), 10, RRF(), (BM25Scorer(), GraphScorer(BM25Scorer()))),
    (
        "k-larger-than-corpus",
        Query("graph", vector=QUERY_VECTOR),
        500,
        RRF(),
        (BM25Scorer(), VectorScorer(), RecencyScorer(timedelta(days=30))),
    ),
]
LABELS = [label for label, *_ in SEARCHES]
STAGES = ["reader-before", "policy-merge", "force-merge", "reopened", "reopened-writer"]


def run_searches(index: Index) -> dict[str, tuple[list[dict[str, Any]], tuple[str, ...]]]:
    results = {}
    for label, query, k, fuser, scorers in SEARCHES:
        found = index.search(query, k, fuser, *scorers)
        results[label] = (hits(found), found.signals)
    return results


@pytest.fixture(scope="module")
def ranking_stages(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, dict[str, tuple[list[dict[str, Any]], tuple[str, ...]]]]:
    """Results of every search before any merge, then at each later stage."""
    path = tmp_path_factory.mktemp("rankings") / "index"
    documents = make_corpus(60)
    index = Index.create(path, analyzer="english", merge_policy=MergePolicy(factor=2))
    for start in range(0, 60, 15):
        index.add_many(documents[start : start + 15])
        index.commit()
    index.delete_many(["doc-02", "doc-16", "doc-17", "doc-40", "doc-59"])
    upserts = make_corpus(60, seed=99)
    index.add_many([upserts[i] for i in (4, 20, 33, 47, 58)])
    index.commit()
    index.delete("doc-47")  # an upserted copy deleted again, in the newest segment
    index.commit()
    assert index.segment_count == 5
    stages = {"before": run_searches(index)}
    stages["reader-before"] = run_searches(Index.open(path, readonly=True))
    merged = index.merge()
    assert merged == 2, "the factor-2 policy merges the two smallest segments of the lowest full tier"
    assert index.segment_count == 4
    stages["policy-merge"] = run_searches(index)
    assert index.merge(force=True) == 4
    assert index.segment_count == 1
    assert len(manifest_segments(path)) == 1
    stages["force-merge"] = run_searches(index)
    index.close()
    stages["reopened"] = run_searches(Index.open(path, readonly=True))
    with Index.open(path) as writer:
        stages["reopened-writer"] = run_searches(writer)
    return stages


def test_searches_are_not_trivial(
    ranking_stages: dict[str, dict[str, tuple[list[dict[str, Any]], tuple[str, ...]]]],
) -> None:
    before = ranking_stages["before"]
    for label in LABELS:
        found, _ = before[label]
        if label == "empty-result":
            assert found == []
        else:
            assert len(found) > 0, label
    assert len(before["k-larger-than-corpus"][0]) > 40
    keys = {hit["key"] for label in LABELS for hit in before[label][0]}
    assert "doc-02" not in keys and "doc-47" not in keys  # deleted documents never come back


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("label", LABELS)
def test_rankings_identical_to_the_bit(
    ranking_stages: dict[str, dict[str, tuple[list[dict[str, Any]], tuple[str, ...]]]],
    label: str,
    stage: str,
) -> None:
    before_hits, before_signals = ranking_stages["before"][label]
    after_hits, after_signals = ranking_stages[stage][label]
    # Dict equality compares floats with ==: scores and contributions equal to the bit.
    assert after_signals == before_signals
    assert [h["key"] for h in after_hits] == [h["key"] for h in before_hits]
    assert after_hits == before_hits


# ---------------------------------------------------------------------------- merge policy


@pytest.mark.parametrize(
    ("documents", "tier"),
    [(0, 0), (1, 0), (9, 0), (10, 1), (11, 1), (99, 1), (100, 2), (999, 2), (1000, 3), (10**6, 6)],
)
def test_merge_policy_tiers(documents: int, tier: int) -> None:
    assert MergePolicy(factor=10).tier(documents) == tier


def test_merge_policy_tiers_other_factor() -> None:
    policy = MergePolicy(factor=3)
    assert [policy.tier(n) for n in (1, 2, 3, 8, 9, 26, 27, 81)] == [0, 0, 1, 1, 2, 2, 3, 4]
    assert MergePolicy().factor == 10


def test_merge_policy_select() -> None:
    policy = MergePolicy(factor=10)
    assert policy.select([]) == []
    assert policy.select([5] * 9) == []
    assert policy.select([5] * 10) == list(range(10))
    # Eleven in tier 0: the ten smallest (ties by position), returned in position order.
    sizes = [9, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1]
    assert policy.select(sizes) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 10]
    # Tier 0 is not full, tier 1 is: tier 1's segments merge, the small ones wait.
    sizes = [3, 50, 3, 10, 11, 12, 13, 14, 15, 16, 17, 18, 99, 3]
    assert policy.select(sizes) == [1, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    # The lowest full tier wins over a higher one.
    sizes = [500] * 10 + [5] * 10
    assert policy.select(sizes) == list(range(10, 20))
    # Nine segments in each of three tiers: nothing is full.
    assert policy.select([5] * 9 + [50] * 9 + [500] * 9) == []
    assert MergePolicy(factor=2).select([1, 1]) == [0, 1]
    assert MergePolicy(factor=2).select([1, 2]) == []


@pytest.mark.parametrize("factor", [1, 0, -3, True, 2.5, "10", None])
def test_merge_policy_factor_validation(factor: Any) -> None:
    with pytest.raises(InvalidParameterError):
        MergePolicy(factor=factor)


def test_merge_policy_smallest_factor() -> None:
    assert MergePolicy(factor=2).factor == 2


def test_policy_merge_does_nothing_without_a_full_tier(tmp_path: Path) -> None:
    index = Index.create(tmp_path / "index", merge_policy=MergePolicy(factor=10))
    documents = make_corpus(30)
    for start in range(0, 30, 10):
        index.add_many(documents[start : start + 10])
        index.commit()
    before = file_stats(tmp_path / "index")
    assert index.merge() == 0
    assert index.segment_count == 3
    assert file_stats(tmp_path / "index") == before


# ---------------------------------------------------------------------------- incremental commits


def test_commit_writes_only_what_is_new(tmp_path: Path) -> None:
    path = tmp_path / "index"
    documents = make_corpus(30)
    index = Index.create(path, analyzer="english")
    index.add_many(documents[:10])
    index.commit()
    first = file_stats(path)
    assert list(first) == ["seg-000001.wseg"]

    index.add_many(documents[10:20])
    index.commit()
    second = file_stats(path)
    assert set(second) - set(first) == {"seg-000002.wseg"}
    for name, stat in first.items():
        assert second[name] == stat, f"{name} was rewritten"

    # Deletes alone write one tombstone file and no segment.
    index.delete_many(["doc-03", "doc-04"])
    index.commit()
    third = file_stats(path)
    new = set(third) - set(second)
    assert len(new) == 1
    [tombstone] = new
    assert TOMBSTONE_FILE.match(tombstone) and tombstone.startswith("seg-000001.")
    for name, stat in second.items():
        assert third[name] == stat

    # An empty commit writes no segment and no tombstone, and rewrites nothing.
    names_before = sorted(p.name for p in path.iterdir())
    index.commit()
    assert sorted(p.name for p in path.iterdir()) == names_before
    assert file_stats(path) == third

    # An upsert: one new segment for the new copy, one tombstone for the old one.
    index.add(Document("doc-15", "an upserted document"))
    index.commit()
    fourth = file_stats(path)
    assert {n for n in set(fourth) - set(third) if SEGMENT_FILE.match(n)} == {"seg-000003.wseg"}
    assert any(n.startswith("seg-000002.del-") for n in set(fourth) - set(third))
    for name in ("seg-000001.wseg", "seg-000002.wseg", tombstone):
        assert fourth[name] == third[name]
    index.close()
    reopened = Index.open(path, readonly=True)
    assert reopened.keys() == sorted({d.key for d in documents[:20]} - {"doc-03", "doc-04"})
    assert reopened.get("doc-15").text == "an upserted document"


def test_directory_holds_exactly_what_the_manifest_names(tmp_path: Path) -> None:
    path = tmp_path / "index"
    documents = make_corpus(20)
    index = Index.create(path)
    for step in range(4):
        index.add_many(documents[step * 5 : step * 5 + 5])
        index.delete(f"doc-{step:02d}")
        index.commit()
        body = manifest_body(path)
        named = {s["name"] for s in body["segments"]} | {
            s["deletes"] for s in body["segments"] if s["deletes"]
        }
        assert {p.name for p in path.iterdir()} == named | {MANIFEST, LOCK}


def test_fully_deleted_segment_leaves_the_manifest(tmp_path: Path) -> None:
    path = tmp_path / "index"
    documents = make_corpus(20)
    index = Index.create(path)
    index.add_many(documents[:8])
    index.commit()
    index.add_many(documents[8:])
    index.commit()
    index.delete_many(["doc-00", "doc-01"])
    index.commit()
    assert any(TOMBSTONE_FILE.match(p.name) for p in path.iterdir())
    index.delete_many([d.key for d in documents[2:8]])
    index.commit()
    assert manifest_segments(path) == ["seg-000002.wseg"]
    assert manifest_body(path)["segments"][0]["deletes"] is None
    assert sorted(p.name for p in path.iterdir()) == sorted([MANIFEST, LOCK, "seg-000002.wseg"])
    assert index.segment_count == 1
    # Upserting every document of a segment retires it too.
    index.add_many([Document(d.key, "new text " + d.text) for d in documents[8:]])
    index.commit()
    assert manifest_segments(path) == ["seg-000003.wseg"]
    assert Index.open(path, readonly=True).keys() == sorted(d.key for d in documents[8:])


def test_segment_sealed_in_memory_and_deleted_is_never_written(tmp_path: Path) -> None:
    path = tmp_path / "index"
    index = Index.create(path)
    index.add_many(make_corpus(6))
    assert len(index.search("graph search vector", 5, RRF(), BM25Scorer())) > 0  # seals the buffer
    index.delete_many([f"doc-{i:02d}" for i in range(6)])
    index.commit()
    assert manifest_segments(path) == []
    assert sorted(p.name for p in path.iterdir()) == sorted([MANIFEST, LOCK])


ORPHANS = ["seg-000099.wseg", "seg-000001.del-000077", "MANIFEST.tmp", "seg-000002.wseg.tmp-123"]
FOREIGN = ["README.txt", "seg-1.wseg", "notes.tmp", "seg-000001.wseg.bak", "x.tmp-9"]


def plant(path: Path, names: Sequence[str]) -> None:
    for name in names:
        (path / name).write_bytes(b"stray " + name.encode())


def test_orphans_are_swept_by_a_writer_at_open(tmp_path: Path) -> None:
    path = tmp_path / "index"
    index = Index.create(path)
    index.add_many(make_corpus(10))
    index.commit()
    index.close()
    committed = file_hashes(path)
    plant(path, ORPHANS + FOREIGN)
    # A reader never deletes anything.
    reader = Index.open(path, readonly=True)
    assert all((path / name).exists() for name in ORPHANS + FOREIGN)
    assert len(reader) == 10
    with Index.open(path) as writer:
        assert len(writer) == 10
        for name in ORPHANS:
            assert not (path / name).exists(), f"{name} was not swept"
        for name in FOREIGN:
            assert (path / name).read_bytes() == b"stray " + name.encode()
        assert {n: h for n, h in file_hashes(path).items() if n not in FOREIGN} == committed


def test_orphans_are_swept_after_commit(tmp_path: Path) -> None:
    path = tmp_path / "index"
    index = Index.create(path)
    index.add_many(make_corpus(10))
    index.commit()
    plant(path, ORPHANS + FOREIGN)
    index.add(Document("extra", "one more document"))
    index.commit()
    for name in ORPHANS:
        assert not (path / name).exists(), f"{name} was not swept"
    for name in FOREIGN:
        assert (path / name).exists()
    assert "extra" in Index.open(path, readonly=True)


# ---------------------------------------------------------------------------- readers


def test_reader_alongside_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "index"
    documents = make_corpus(20)
    writer = Index.create(path)
    writer.add_many(documents[:10])
    writer.commit()
    with pytest.raises(IndexLockedError):
        Index.open(path)
    reader = Index.open(path, readonly=True)
    assert reader.readonly
    assert reader.keys() == writer.keys()
    attempts: list[Callable[[], object]] = [
        lambda: reader.add(documents[15]),
        lambda: reader.add_many(documents[15:]),
        lambda: reader.delete("doc-01"),
        lambda: reader.delete_many(["doc-01"]),
        reader.commit,
        reader.merge,
        lambda: reader.merge(force=True),
    ]
    for attempt in attempts:
        with pytest.raises(IndexStorageError):
            attempt()
    assert reader.keys() == writer.keys()
    query = Query("graph search vector ranking", vector=QUERY_VECTOR)
    old_hits = hits(reader.search(query, 30, RRF(), BM25Scorer(), VectorScorer()))
    assert reader.refresh() is False

    writer.add_many(documents[10:])
    writer.delete("doc-01")
    assert "doc-15" not in reader
    writer.commit()
    # A new commit is invisible until refresh().
    assert "doc-15" not in reader and "doc-01" in reader
    assert hits(reader.search(query, 30, RRF(), BM25Scorer(), VectorScorer())) == old_hits
    assert reader.refresh() is True
    assert reader.keys() == writer.keys()
    assert "doc-01" not in reader
    assert hits(reader.search(query, 30, RRF(), BM25Scorer(), VectorScorer())) == hits(
        writer.search(query, 30, RRF(), BM25Scorer(), VectorScorer())
    )
    assert reader.refresh() is False

    writer.close()


def test_reader_keeps_its_generation_through_a_merge_and_adopts_it_on_refresh(tmp_path: Path) -> None:
    path = tmp_path / "index"
    documents = make_corpus(20)
    writer = Index.create(path)
    for start in (0, 10):
        writer.add_many(documents[start : start + 10])
        writer.commit()
    reader = Index.open(path, readonly=True)
    query = Query("graph search vector ranking", vector=QUERY_VECTOR)
    reader_hits = hits(reader.search(query, 30, RRF(), BM25Scorer(), VectorScorer()))
    old_files = set(manifest_segments(path))
    assert writer.merge(force=True) == 2
    [merged] = manifest_segments(path)
    assert merged not in old_files and not any((path / name).exists() for name in old_files)
    # The swept files stay mapped: the reader answers from its own generation.
    assert hits(reader.search(query, 30, RRF(), BM25Scorer(), VectorScorer())) == reader_hits
    assert reader.get("doc-19").text == documents[19].text
    # The merge is a new commit: refresh adopts it (same answers, from the merged file).
    assert reader.refresh() is True
    assert [part.reader.path.name for part in reader.snapshot().parts] == [merged]
    assert hits(reader.search(query, 30, RRF(), BM25Scorer(), VectorScorer())) == reader_hits
    writer.close()


def test_reader_opening_while_a_merge_sweeps_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader reads the manifest, a merge commits and sweeps, the reader opens the files."""
    path = tmp_path / "index"
    documents = make_corpus(20)
    writer = Index.create(path)
    for start in (0, 10):
        writer.add_many(documents[start : start + 10])
        writer.commit()
    expected = writer.keys()
    original = IndexDirectory.read_manifest
    calls: list[int] = []

    def read_then_merge(directory: IndexDirectory) -> Manifest:
        manifest = original(directory)
        calls.append(manifest.generation)
        if len(calls) == 1:
            assert writer.merge(force=True) == 2  # sweeps the files this manifest names
        return manifest

    monkeypatch.setattr(IndexDirectory, "read_manifest", read_then_merge)
    reader = Index.open(path, readonly=True)
    assert len(calls) >= 2, "the reader never saw the missing file and reread the manifest"
    assert reader.keys() == expected
    assert [part.reader.path.name for part in reader.snapshot().parts] == manifest_segments(path)
    writer.close()


class ReadLog:
    """Records every section read through SectionFile.array and SectionFile.raw."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reads: list[tuple[str, str]] = []
        for method in ("array", "raw"):
            original: Callable[..., Any] = getattr(SectionFile, method)
            monkeypatch.setattr(SectionFile, method, self._wrap(original))

    def _wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(file: SectionFile, name: str) -> Any:
            self.reads.append((file.path.name, name))
            return original(file, name)

        return wrapper

    def sections(self, pattern: re.Pattern[str]) -> set[str]:
        return {section for file, section in self.reads if pattern.match(file)}


@pytest.fixture
def committed_index(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "index"
    index = Index.create(path)
    documents = make_corpus(40)
    for start in range(0, 40, 20):
        index.add_many(documents[start : start + 20])
        index.commit()
    index.delete_many(["doc-05", "doc-25"])
    index.commit()
    index.close()
    yield path


@pytest.mark.parametrize("readonly", [True, False])
def test_open_reads_no_corpus(committed_index: Path, monkeypatch: pytest.MonkeyPatch, readonly: bool) -> None:
    log = ReadLog(monkeypatch)
    index = Index.open(committed_index, readonly=readonly)
    assert len(index) == 38
    assert index.segment_count == 2
    assert log.sections(SEGMENT_FILE) <= {"meta"}
    assert log.sections(TOMBSTONE_FILE) <= {"bits", "count"}
    # The instrument works: a search reads postings, a fetch reads the stored documents.
    index.search("graph retrieval", 5, RRF(), BM25Scorer())
    assert "post.offsets" in log.sections(SEGMENT_FILE)
    index.get("doc-07")
    assert "stored.blob" in log.sections(SEGMENT_FILE)
    index.close()


def test_text_search_reads_no_vectors_and_no_links(
    committed_index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A text-only search reads postings, lengths and the hits' stored fields; nothing else.

    ``SectionFile.array`` checks a whole section's CRC32C on first touch, so touching
    ``vec.matrix`` or ``links.blob`` here would cost a pass over every vector and link
    of the segment on the first text query.
    """
    index = Index.open(committed_index, readonly=True)
    log = ReadLog(monkeypatch)
    assert len(index.search("graph retrieval", 5, RRF(), BM25Scorer())) > 0
    touched = log.sections(SEGMENT_FILE)
    assert "post.offsets" in touched
    assert not touched & {"vec.matrix", "vec.rows", "links.blob", "links.offsets", "links.doc"}


# ---------------------------------------------------------------------------- postings verified per term


def single_segment_index(path: Path) -> tuple[str, str]:
    """An index of one segment; returns its file name and a term it holds (besides 'graph')."""
    index = Index.create(path, analyzer="simple")
    index.add_many(
        [
            Document("a", "graph alpha alpha beta"),
            Document("b", "graph beta gamma"),
            Document("c", "alpha delta graph"),
            Document("d", "epsilon graph graph"),
            Document("e", "beta delta"),
        ]
    )
    index.commit()
    index.close()
    [name] = manifest_segments(path)
    return name, "beta"


def flip_in_term(segment: Path, term: str, section: str, word: int) -> None:
    """Flip one bit inside ``term``'s run of ``section`` (``post.data``), ``word`` words in."""
    reader = SegmentReader(segment)
    position = reader.term_position(term)
    assert position >= 0
    offsets = reader.section_file.array("post.data_offsets")
    start, end = int(offsets[position]), int(offsets[position + 1])
    assert end - start > word
    del reader
    data = bytearray(segment.read_bytes())
    offset, _ = section_extents(bytes(data))[section]
    data[offset + 4 * (start + word)] ^= 0x04
    segment.write_bytes(bytes(data))


def text_hits(index: Index, text: str) -> list[dict[str, Any]]:
    return hits(index.search(text, 10, RRF(), BM25Scorer()))


@pytest.mark.parametrize("word", [0, -1], ids=["first-word", "last-word"])
@pytest.mark.parametrize("resealed", [True, False], ids=["section-crc-resealed", "raw-flip"])
def test_postings_are_verified_per_term(tmp_path: Path, word: int, resealed: bool) -> None:
    section = "post.data"
    clean = tmp_path / "clean"
    name, damaged_term = single_segment_index(clean)
    reference = Index.open(clean, readonly=True)
    expected = text_hits(reference, "graph epsilon")
    assert len(expected) == 4
    path = tmp_path / "damaged"
    shutil.copytree(clean, path)
    reader = SegmentReader(path / name)
    position = reader.term_position(damaged_term)
    offsets = reader.section_file.array("post.data_offsets")
    words = int(offsets[position + 1] - offsets[position])
    del reader
    flip_in_term(path / name, damaged_term, section, word % words)
    if resealed:
        # Only the per-term checksum can catch it now: the section checksum is correct again.
        (path / name).write_bytes(reseal((path / name).read_bytes()))
        # ...and a manifest that records the re-sealed table (else open refuses the file).
        refresh_identities(path)
    index = Index.open(path, readonly=True)
    # An undamaged term answers exactly as before, however the file was damaged elsewhere...
    assert text_hits(index, "graph epsilon") == expected
    # ...while the damaged term's postings are refused, naming the file.
    with pytest.raises(CorruptIndexError, match="seg-"):
        index.search(damaged_term, 10, RRF(), BM25Scorer())
    with pytest.raises(CorruptIndexError):
        index.search(f"graph {damaged_term}", 10, RRF(), BM25Scorer())
    assert text_hits(index, "delta") == text_hits(reference, "delta")
    assert not index.scrub().ok


def test_reseal_helper_is_faithful(tmp_path: Path) -> None:
    """Resealing an undamaged file changes no byte (so the tests above damage only what they say)."""
    name, _ = single_segment_index(tmp_path / "index")
    data = (tmp_path / "index" / name).read_bytes()
    assert reseal(data) == data


def test_vectors_are_read_as_float32_blocks(committed_index: Path) -> None:
    index = Index.open(committed_index, readonly=True)
    blocks = index.snapshot().vector_blocks()
    assert len(blocks) == 2
    for block in blocks:
        matrix: NDArray[np.float32] = block.matrix
        assert matrix.dtype == np.float32
        assert matrix.flags.c_contiguous
        assert not matrix.flags.writeable
        assert matrix.shape[1] == DIM
        assert matrix.base is not None  # a view over the file's map, not a decoded copy
    with_vectors = [key for key in index.keys() if index.get(key).vector is not None]  # noqa: SIM118
    assert sum(int((block.ids >= 0).sum()) for block in blocks) == len(with_vectors)


def test_lock_file_is_the_only_unnamed_file(committed_index: Path) -> None:
    body = manifest_body(committed_index)
    named = {s["name"] for s in body["segments"]} | {s["deletes"] for s in body["segments"] if s["deletes"]}
    assert {p.name for p in committed_index.iterdir()} == named | {MANIFEST, LOCK}
    assert os.path.getsize(committed_index / LOCK) == 0


def test_background_merge_runs_after_commits_and_keeps_rankings(tmp_path: Path) -> None:
    path = tmp_path / "bg"
    with Index.create(path, merge_policy=MergePolicy(factor=2), background_merge=True) as index:
        for batch in range(4):
            index.add_many([Document(f"d{batch}-{i}", f"alpha beta {batch} {i}") for i in range(5)])
            index.commit()
            index.wait_for_merges()
        before = [hit.to_dict() for hit in index.search("alpha beta 2", 10, RRF(), BM25Scorer())]
        assert index.segment_count < 4
    reopened = Index.open(path, readonly=True)
    assert reopened.segment_count < 4
    assert [hit.to_dict() for hit in reopened.search("alpha beta 2", 10, RRF(), BM25Scorer())] == before
    assert len(reopened) == 20


class CountingPause:
    """A pause that counts its calls and can run something on its first one."""

    def __init__(self, on_first: Callable[[], None] | None = None) -> None:
        self.calls = 0
        self.on_first = on_first

    def __call__(self) -> None:
        self.calls += 1
        if self.calls == 1 and self.on_first is not None:
            self.on_first()


def test_pauses_never_change_the_bytes() -> None:
    documents = analysed(make_corpus(700))  # several slices of every loop
    pause = CountingPause()
    assert encode_segment(documents, DIM, pause=pause) == encode_segment(documents, DIM)
    assert pause.calls >= 700 // SLICE
    columns_pause = CountingPause()
    first = in_memory(encode_segment(documents[:400], DIM))
    second = in_memory(encode_segment(documents[400:], DIM))
    live = [(first, np.ones(first.n_docs, bool)), (second, np.ones(second.n_docs, bool))]
    merged = encode_columns(merge_columns(live, pause=columns_pause), pause=columns_pause)
    assert merged == encode_columns(merge_columns(live)) == encode_segment(documents, DIM)
    assert columns_pause.calls >= 700 // SLICE


def test_sorted_in_slices_is_sorted() -> None:
    rng = np.random.default_rng(3)
    words = [f"w{n}" for n in rng.integers(0, 10_000, size=3 * SLICE + 17).tolist()]
    pause = CountingPause()
    assert sorted_in_slices(words, None, pause) == sorted(words)
    assert pause.calls > 3
    assert sorted_in_slices(words[:5], None, pause) == sorted(words[:5])


def test_writes_during_a_seal_wait_and_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import weftsearch.engine.index as index_module

    index = Index.create(tmp_path / "index")
    index.add_many(make_corpus(3 * SLICE))

    def write() -> None:
        index.add(Document("doc-03", "replaced while sealing"))
        index.delete("doc-04")
        index.add(Document("late-new", "arrived while sealing"))

    writer = threading.Thread(target=write)

    def start_once() -> None:
        if writer.ident is None:
            writer.start()

    # The other thread writes while the commit's seal is pausing: its writes
    # wait for the write lock, then land in the next buffer.
    monkeypatch.setattr(index_module, "YieldToSearches", lambda searches: CountingPause(start_once))
    index.commit()
    writer.join()
    monkeypatch.undo()
    index.commit()
    index.close()
    reopened = Index.open(tmp_path / "index", readonly=True)
    assert reopened.get("doc-03").text == "replaced while sealing"
    assert "doc-04" not in reopened
    assert reopened.get("late-new").text == "arrived while sealing"
    assert len(reopened) == 3 * SLICE
    assert reopened.scrub().ok


def _commit_with_fork_threshold(path: Path, threshold: int | None, docs: Sequence[Document]) -> Index:
    index = Index.create(path, index_id=FIXED_ID)
    index._fork_encode_min = threshold
    index.add_many(docs)
    index.commit()
    return index


def test_large_commits_encoded_in_a_child_give_the_same_bytes(tmp_path: Path) -> None:
    docs = make_corpus(40)
    forked = _commit_with_fork_threshold(tmp_path / "forked", 10, docs)
    local = _commit_with_fork_threshold(tmp_path / "local", None, docs)
    forked.close()
    local.close()
    assert file_hashes(tmp_path / "forked") == file_hashes(tmp_path / "local")
    reopened = Index.open(tmp_path / "forked", readonly=True)
    assert len(reopened) == 40
    assert [h.to_dict() for h in reopened.search("graph search vector", 10, RRF(), BM25Scorer())] == [
        h.to_dict()
        for h in Index.open(tmp_path / "local", readonly=True).search(
            "graph search vector", 10, RRF(), BM25Scorer()
        )
    ]


def test_writes_during_a_child_encode_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import weftsearch.engine.children as index_module

    docs = make_corpus(30)
    index = Index.create(tmp_path / "index")
    index._fork_encode_min = 10
    index.add_many(docs)
    real = index_module.encode_in_child

    def encode_while_writing(*args: Any) -> bool:
        ok = real(*args)
        assert ok, "the child should have encoded and written the segment"
        # Another thread's writes land while the child works.
        index.add(Document("doc-03", "replaced while encoding"))
        index.delete("doc-04")
        index.add(Document("late-new", "arrived while encoding"))
        return ok

    monkeypatch.setattr(index_module, "encode_in_child", encode_while_writing)
    index.commit()
    index.close()
    reopened = Index.open(tmp_path / "index", readonly=True)
    assert reopened.get("doc-03").text == "replaced while encoding"
    assert "doc-04" not in reopened
    assert reopened.get("late-new").text == "arrived while encoding"
    assert len(reopened) == 30
    assert reopened.scrub().ok


def test_a_failed_child_falls_back_to_encoding_in_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import weftsearch.engine.children as index_module

    monkeypatch.setattr(index_module, "encode_in_child", lambda *args: False)
    index = _commit_with_fork_threshold(tmp_path / "index", 10, make_corpus(20))
    index.close()
    assert len(Index.open(tmp_path / "index", readonly=True)) == 20


def test_a_seal_during_a_child_encode_keeps_every_document_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import weftsearch.engine.children as index_module

    docs = make_corpus(30)
    index = Index.create(tmp_path / "index")
    index._fork_encode_min = 10
    index.add_many(docs)
    real = index_module.encode_in_child

    def encode_then_seal(*args: Any) -> bool:
        ok = real(*args)
        assert ok, "the child should have encoded and written the segment"
        # The writer searches while the child works: that seals the same
        # documents into an in-memory segment, with no write to tell of it.
        index.snapshot()
        return ok

    monkeypatch.setattr(index_module, "encode_in_child", encode_then_seal)
    index.commit()
    assert len(index) == 30
    index.close()
    reopened = Index.open(tmp_path / "index", readonly=True)
    assert len(reopened) == 30
    assert sorted(reopened.keys()) == sorted(d.key for d in docs)
    assert reopened.scrub().ok


def _merged_with_fork_threshold(path: Path, threshold: int | None) -> Index:
    """Three commits (with a delete and a replacement), then a forced merge at ``threshold``."""
    documents = make_corpus(45)
    index = Index.create(path, index_id=FIXED_ID)
    index._fork_encode_min = threshold
    for start in range(0, 45, 15):
        index._fork_encode_min = None  # the commits encode in this thread: only the merge differs
        index.add_many(documents[start : start + 15])
        index.commit()
    index.delete_many(["doc-01", "doc-17"])
    index.add(Document("doc-05", "replaced text about graph ranking", vector=np.ones(DIM, np.float32)))
    index.commit()
    index._fork_encode_min = threshold
    assert index.merge(force=True) >= 3
    return index


def test_large_merges_written_by_a_child_give_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import weftsearch.engine.children as index_module

    real = index_module.merge_in_child
    children: list[bool] = []

    def spy(*args: Any) -> bool:
        children.append(real(*args))
        return children[-1]

    monkeypatch.setattr(index_module, "merge_in_child", spy)
    forked = _merged_with_fork_threshold(tmp_path / "forked", 10)
    assert children == [True], "the forced merge should have been written by a child process"
    local = _merged_with_fork_threshold(tmp_path / "local", None)
    assert children == [True], "below the threshold (None: never) the merge stays in the writer's thread"
    assert hits(forked.search("graph ranking", 10, RRF(), BM25Scorer())) == hits(
        local.search("graph ranking", 10, RRF(), BM25Scorer())
    )
    forked.close()
    local.close()
    assert file_hashes(tmp_path / "forked") == file_hashes(tmp_path / "local")
    assert Index.open(tmp_path / "forked", readonly=True).scrub().ok


def test_a_merge_child_takes_no_lock_a_searching_thread_held_at_the_fork(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader's memo lock held by another thread when the writer forks must not stall the child.

    The child opens its sources afresh; had it used the parent's readers, their
    locks (copied locked into the child, with no thread there to release them)
    would hang it for ever.
    """
    import weftsearch.engine.children as index_module

    documents = make_corpus(40)
    index = Index.create(tmp_path / "index")
    for start in range(0, 40, 20):
        index.add_many(documents[start : start + 20])
        index.commit()
    index._fork_encode_min = 10
    readers = [segment.reader for segment in index._segments]
    held, release = threading.Event(), threading.Event()

    def hold_every_reader_lock() -> None:
        for reader in readers:
            reader._lock.acquire()
        held.set()
        release.wait(120)
        for reader in readers:
            reader._lock.release()

    real = index_module.merge_in_child
    outcome: list[bool] = []

    def merge_then_release(*args: Any) -> bool:
        outcome.append(real(*args))  # the child runs while the locks are held
        release.set()
        return outcome[-1]

    monkeypatch.setattr(index_module, "merge_in_child", merge_then_release)
    holder = threading.Thread(target=hold_every_reader_lock)
    holder.start()
    assert held.wait(30)
    merged: list[int] = []
    merger = threading.Thread(target=lambda: merged.append(index.merge(force=True)))
    merger.start()
    merger.join(120)
    release.set()
    holder.join(30)
    assert not merger.is_alive(), "the merge hung on a lock held at the fork"
    assert outcome == [True] and merged == [2]
    assert sorted(index.keys()) == sorted(d.key for d in documents)
    index.close()
    assert Index.open(tmp_path / "index", readonly=True).scrub().ok


def test_a_failed_merge_child_falls_back_to_merging_in_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import weftsearch.engine.children as index_module

    monkeypatch.setattr(index_module, "merge_in_child", lambda *args: False)
    forked = _merged_with_fork_threshold(tmp_path / "fallback", 10)
    forked.close()
    local = _merged_with_fork_threshold(tmp_path / "local", None)
    local.close()
    assert file_hashes(tmp_path / "fallback") == file_hashes(tmp_path / "local")


def test_a_damaged_source_fails_the_merge_child_and_the_merge_reports_it(tmp_path: Path) -> None:
    """The child verifies what it reads; the writer's own merge then names the damage (no laundering)."""
    path = tmp_path / "index"
    documents = make_corpus(40)
    index = Index.create(path)
    for start in range(0, 40, 20):
        index.add_many(documents[start : start + 20])
        index.commit()
    index._fork_encode_min = 10
    first = path / manifest_segments(path)[0]
    data = bytearray(first.read_bytes())
    offset, length = section_extents(bytes(data))["post.data"]
    data[offset + length // 2] ^= 0xFF  # a postings byte: caught when the merge reads it
    first.write_bytes(bytes(data))
    before = sorted(p.name for p in path.iterdir())
    with pytest.raises(CorruptIndexError):
        index.merge(force=True)
    assert not [p.name for p in path.iterdir() if ".tmp-" in p.name]
    index.close(discard=True)
    assert sorted(p.name for p in path.iterdir()) == before


def test_warming_a_segment_reader_changes_no_answer(tmp_path: Path) -> None:
    path = tmp_path / "index"
    with Index.create(path) as index:
        index.add_many(make_corpus(20))
        index.commit()
    [name] = [p for p in path.iterdir() if p.suffix == ".wseg"]
    warmed = SegmentReader(name)
    warmed.warm()
    reader = SegmentReader(name)
    for term in [*warmed.terms()[:10], "no-such-term"]:
        w_ids, w_tfs = warmed.postings(term)
        c_ids, c_tfs = reader.postings(term)
        assert w_ids.tolist() == c_ids.tolist() and w_tfs.tolist() == c_tfs.tolist()
    assert warmed.doc_lengths().tolist() == reader.doc_lengths().tolist()


# ---------------------------------------------------------------------------- term lookup


def test_term_lookup_finds_every_term_and_nothing_else() -> None:
    reader = in_memory(encode_segment(analysed(make_corpus(80)), DIM))
    terms = reader.terms()
    assert terms == sorted(terms) and len(terms) > 10
    for position, term in enumerate(terms):
        assert reader.term_position(term) == position
        assert reader.term_position(term) == position  # the remembered answer
    for absent in ["", "zzzz", "a" * 300, terms[0][:-1], terms[-1] + "x", "\ud800", "é"]:
        if absent not in terms:
            assert reader.term_position(absent) == -1
    empty = in_memory(encode_segment([], None))
    assert empty.term_position("anything") == -1


def test_terms_out_of_order_are_reported_and_never_answer_for_another_term() -> None:
    data = encode_segment(analysed(make_corpus(80)), DIM)
    reader = in_memory(data)
    terms = reader.terms()
    # Two terms of equal length swapped in place: every offset and CRC stays valid after resealing.
    first, second = next(
        (i, j)
        for i in range(len(terms))
        for j in range(i + 1, len(terms))
        if len(terms[i].encode()) == len(terms[j].encode())
    )
    offset, _ = section_extents(data)["terms.blob"]
    blob_offsets = reader._term_tables()[1]
    out = bytearray(data)
    a, b = int(blob_offsets[first]), int(blob_offsets[second])
    width = len(terms[first].encode())
    out[offset + a : offset + a + width], out[offset + b : offset + b + width] = (
        terms[second].encode(),
        terms[first].encode(),
    )
    damaged = in_memory(reseal(bytes(out)))
    assert any("not in strictly increasing order" in problem for problem in damaged.verify())
    stored = damaged.terms()
    for term in terms:
        position = damaged.term_position(term)
        assert position == -1 or stored[position] == term


@pytest.mark.skipif(not hasattr(os, "sched_getscheduler"), reason="needs Linux scheduling classes")
@pytest.mark.parametrize("priority", ["idle", "normal"])
def test_the_child_encoder_runs_at_the_commit_priority(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, priority: str
) -> None:
    import weftsearch.engine.children as children_module

    report = tmp_path / "policy"
    from weftsearch.storage.segment_writer import segment_columns as real

    def encode_and_report(*args: Any, **kwargs: Any) -> Any:
        # Runs in the forked child (what it builds the segment with): the parent's own class never changes.
        report.write_text(str(os.sched_getscheduler(0)))
        return real(*args, **kwargs)

    monkeypatch.setattr(children_module, "segment_columns", encode_and_report)
    index = Index.create(tmp_path / "index", commit_priority=priority)
    index._fork_encode_min = 10
    index.add_many(make_corpus(20))
    ours = os.sched_getscheduler(0)
    # Another thread alive: at "normal" too the commit forks (alone it encodes in this thread).
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        index.commit()
    finally:
        release.set()
        other.join()
    # "normal" leaves the child in this process's class (SCHED_OTHER as a rule).
    assert int(report.read_text()) == (os.SCHED_IDLE if priority == "idle" else ours)
    assert os.sched_getscheduler(0) == ours  # the committing process itself never changes class
    index.close()
    assert len(Index.open(tmp_path / "index", readonly=True, commit_priority=priority)) == 20


@pytest.mark.parametrize("priority", ["low", "", None, 0])
def test_an_unknown_commit_priority_is_refused(tmp_path: Path, priority: Any) -> None:
    with pytest.raises(InvalidParameterError, match="commit_priority"):
        Index.create(tmp_path / "index", commit_priority=priority)
    assert not (tmp_path / "index").exists()


def _alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """This thread is the only one the index sees (other tests of the session may leave threads)."""
    me = threading.current_thread()
    monkeypatch.setattr(threading, "enumerate", lambda: [me])


def test_another_thread_but_tqdms_monitor_counts() -> None:
    from tqdm._monitor import TMonitor

    from weftsearch.engine.index import _no_other_thread

    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert not _no_other_thread()
    finally:
        release.set()
        other.join()
    monitor = TMonitor.__new__(TMonitor)  # never started: only its type is looked at
    me = threading.current_thread()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(threading, "enumerate", lambda: [me, monitor])
        assert _no_other_thread()


def _committed_with(path: Path, priority: str, threshold: int | None, docs: Sequence[Document]) -> None:
    index = Index.create(path, index_id=FIXED_ID, commit_priority=priority)
    index._fork_encode_min = threshold
    index.add_many(docs, workers=1)
    index.commit()
    index.close()


def test_a_normal_priority_commit_with_no_other_thread_encodes_here_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = make_corpus(40)
    _committed_with(tmp_path / "forked", "idle", 10, docs)
    _committed_with(tmp_path / "sealed", "normal", None, docs)
    forks: list[int] = []
    real_fork = os.fork

    def counted_fork() -> int:
        forks.append(1)
        return real_fork()

    monkeypatch.setattr(os, "fork", counted_fork)
    _alone(monkeypatch)
    _committed_with(tmp_path / "here", "normal", 10, docs)
    assert forks == []  # no child: nothing to keep the GIL for, no priority to lower
    here = file_hashes(tmp_path / "here")
    assert here == file_hashes(tmp_path / "forked") == file_hashes(tmp_path / "sealed")
    assert not [p.name for p in (tmp_path / "here").iterdir() if ".tmp-" in p.name]


def test_a_failed_encoding_here_leaves_no_file_and_the_commit_encodes_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import weftsearch.engine.children as children_module
    from weftsearch.storage.segment_writer import write_columns as real

    docs = make_corpus(40)
    _committed_with(tmp_path / "reference", "normal", None, docs)
    calls: list[Path] = []

    def fail_half_way(columns: Any, path: Path, *args: Any, **kwargs: Any) -> Any:
        calls.append(path)
        path.write_bytes(b"half a segment")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(children_module, "write_columns", fail_half_way)
    _alone(monkeypatch)
    _committed_with(tmp_path / "index", "normal", 10, docs)
    assert len(calls) == 1 and not calls[0].exists()
    monkeypatch.setattr(children_module, "write_columns", real)
    assert file_hashes(tmp_path / "index") == file_hashes(tmp_path / "reference")


@pytest.mark.parametrize("shape", ["sorted", "sorted runs overlapping at one key", "reversed", "shuffled"])
def test_sorted_in_slices_equals_sorted_for_inputs_in_order_or_not(shape: str) -> None:
    """Slices already in order are concatenated, others merged: the result is sorted's either way."""
    rng = random.Random(5)
    keys = sorted(rng.randrange(0, 2_000) for _ in range(5 * SLICE + 3))  # repeated keys: stability shows
    items = [(key, position) for position, key in enumerate(keys)]
    if shape == "sorted runs overlapping at one key":
        items[SLICE], items[SLICE - 1] = items[SLICE - 1], items[SLICE]
    elif shape == "reversed":
        items.reverse()
    elif shape == "shuffled":
        rng.shuffle(items)
    pause = CountingPause()
    assert sorted_in_slices(items, lambda item: item[0], pause) == sorted(items, key=lambda item: item[0])
    assert sorted_in_slices(items, None, pause) == sorted(items)
    assert pause.calls >= 5
