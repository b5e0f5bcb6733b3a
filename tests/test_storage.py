"""The on-disk index: round trips, identical rankings after reopening, and damage detection."""

from __future__ import annotations

import contextlib
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

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
)
from weftsearch.errors import (
    CorruptIndexError,
    FormatVersionError,
    IndexNotFoundError,
    IndexStorageError,
    UnknownKeyError,
)
from weftsearch.storage import LOCK, MANIFEST, checksum

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
]
BASE = datetime(2023, 1, 1, tzinfo=timezone.utc)


def corpus() -> list[Document]:
    rng = np.random.default_rng(7)
    documents = []
    for i in range(40):
        words = rng.choice(WORDS, size=int(rng.integers(1, 12)))
        time: datetime | float | None
        if i % 4 == 0:
            time = None
        elif i % 4 == 1:
            time = BASE + timedelta(days=i, seconds=0.25)
        elif i % 4 == 2:
            time = (BASE + timedelta(days=i)).replace(tzinfo=None)  # naive: UTC
        else:
            time = (BASE + timedelta(hours=7 * i)).timestamp()
        documents.append(
            Document(
                key=f"doc-{i:02d}",
                text=" ".join(words),
                vector=None if i % 5 == 0 else rng.standard_normal(6).astype(np.float32),
                links=tuple(f"doc-{j:02d}" for j in rng.choice(45, size=int(rng.integers(0, 4)))),
                time=time,
                fields={
                    "title": f"Title {i} \u00e9t\u00e9",
                    "year": 2000 + i,
                    "score": i / 7,
                    "open": i % 2 == 0,
                },
            )
        )
    documents.append(Document("ключ-ü", "unicode key café", fields={"note": "日本語"}))
    return documents


def assert_same_document(stored: Document, original: Document) -> None:
    assert stored.key == original.key
    assert stored.text == original.text
    assert stored.links == original.links
    assert stored.timestamp == original.timestamp
    assert dict(stored.fields) == dict(original.fields)
    for name, value in original.fields.items():
        assert type(stored.fields[name]) is type(value)
    if original.vector is None:
        assert stored.vector is None
    else:
        assert stored.vector is not None
        assert stored.vector.dtype == np.float32
        assert stored.vector.tobytes() == original.vector.tobytes()


@pytest.fixture
def stored(tmp_path: Path) -> tuple[Path, Index]:
    path = tmp_path / "index"
    index = Index.create(path, analyzer="english")
    index.add_many(corpus())
    index.commit()
    return path, index


def test_round_trip_documents(stored: tuple[Path, Index]) -> None:
    path, index = stored
    reopened = Index.open(path, readonly=True)
    assert reopened.path == path
    assert reopened.keys() == index.keys()
    assert reopened.vector_dim == index.vector_dim == 6
    assert reopened.analyzer.name == "english"
    originals = {d.key: d for d in corpus()}
    for key in reopened.keys():  # noqa: SIM118 (Index is not a mapping)
        assert_same_document(reopened.get(key), originals[key])


def test_round_trip_after_upserts_and_deletes(stored: tuple[Path, Index]) -> None:
    path, index = stored
    index.add(Document("doc-01", "replaced text", vector=np.arange(6, dtype=np.float32), time=5.0))
    index.delete_many(["doc-02", "doc-03"])
    index.add(Document("new", "brand new", links=("doc-01", "later")))
    generation = index.commit()
    assert generation == index.generation
    reopened = Index.open(path, readonly=True)
    assert reopened.keys() == index.keys()
    assert "doc-02" not in reopened
    for key in reopened.keys():  # noqa: SIM118 (Index is not a mapping)
        assert_same_document(reopened.get(key), index.get(key))
    # Only the current commit's files are left.
    names = sorted(p.name for p in path.iterdir())
    body = json.loads((path / MANIFEST).read_text())["body"]
    named = [s["name"] for s in body["segments"]] + [s["deletes"] for s in body["segments"] if s["deletes"]]
    assert names == sorted([MANIFEST, LOCK, *named])


def test_uncommitted_writes_are_not_on_disk(stored: tuple[Path, Index]) -> None:
    path, index = stored
    index.add(Document("uncommitted", "not yet"))
    assert "uncommitted" not in Index.open(path, readonly=True)
    index.commit()
    assert "uncommitted" in Index.open(path, readonly=True)


def test_empty_index_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "empty"
    Index.create(path, analyzer="simple", vector_dim=3)
    reopened = Index.open(path, readonly=True)
    assert len(reopened) == 0
    assert reopened.vector_dim == 3
    assert reopened.analyzer.name == "simple"


def hits(results: SearchResults) -> list[dict[str, Any]]:
    return [hit.to_dict() for hit in results]


QUERY_VECTOR = np.random.default_rng(11).standard_normal(6).astype(np.float32)

SEARCHES: list[tuple[str, Query, int, Any, tuple[Scorer, ...]]] = [
    ("text-only", Query("graph retrieval ranking"), 10, RRF(), (BM25Scorer(),)),
    ("text-only-bm25-params", Query("dense vector"), 5, RRF(), (BM25Scorer(k1=0.9, b=0.3),)),
    (
        "hybrid-rrf",
        Query("sparse search fusion", vector=QUERY_VECTOR),
        10,
        RRF(),
        (BM25Scorer(), VectorScorer()),
    ),
    (
        "hybrid-score",
        Query("citation index", vector=QUERY_VECTOR),
        10,
        ScoreFusion(norm="zscore"),
        (BM25Scorer(), VectorScorer()),
    ),
    (
        "seeded-graph",
        Query("recency query"),
        10,
        WeightedRRF([1.0, 0.5, 0.5]),
        (BM25Scorer(), GraphScorer(BM25Scorer(), seed_n=3), PageRankScorer(BM25Scorer(), seed_n=3)),
    ),
    ("explicit-seeds", Query(seeds=("doc-07", "doc-11")), 10, RRF(), (GraphScorer(keep_seeds=True),)),
    ("recency", Query("term"), 10, RRF(), (BM25Scorer(), RecencyScorer(timedelta(days=10)))),
    ("empty-result", Query("zzzunknownword"), 10, RRF(), (BM25Scorer(), VectorScorer())),
    (
        "k-larger-than-corpus",
        Query("graph", vector=QUERY_VECTOR),
        500,
        RRF(),
        (BM25Scorer(), VectorScorer()),
    ),
]


@pytest.mark.parametrize(("label", "query", "k", "fuser", "scorers"), SEARCHES, ids=[s[0] for s in SEARCHES])
def test_rankings_identical_after_reopen(
    stored: tuple[Path, Index], label: str, query: Query, k: int, fuser: Any, scorers: tuple[Scorer, ...]
) -> None:
    path, index = stored
    before = index.search(query, k, fuser, *scorers)
    after = Index.open(path, readonly=True).search(query, k, fuser, *scorers)
    # Dict equality compares floats with ==: scores equal to the bit (no NaN here).
    assert hits(after) == hits(before)
    assert after.signals == before.signals
    if label == "empty-result":
        assert len(before) == 0
    else:
        assert len(before) > 0
    if label == "k-larger-than-corpus":
        assert 0 < len(before) <= len(index)
        assert len(before) > 30


def test_rankings_identical_after_reopen_in_different_order(tmp_path: Path) -> None:
    documents = corpus()
    path = tmp_path / "reversed"
    index = Index.create(path)
    index.add_many(reversed(documents))
    index.commit()
    other = Index()
    for document in documents:
        other.add(document)
    query = Query("graph retrieval", vector=QUERY_VECTOR)
    reopened = Index.open(path, readonly=True)
    for scorers in [(BM25Scorer(),), (BM25Scorer(), VectorScorer(), GraphScorer(BM25Scorer()))]:
        assert hits(reopened.search(query, 20, RRF(), *scorers)) == hits(
            other.search(query, 20, RRF(), *scorers)
        )


# ---------------------------------------------------------------- errors


def test_open_missing_path(tmp_path: Path) -> None:
    with pytest.raises(IndexNotFoundError):
        Index.open(tmp_path / "nowhere")


def test_open_directory_without_manifest(tmp_path: Path) -> None:
    (tmp_path / "bare").mkdir()
    with pytest.raises(IndexNotFoundError):
        Index.open(tmp_path / "bare")


def test_open_a_file(tmp_path: Path) -> None:
    target = tmp_path / "file.txt"
    target.write_text("not an index")
    with pytest.raises(IndexStorageError) as info:
        Index.open(target)
    assert isinstance(info.value, OSError)


def rewrite_manifest(path: Path, **changes: Any) -> None:
    """Change manifest fields and re-seal its checksum, as a newer writer would."""
    outer = json.loads((path / MANIFEST).read_text())
    outer["body"].update(changes)
    canonical = json.dumps(outer["body"], sort_keys=True, separators=(",", ":")).encode()
    outer["crc32c"] = checksum(canonical)
    (path / MANIFEST).write_text(json.dumps(outer))


def test_manifest_edited_without_its_checksum(stored: tuple[Path, Index]) -> None:
    path, _ = stored
    outer = json.loads((path / MANIFEST).read_text())
    outer["body"]["generation"] += 1
    (path / MANIFEST).write_text(json.dumps(outer))
    with pytest.raises(CorruptIndexError):
        Index.open(path, readonly=True)


def test_future_format_version(stored: tuple[Path, Index]) -> None:
    path, _ = stored
    rewrite_manifest(path, version=99)
    with pytest.raises(FormatVersionError):
        Index.open(path, readonly=True)


def test_manifest_not_json(stored: tuple[Path, Index]) -> None:
    path, _ = stored
    (path / MANIFEST).write_bytes(b"{not json")
    with pytest.raises(CorruptIndexError):
        Index.open(path, readonly=True)


def test_manifest_of_another_format(stored: tuple[Path, Index]) -> None:
    path, _ = stored
    rewrite_manifest(path, format="something-else")
    with pytest.raises(CorruptIndexError):
        Index.open(path, readonly=True)


def segment_file(path: Path) -> Path:
    body = json.loads((path / MANIFEST).read_text())["body"]
    assert len(body["segments"]) == 1
    return path / str(body["segments"][0]["name"])


def read_everything(path: Path) -> None:
    """Open, search and fetch every document: the paths a damaged byte must not slip through."""
    index = Index.open(path, readonly=True)
    snapshot = index.snapshot()
    for key in snapshot.keys():  # noqa: SIM118 (a Snapshot is not a mapping)
        index.get(key)
    for text in ["alpha", "retrieval", "graph"]:
        index.search(text, 5, RRF(), BM25Scorer(), VectorScorer(), GraphScorer(BM25Scorer()))
    index.search(Query(vector=np.ones(6, dtype=np.float32)), 5, RRF(), VectorScorer())


@pytest.mark.parametrize("where", [0, 0.25, 0.5, 0.75, -1])
def test_flipped_byte_in_segment(stored: tuple[Path, Index], where: float) -> None:
    path, _ = stored
    target = segment_file(path)
    data = bytearray(target.read_bytes())
    position = int(where * (len(data) - 1)) if where >= 0 else len(data) - 1
    data[position] ^= 0x01
    target.write_bytes(bytes(data))
    try:
        index = Index.open(path, readonly=True)
    except CorruptIndexError:
        return  # header or table damage is caught at open
    assert not index.scrub().ok
    # Damaged postings fail the search; a damaged stored document is reported absent.
    with contextlib.suppress(CorruptIndexError, UnknownKeyError):
        read_everything(path)


def test_truncated_segment(stored: tuple[Path, Index]) -> None:
    path, _ = stored
    target = segment_file(path)
    target.write_bytes(target.read_bytes()[:-10])
    with pytest.raises(CorruptIndexError):
        Index.open(path, readonly=True)


def test_missing_segment(stored: tuple[Path, Index]) -> None:
    path, _ = stored
    segment_file(path).unlink()
    with pytest.raises(CorruptIndexError):
        Index.open(path, readonly=True)


def test_create_refuses_non_empty_directory(tmp_path: Path) -> None:
    path = tmp_path / "busy"
    path.mkdir()
    (path / "precious.txt").write_text("keep me")
    with pytest.raises(IndexStorageError):
        Index.create(path)
    assert (path / "precious.txt").read_text() == "keep me"
    assert not (path / MANIFEST).exists()
    index = Index.create(path, analyzer="simple", overwrite=True)
    assert len(index) == 0
    assert len(Index.open(path, readonly=True)) == 0


def test_create_refuses_existing_index(stored: tuple[Path, Index]) -> None:
    path, index = stored
    with pytest.raises(IndexStorageError):
        Index.create(path)
    assert Index.open(path, readonly=True).keys() == index.keys()
    index.close()
    replacement = Index.create(path, overwrite=True)
    # The old index serves until the replacement's first commit.
    assert len(Index.open(path, readonly=True)) == 41
    replacement.commit()
    assert len(Index.open(path, readonly=True)) == 0
    replacement.close()


def test_create_on_a_file(tmp_path: Path) -> None:
    target = tmp_path / "file.txt"
    target.write_text("x")
    with pytest.raises(IndexStorageError):
        Index.create(target)
    with pytest.raises(IndexStorageError):
        Index.create(target, overwrite=True)


def test_create_in_empty_and_new_directories(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    Index.create(tmp_path / "empty")
    Index.create(tmp_path / "deep" / "new" / "dir")
    assert len(Index.open(tmp_path / "deep" / "new" / "dir", readonly=True)) == 0


def test_commit_without_path() -> None:
    with pytest.raises(IndexStorageError):
        Index().commit()
