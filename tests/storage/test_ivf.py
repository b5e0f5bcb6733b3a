"""IVF partitions of segment vectors: training, the bytes a partitioned segment is written as,
merges that rebuild them, and damage to the ``ivf.*`` sections and the ``ivf`` meta record.

The storage side only: which rows the vector scorer reads and what it scores them as is in
tests/scorers/test_vector_ivf.py.
"""

from __future__ import annotations

import json
import random
import shutil
import struct
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from weftsearch import RRF, BM25Scorer, Document, Index, Query, Snapshot, VectorScorer, get_analyzer
from weftsearch.errors import CorruptIndexError
from weftsearch.storage.codec import SectionFile, encode_sections
from weftsearch.storage.ivf import (
    FLOOR_NPROBE,
    IVF_MIN_VECTORS,
    TRAIN_ITERATIONS,
    TRAIN_PER_LIST,
    TRAIN_SEED,
    nlist_for,
    train_partitions,
    worth_probing,
)
from weftsearch.storage.segment import SegmentReader
from weftsearch.storage.segment_writer import SegmentDocument, encode_segment

DIM = 8
#: Above the floor: nlist_for(4000) == 32 lists.
ABOVE = 4000
WORDS = ["graph", "search", "vector", "sparse", "dense", "retrieval", "ranking", "fusion"]
IVF_SECTIONS = ("ivf.centroids", "ivf.offsets")
MEMORY = Path("<memory>/seg-000001.wseg")

Sections = dict[str, NDArray[Any]]


# ---------------------------------------------------------------------------- helpers


def clustered(m: int, dim: int = DIM, seed: int = 7, clusters: int = 40) -> NDArray[np.float32]:
    """``m`` float32 rows around ``clusters`` random centres (deterministic)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim))
    labels = rng.integers(0, clusters, size=m)
    rows: NDArray[np.float32] = (centres[labels] + 0.3 * rng.standard_normal((m, dim))).astype(np.float32)
    return rows


def make_documents(m: int, *, seed: int = 7, without_vector: int = 0, prefix: str = "doc") -> list[Document]:
    """``m`` documents with short text; the last ``without_vector`` of them have no vector."""
    vectors = clustered(m, seed=seed)
    rng = np.random.default_rng(seed + 1)
    documents = []
    for i in range(m):
        text = " ".join(str(w) for w in rng.choice(WORDS, size=int(rng.integers(1, 5))))
        vector = None if i >= m - without_vector else vectors[i]
        documents.append(Document(f"{prefix}-{i:05d}", text, vector=vector, fields={"n": i}))
    return documents


def analysed(documents: Sequence[Document]) -> list[SegmentDocument]:
    """The documents as the index hands them to the segment writer (``simple`` analyzer)."""
    analyse = get_analyzer("simple")
    out = []
    for document in documents:
        terms = analyse.analyze(document.text)
        out.append(SegmentDocument(document, Counter(terms), len(terms)))
    return out


def encode(documents: Sequence[Document]) -> bytes:
    return encode_segment(analysed(documents), DIM)


def sections_of(data: bytes) -> Sections:
    """Every section of a segment's bytes, decoded (checksums verified) and copied."""
    file = SectionFile(MEMORY, data)
    return {name: np.array(file.array(name)) for name in file.names}


def meta_of(sections: Sections) -> dict[str, Any]:
    meta: dict[str, Any] = json.loads(sections["meta"].tobytes())
    return meta


def with_meta(sections: Sections, meta: dict[str, Any]) -> Sections:
    raw = json.dumps(meta, sort_keys=True, separators=(",", ":")).encode("ascii")
    return {**sections, "meta": np.frombuffer(raw, dtype=np.uint8).copy()}


def section_extent(data: bytes, name: str) -> tuple[int, int, int]:
    """(table entry offset, section offset, section byte length) of section ``name``."""
    count = struct.unpack_from("<I", data, 12)[0]
    for position in range(count):
        at = 64 + 64 * position
        raw_name, _, offset, length, _, _ = struct.unpack_from("<24s8sQQQI", data, at)
        if raw_name.rstrip(b"\x00").decode("ascii") == name:
            return at, int(offset), int(length)
    raise AssertionError(f"no section {name!r}")


def flipped(data: bytes, at: int) -> bytes:
    out = bytearray(data)
    out[at] ^= 0xFF
    return bytes(out)


def snapshot_of(reader: SegmentReader) -> Snapshot:
    return Snapshot(
        generation=1, analyzer=get_analyzer("simple"), vector_dim=reader.vector_dim, segments=[(reader, None)]
    )


def only_segment(path: Path) -> Path:
    (segment,) = sorted(path.glob("seg-*.wseg"))
    return segment


@pytest.fixture(scope="module")
def documents() -> list[Document]:
    return make_documents(ABOVE)


@pytest.fixture(scope="module")
def segment(documents: list[Document]) -> bytes:
    return encode(documents)


@pytest.fixture(scope="module")
def committed(tmp_path_factory: pytest.TempPathFactory, documents: list[Document]) -> Path:
    """A committed index of one partitioned segment (4,000 documents)."""
    path = tmp_path_factory.mktemp("ivf") / "index"
    with Index.create(path, analyzer="simple", vector_dim=DIM) as index:
        index.add_many(documents)
        index.commit()
    return path


# ---------------------------------------------------------------------------- training


def test_nlist_for_literals() -> None:
    assert nlist_for(0) == 1
    assert nlist_for(1) == 1
    assert nlist_for(3600) == 30
    assert nlist_for(4000) == 32
    assert nlist_for(5000) == 35
    assert nlist_for(1_000_000) == 500


def test_floor_literals() -> None:
    assert FLOOR_NPROBE == 20
    assert IVF_MIN_VECTORS == 3600 == (3 * FLOOR_NPROBE) ** 2
    assert (TRAIN_PER_LIST, TRAIN_ITERATIONS, TRAIN_SEED) == (64, 16, 0)


@pytest.mark.parametrize(
    ("vectors", "nlist", "nprobe", "expected"),
    [
        (3600, 30, 20, True),  # 30 + 20 * 120 = 2430 < 3600: the floor at the default nprobe
        (3600, 30, 29, True),  # 30 + 29 * 120 = 3510 < 3600
        (3600, 30, 30, False),  # every list
        (3600, 30, 31, False),
        (100, 5, 2, True),  # 5 + 40 = 45 < 100
        (100, 10, 9, False),  # 10 + 90 = 100 is not below 100
        (10, 3, 1, True),  # 3 + 3.33 < 10
        (4, 2, 1, False),  # 2 + 2 = 4
        (1, 1, 1, False),
        (1_000_000, 500, 20, True),
    ],
)
def test_worth_probing_literals(vectors: int, nlist: int, nprobe: int, expected: bool) -> None:
    assert worth_probing(vectors, nlist, nprobe) is expected


def test_training_is_deterministic() -> None:
    matrix = clustered(ABOVE)
    first = train_partitions(matrix)
    second = train_partitions(matrix.copy())
    assert first.centroids.tobytes() == second.centroids.tobytes()
    assert np.array_equal(first.assignment, second.assignment)
    assert first.sample == second.sample == TRAIN_PER_LIST * nlist_for(ABOVE)
    assert first.nlist == nlist_for(ABOVE) == 32


def test_training_shapes_units_and_nonempty_lists() -> None:
    matrix = clustered(ABOVE)
    partitions = train_partitions(matrix)
    assert partitions.centroids.dtype == np.float32
    assert partitions.centroids.shape == (32, DIM)
    assert not partitions.centroids.flags.writeable
    norms = np.linalg.norm(partitions.centroids.astype(np.float64), axis=1)
    assert np.allclose(norms, 1.0, atol=1e-5)
    assert partitions.assignment.dtype == np.int64
    assert partitions.assignment.shape == (ABOVE,)
    counts = np.bincount(partitions.assignment, minlength=partitions.nlist)
    assert counts.shape == (partitions.nlist,)
    assert int(counts.min()) > 0, counts


def test_assignment_is_the_best_centroid() -> None:
    matrix = clustered(ABOVE)
    partitions = train_partitions(matrix)
    rows = matrix.astype(np.float64)
    rows /= np.linalg.norm(rows, axis=1)[:, None]
    sample = np.random.default_rng(3).choice(ABOVE, size=300, replace=False)
    similarity = rows[sample] @ partitions.centroids.astype(np.float64).T
    chosen = partitions.assignment[sample]
    best = similarity.max(axis=1)
    # float32 products in the trainer, float64 here: equal up to rounding ...
    assert np.all(similarity[np.arange(sample.shape[0]), chosen] >= best - 1e-5)
    # ... and the argmax itself wherever the best two are not a near-tie.
    ordered = np.sort(similarity, axis=1)
    clear = ordered[:, -1] - ordered[:, -2] > 1e-4
    assert int(clear.sum()) > 250
    assert np.array_equal(chosen[clear], np.argmax(similarity, axis=1)[clear])


def test_explicit_nlist_is_clamped_and_zero_rows_go_to_list_zero() -> None:
    matrix = clustered(200)
    assert train_partitions(matrix, nlist=7).nlist == 7
    assert train_partitions(matrix, nlist=0).nlist == 1
    assert train_partitions(matrix[:5], nlist=50).nlist == 5
    with_zero = matrix.copy()
    with_zero[17] = 0.0
    partitions = train_partitions(with_zero, nlist=6)
    assert int(partitions.assignment[17]) == 0


# ---------------------------------------------------------------------------- segment bytes


def test_partitioned_segment_bytes_are_deterministic(documents: list[Document], segment: bytes) -> None:
    assert encode(documents) == segment
    shuffled = list(documents)
    random.Random(5).shuffle(shuffled)
    assert encode(shuffled) == segment
    assert encode(list(reversed(documents))) == segment


def test_below_the_floor_there_are_no_ivf_sections() -> None:
    below = make_documents(IVF_MIN_VECTORS - 1)
    sections = sections_of(encode(below))
    assert not any(name.startswith("ivf") for name in sections)
    assert "ivf" not in meta_of(sections)
    reader = SegmentReader(MEMORY, encode(below))
    assert reader.vector_lists() is None
    assert reader.verify() == []
    # Key order: without partitions vec.rows is the identity.
    assert np.array_equal(reader.vector_rows(), np.arange(IVF_MIN_VECTORS - 1))


def test_the_floor_counts_vectors_not_documents() -> None:
    # 3,700 documents, 150 of them without a vector: 3,550 vectors, below the floor.
    sections = sections_of(encode(make_documents(3700, without_vector=150)))
    assert "ivf" not in meta_of(sections)
    assert "ivf.offsets" not in sections


def test_exactly_at_the_floor_is_partitioned() -> None:
    reader = SegmentReader(MEMORY, encode(make_documents(IVF_MIN_VECTORS)))
    lists = reader.vector_lists()
    assert lists is not None
    assert lists[0].shape == (nlist_for(IVF_MIN_VECTORS), DIM) == (30, DIM)


def test_partitioned_segment_layout(documents: list[Document], segment: bytes) -> None:
    reader = SegmentReader(MEMORY, segment)
    meta = meta_of(sections_of(segment))
    assert meta["ivf"] == {
        "nlist": 32,
        "sample": 32 * TRAIN_PER_LIST,
        "iterations": TRAIN_ITERATIONS,
        "seed": TRAIN_SEED,
    }
    lists = reader.vector_lists()
    assert lists is not None
    centroids, offsets = lists
    assert centroids.shape == (32, DIM) and centroids.dtype == np.float32
    assert offsets.dtype == np.uint64 and offsets.shape == (33,)
    assert int(offsets[0]) == 0 and int(offsets[-1]) == ABOVE
    assert bool(np.all(np.diff(offsets.astype(np.int64)) > 0))  # clustered: no list is empty
    assert np.allclose(np.linalg.norm(centroids.astype(np.float64), axis=1), 1.0, atol=1e-5)
    # The centroids are what training the input vectors gives.
    trained = train_partitions(np.stack([d.vector for d in documents if d.vector is not None]))
    assert centroids.tobytes() == trained.centroids.tobytes()
    rows = reader.vector_rows()
    assert sorted(rows.tolist()) == list(range(ABOVE))  # a permutation
    # Every document's vector is its input, bit for bit, through the permutation.
    by_key = {d.key: d for d in documents}
    for local, key in enumerate(reader.keys().tolist()):
        vector = reader.vector(local)
        expected = by_key[key].vector
        assert vector is not None and expected is not None
        assert vector.tobytes() == expected.tobytes()
    # Each list's rows are contiguous, belong to it, and are in key (local id) order.
    sizes = np.diff(np.asarray(offsets, dtype=np.int64)).astype(np.int64)
    list_of_row = np.repeat(np.arange(32), sizes)
    assert np.array_equal(list_of_row, np.sort(trained.assignment))
    local_of_row = np.empty(ABOVE, dtype=np.int64)
    local_of_row[rows] = np.arange(ABOVE)
    assert np.array_equal(list_of_row[rows], trained.assignment)
    for start, end in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True):
        assert bool(np.all(np.diff(local_of_row[start:end]) > 0))
    assert reader.verify() == []


def test_partitioned_segment_with_documents_without_vectors() -> None:
    docs = make_documents(3800, without_vector=100)  # 3,700 vectors
    reader = SegmentReader(MEMORY, encode(docs))
    lists = reader.vector_lists()
    assert lists is not None
    assert int(lists[1][-1]) == 3700 == reader.vector_matrix().shape[0]
    rows = reader.vector_rows()
    assert sorted(rows[rows >= 0].tolist()) == list(range(3700))
    assert int((rows < 0).sum()) == 100
    for local, document in enumerate(docs):  # keys are in order already
        vector = reader.vector(local)
        if document.vector is None:
            assert vector is None
        else:
            assert vector is not None and vector.tobytes() == document.vector.tobytes()


def test_merge_equals_a_fresh_build_including_partitions(tmp_path: Path) -> None:
    batches = [make_documents(4000, seed=1), make_documents(1500, seed=2, prefix="b")]
    upserts = [
        Document(d.key, "upserted " + d.text, vector=-1 * d.vector if d.vector is not None else None)
        for d in batches[0][::40]
    ]
    small = [*make_documents(300, seed=3, prefix="c"), *upserts]
    deletes = [d.key for d in batches[0][5::97]] + [d.key for d in batches[1][::211]]
    live: dict[str, Document] = {}
    with Index.create(tmp_path / "merged", analyzer="simple", vector_dim=DIM) as index:
        for batch in [*batches, small]:
            index.add_many(batch)
            live.update((d.key, d) for d in batch)
            index.commit()
        index.delete_many(deletes)
        index.commit()
        for key in deletes:
            live.pop(key, None)
        assert index.segment_count == 3
        assert index.merge(force=True) == 3
        assert index.segment_count == 1
    fresh_documents = list(live.values())
    random.Random(9).shuffle(fresh_documents)
    with Index.create(tmp_path / "fresh", analyzer="simple", vector_dim=DIM) as index:
        index.add_many(fresh_documents)
        index.commit()
    merged = only_segment(tmp_path / "merged").read_bytes()
    fresh = only_segment(tmp_path / "fresh").read_bytes()
    # Equal but for the stamp (another index id and segment number) and the header CRC over it.
    assert merged[:28] == fresh[:28] and merged[64:] == fresh[64:]
    reader = SegmentReader(only_segment(tmp_path / "merged"))
    assert reader.n_docs == len(live)
    lists = reader.vector_lists()
    assert lists is not None
    assert lists[0].shape[0] == nlist_for(len(live))
    assert reader.verify() == []


# ---------------------------------------------------------------------------- damage


def _assert_ivf_damage_is_caught(data: bytes, what: str) -> None:
    """Opening may refuse; otherwise using the lists and verify() must report it."""
    try:
        reader = SegmentReader(MEMORY, data)
    except CorruptIndexError:
        return
    with pytest.raises(CorruptIndexError):
        reader.vector_lists()
    with pytest.raises(CorruptIndexError):
        VectorScorer().score(snapshot_of(reader), Query(vector=np.ones(DIM, np.float32)), 10)
    problems = SegmentReader(MEMORY, data).verify()
    assert problems, what


def damaged_offsets(segment: bytes, name: str) -> Iterator[int]:
    table, offset, length = section_extent(segment, name)
    yield from range(table, table + 64)  # the section's table entry
    if name == "ivf.offsets":
        yield from range(offset, offset + length)  # every byte
    else:
        yield from range(offset, offset + 8)
        yield from range(offset + 8, offset + length - 8, 13)
        yield from range(offset + length - 8, offset + length)


@pytest.mark.parametrize("name", IVF_SECTIONS)
def test_flipped_bytes_in_ivf_sections_are_caught(segment: bytes, name: str) -> None:
    cases = 0
    for at in damaged_offsets(segment, name):
        _assert_ivf_damage_is_caught(flipped(segment, at), f"{name} byte {at}")
        cases += 1
    assert cases > 100


def test_nonzero_padding_after_ivf_sections_is_reported_by_verify(segment: bytes) -> None:
    _, offset, length = section_extent(segment, "ivf.offsets")  # 33 * 8 = 264 bytes: padded to 320
    assert length % 64
    damaged = flipped(segment, offset + length)
    reader = SegmentReader(MEMORY, damaged)
    assert reader.vector_lists() is not None  # nothing a read needs
    assert any("padding" in problem for problem in reader.verify())


def _copy_index(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return only_segment(target)


def _assert_index_reports(path: Path, segment_name: str) -> None:
    """On the committed index: open refuses or vector search fails, and scrub names the file."""
    try:
        index = Index.open(path, readonly=True)
    except CorruptIndexError as exc:
        assert segment_name in str(exc)
        return
    with index:
        for scorer in (VectorScorer(), VectorScorer(nprobe=None), VectorScorer(nprobe=1)):
            with pytest.raises(CorruptIndexError) as info:
                index.search(Query(vector=np.ones(DIM, np.float32)), 10, RRF(), scorer)
            assert segment_name in str(info.value)
        # Text search never reads the vectors.
        assert len(index.search(Query("graph"), 5, RRF(), BM25Scorer())) == 5
        report = index.scrub()
        assert not report.ok
        assert any(segment_name in problem for problem in report.problems), report.problems


@pytest.mark.parametrize("name", IVF_SECTIONS)
@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_flipped_bytes_on_disk(committed: Path, tmp_path: Path, name: str, where: str) -> None:
    target = _copy_index(committed, tmp_path / "copy")
    data = target.read_bytes()
    _, offset, length = section_extent(data, name)
    at = {"first": offset, "middle": offset + length // 2, "last": offset + length - 1}[where]
    target.write_bytes(flipped(data, at))
    _assert_index_reports(tmp_path / "copy", target.name)


def _swap_interior(offsets: NDArray[Any]) -> NDArray[Any]:
    out = offsets.copy()
    out[3], out[4] = offsets[4], offsets[3]
    return out


def _set(position: int, delta: int) -> Callable[[NDArray[Any]], NDArray[Any]]:
    def change(offsets: NDArray[Any]) -> NDArray[Any]:
        out = offsets.copy()
        out[position] = np.uint64(int(out[position]) + delta)
        return out

    return change


#: Inconsistent ``ivf.offsets`` (each re-sealed with valid checksums).
OFFSET_EDITS: dict[str, Callable[[NDArray[Any]], NDArray[Any]]] = {
    "not-monotone": _swap_interior,
    "ends-short": _set(-1, -1),
    "ends-long": _set(-1, 1),
    "ends-huge": lambda o: np.concatenate([o[:-1], np.array([2**64 - 1], np.uint64)]),
    "starts-late": _set(0, 1),
    "one-short": lambda o: o[:-1].copy(),
    "one-long": lambda o: np.concatenate([o, o[-1:]]),
    "empty": lambda o: o[:0].copy(),
    "signed": lambda o: o.astype(np.int64),
    "narrow": lambda o: o.astype(np.uint32),
}


@pytest.mark.parametrize("label", sorted(OFFSET_EDITS))
def test_resealed_inconsistent_offsets(segment: bytes, label: str) -> None:
    sections = sections_of(segment)
    sections["ivf.offsets"] = OFFSET_EDITS[label](sections["ivf.offsets"])
    data = encode_sections(sections)
    reader = SegmentReader(MEMORY, data)
    with pytest.raises(CorruptIndexError) as info:
        reader.vector_lists()
    assert str(MEMORY) in str(info.value)
    assert SegmentReader(MEMORY, data).verify()


CENTROID_EDITS: dict[str, Callable[[NDArray[Any]], NDArray[Any]]] = {
    "one-row-short": lambda c: c[:-DIM].copy(),
    "one-value-long": lambda c: np.concatenate([c, c[:1]]),
    "empty": lambda c: c[:0].copy(),
    "float64": lambda c: c.astype(np.float64),
    "float16": lambda c: c.astype(np.float16),
}


@pytest.mark.parametrize("label", sorted(CENTROID_EDITS))
def test_resealed_inconsistent_centroids(segment: bytes, label: str) -> None:
    sections = sections_of(segment)
    sections["ivf.centroids"] = CENTROID_EDITS[label](sections["ivf.centroids"])
    data = encode_sections(sections)
    with pytest.raises(CorruptIndexError) as info:
        SegmentReader(MEMORY, data).vector_lists()
    assert str(MEMORY) in str(info.value)


@pytest.mark.parametrize("missing", IVF_SECTIONS)
def test_ivf_meta_without_its_sections(segment: bytes, missing: str) -> None:
    sections = sections_of(segment)
    del sections[missing]
    with pytest.raises(CorruptIndexError) as info:
        SegmentReader(MEMORY, encode_sections(sections)).vector_lists()
    assert str(MEMORY) in str(info.value)


@pytest.mark.parametrize("label", ["not-monotone", "ends-short", "one-long"])
def test_resealed_inconsistent_offsets_on_disk(committed: Path, tmp_path: Path, label: str) -> None:
    target = _copy_index(committed, tmp_path / "copy")
    sections = sections_of(target.read_bytes())
    sections["ivf.offsets"] = OFFSET_EDITS[label](sections["ivf.offsets"])
    target.write_bytes(encode_sections(sections))
    _assert_index_reports(tmp_path / "copy", target.name)


#: ``ivf`` meta records the decoder must refuse when it reads the metadata.
BAD_IVF_RECORDS: dict[str, object] = {
    "nlist-zero": {"nlist": 0},
    "nlist-negative": {"nlist": -1},
    "nlist-above-vectors": {"nlist": ABOVE + 1},
    "nlist-huge": {"nlist": 2**70},
    "nlist-string": {"nlist": "32"},
    "nlist-float": {"nlist": 32.0},
    "nlist-bool": {"nlist": True},
    "nlist-null": {"nlist": None},
    "nlist-missing": {"sample": 2048},
    "list": [32],
    "number": 32,
    "string": "ivf",
}


@pytest.mark.parametrize("label", sorted(BAD_IVF_RECORDS))
def test_bad_ivf_meta_record(segment: bytes, label: str) -> None:
    sections = sections_of(segment)
    meta = meta_of(sections)
    record = BAD_IVF_RECORDS[label]
    if label.startswith("nlist-") and isinstance(record, dict):
        meta["ivf"] = {**meta["ivf"], **record}
    else:
        meta["ivf"] = record
    if label == "nlist-missing":
        del meta["ivf"]["nlist"]
    data = encode_sections(with_meta(sections, meta))
    with pytest.raises(CorruptIndexError) as info:
        SegmentReader(MEMORY, data).vector_lists()
    assert str(MEMORY) in str(info.value)


@pytest.mark.parametrize("nlist", [1, 31, 33, ABOVE])
def test_ivf_meta_nlist_disagreeing_with_the_sections(segment: bytes, nlist: int) -> None:
    sections = sections_of(segment)
    meta = meta_of(sections)
    meta["ivf"]["nlist"] = nlist
    reader = SegmentReader(MEMORY, encode_sections(with_meta(sections, meta)))  # a plausible nlist
    with pytest.raises(CorruptIndexError) as info:
        reader.vector_lists()
    assert str(MEMORY) in str(info.value)


def test_ivf_meta_on_a_segment_without_vector_width() -> None:
    sections = sections_of(encode_segment(analysed([Document("a", "text only")]), None))
    meta = meta_of(sections)
    meta["ivf"] = {"nlist": 1, "sample": 1, "iterations": TRAIN_ITERATIONS, "seed": TRAIN_SEED}
    with pytest.raises(CorruptIndexError):
        SegmentReader(MEMORY, encode_sections(with_meta(sections, meta)))


def test_bad_ivf_meta_on_disk(committed: Path, tmp_path: Path) -> None:
    target = _copy_index(committed, tmp_path / "copy")
    sections = sections_of(target.read_bytes())
    meta = meta_of(sections)
    meta["ivf"]["nlist"] = 0
    target.write_bytes(encode_sections(with_meta(sections, meta)))
    _assert_index_reports(tmp_path / "copy", target.name)


# ---------------------------------------------------------------------------- fuzz

SMALL_M = 12
SMALL_DIM = 3
FUZZ = settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def _small_sections() -> Sections:
    rng = np.random.default_rng(11)
    docs = [
        Document(f"k{i:02d}", "w", vector=rng.standard_normal(SMALL_DIM).astype(np.float32))
        for i in range(SMALL_M)
    ]
    return sections_of(encode_segment(analysed(docs), SMALL_DIM))


SMALL_SECTIONS = _small_sections()


@st.composite
def ivf_inputs(draw: st.DrawFn) -> tuple[object, NDArray[Any], NDArray[Any]]:
    """An ``ivf`` meta nlist, a centroid array and an offsets array: half sound, half damaged."""
    sound = draw(st.booleans())
    nlist: object = draw(
        st.integers(1, SMALL_M)
        if sound
        else st.one_of(st.integers(-2, SMALL_M + 3), st.sampled_from([True, None, 2.0, "3", 2**64]))
    )
    size = nlist if type(nlist) is int and 0 < nlist <= SMALL_M else draw(st.integers(1, SMALL_M))
    cuts = sorted(draw(st.lists(st.integers(0, SMALL_M), min_size=size - 1, max_size=size - 1)))
    offsets_list = [0, *cuts, SMALL_M]
    centroid_count = size * SMALL_DIM
    centroid_dtype: Any = np.float32
    offsets_dtype: Any = np.uint64
    if not sound:
        centroid_count = draw(st.one_of(st.just(centroid_count), st.integers(0, 2 * SMALL_M * SMALL_DIM)))
        centroid_dtype = draw(st.sampled_from([np.float32, np.float64, np.float16]))
        offsets_dtype = draw(st.sampled_from([np.uint64, np.int64, np.uint32]))
        offsets_list = draw(
            st.one_of(
                st.just(offsets_list),
                st.lists(st.integers(0, SMALL_M + 2), min_size=0, max_size=SMALL_M + 3),
                st.lists(st.integers(0, 2**64 - 1), min_size=size + 1, max_size=size + 1),
            )
        )
        if draw(st.booleans()) and offsets_list:
            position = draw(st.integers(0, len(offsets_list) - 1))
            offsets_list = [*offsets_list]
            offsets_list[position] = draw(st.integers(0, SMALL_M + 1))
    values = draw(st.lists(st.floats(width=32), min_size=centroid_count, max_size=centroid_count))
    with np.errstate(all="ignore"):  # float16 overflows to infinity: fine, that is a value too
        centroids = np.array(values, dtype=np.float32).astype(centroid_dtype)
    offsets = np.array(offsets_list, dtype=np.uint64).astype(offsets_dtype)
    return nlist, centroids, offsets


@FUZZ
@given(ivf_inputs(), st.integers(1, SMALL_M + 1))
def test_fuzz_vector_lists(inputs: tuple[object, NDArray[Any], NDArray[Any]], nprobe: int) -> None:
    nlist, centroids, offsets = inputs
    meta = meta_of(SMALL_SECTIONS)
    meta["ivf"] = {"nlist": nlist, "sample": SMALL_M, "iterations": TRAIN_ITERATIONS, "seed": TRAIN_SEED}
    sections = {**with_meta(SMALL_SECTIONS, meta), "ivf.centroids": centroids, "ivf.offsets": offsets}
    data = encode_sections(sections)
    try:
        reader = SegmentReader(MEMORY, data)
        lists = reader.vector_lists()
    except CorruptIndexError as exc:
        event("corrupt")
        assert str(MEMORY) in str(exc)
        assert SegmentReader(MEMORY, data).verify() if type(nlist) is int and 0 < nlist <= SMALL_M else True
        return
    event("valid")
    assert lists is not None
    got_centroids, got_offsets = lists
    assert type(nlist) is int
    assert got_centroids.shape == (nlist, SMALL_DIM) and got_centroids.dtype == np.float32
    assert got_offsets.shape == (nlist + 1,) and got_offsets.dtype == np.uint64
    assert int(got_offsets[0]) == 0 and int(got_offsets[-1]) == SMALL_M
    assert bool(np.all(got_offsets[1:] >= got_offsets[:-1]))
    assert reader.verify() == []
    # Whatever the (valid but arbitrary) lists say, a probe scores a subset of the
    # exact candidates, with the exact scores.
    snapshot = snapshot_of(reader)
    query = Query(vector=np.array([0.3, -1.0, 0.5], dtype=np.float32))
    with np.errstate(all="ignore"):
        approximate = VectorScorer(nprobe=nprobe).score(snapshot, query, SMALL_M)
    exact = VectorScorer(nprobe=None).score(snapshot, query, SMALL_M)
    exact_score = dict(zip(exact.ids.tolist(), exact.scores.tolist(), strict=True))
    for doc, score in zip(approximate.ids.tolist(), approximate.scores.tolist(), strict=True):
        assert exact_score[doc] == score
