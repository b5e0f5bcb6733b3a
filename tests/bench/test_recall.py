"""Tests of weftsearch.bench.recall: measure_recall and the ``weft-search recall`` command."""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from weftsearch import Document, Index, Snapshot
from weftsearch import cli as weft_cli
from weftsearch.bench.recall import RecallPoint, add_subcommand, format_table, measure_recall
from weftsearch.errors import InvalidParameterError, VectorDimensionError
from weftsearch.storage.ivf import IVF_MIN_VECTORS

DIM = 16
ROWS = 6_000  # above the IVF floor, so the segment is partitioned
NPROBES = (1, 2, 4, 8, 16, 20, 32)


def _clustered(rows: int, seed: int) -> NDArray[np.float32]:
    rng = np.random.Generator(np.random.PCG64(seed))
    centres = rng.standard_normal((40, DIM))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    points = centres[rng.integers(0, 40, rows)] + 0.25 * rng.standard_normal((rows, DIM))
    return points.astype(np.float32)


@pytest.fixture(scope="module")
def vectors() -> NDArray[np.float32]:
    return _clustered(ROWS, 1)


@pytest.fixture(scope="module")
def queries() -> NDArray[np.float32]:
    return _clustered(60, 2)


@pytest.fixture(scope="module")
def snapshot(vectors: NDArray[np.float32]) -> Snapshot:
    assert ROWS >= IVF_MIN_VECTORS
    index = Index(vector_dim=DIM)
    index.add_many(Document(key=f"d{i:05d}", vector=row) for i, row in enumerate(vectors))
    return index.snapshot()


@pytest.fixture(scope="module")
def points(snapshot: Snapshot, queries: NDArray[np.float32]) -> list[RecallPoint]:
    return measure_recall(snapshot, queries, NPROBES)


def _nlist(snapshot: Snapshot) -> int:
    [block] = snapshot.vector_blocks()
    assert block.centroids is not None
    return int(block.centroids.shape[0])


def test_one_point_per_nprobe_then_the_exact_reference(points: list[RecallPoint]) -> None:
    assert [p.nprobe for p in points] == [*NPROBES, None]
    exact = points[-1]
    assert exact.exact
    assert exact.recall_at_10 == 1.0
    assert exact.recall_at_100 == 1.0
    assert exact.candidates_per_query == ROWS
    assert exact.bytes_per_query == ROWS * DIM * 4
    assert all(p.queries == 60 and p.queries_per_second > 0 for p in points)


def test_recall_is_a_fraction_and_never_falls_as_nprobe_grows(points: list[RecallPoint]) -> None:
    approx = points[:-1]
    for p in approx:
        assert 0.0 <= p.recall_at_10 <= 1.0
        assert 0.0 <= p.recall_at_100 <= 1.0
    for lower, higher in itertools.pairwise(approx):
        assert higher.recall_at_10 >= lower.recall_at_10
        assert higher.recall_at_100 >= lower.recall_at_100
        assert higher.candidates_per_query >= lower.candidates_per_query
    assert approx[0].recall_at_10 < 1.0  # one list of about 39 misses something
    assert approx[0].candidates_per_query < ROWS / 10


def test_probed_bytes_count_the_centroids(snapshot: Snapshot, points: list[RecallPoint]) -> None:
    nlist = _nlist(snapshot)
    first = points[0]
    assert first.bytes_per_query == pytest.approx(nlist * DIM * 4 + first.candidates_per_query * DIM * 4)


def test_nprobe_of_every_list_is_exact(snapshot: Snapshot, queries: NDArray[np.float32]) -> None:
    nlist = _nlist(snapshot)
    for p in measure_recall(snapshot, queries[:10], [nlist, nlist + 5], k_values=(10,)):
        assert p.recall_at_10 == 1.0
        assert p.candidates_per_query == ROWS
        assert np.isnan(p.recall_at_100)  # not measured


def test_bad_arguments_raise(snapshot: Snapshot, queries: NDArray[np.float32]) -> None:
    with pytest.raises(VectorDimensionError):
        measure_recall(snapshot, queries[:, :8], [1])
    with pytest.raises(InvalidParameterError):
        measure_recall(snapshot, queries, [0])
    with pytest.raises(InvalidParameterError):
        measure_recall(snapshot, queries[:0], [1])
    with pytest.raises(InvalidParameterError):
        measure_recall(snapshot, queries[0], [1])  # 1-D
    with pytest.raises(InvalidParameterError):
        measure_recall(Index(vector_dim=DIM).snapshot(), queries, [1])


def test_format_table_marks_the_default(points: list[RecallPoint]) -> None:
    table = format_table(points)
    lines = table.splitlines()
    assert "recall@10" in lines[0] and "speed-up" in lines[0]
    assert any(line.strip().startswith("20 *") for line in lines)
    assert any(line.strip().startswith("exact") and line.endswith("1.00x") for line in lines)


# ---------------------------------------------------------------------- the command


def _main(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    """``weftsearch.cli.main`` with ``recall`` added when cli.py does not wire it in (yet)."""
    original = weft_cli.build_parser

    def build_parser() -> argparse.ArgumentParser:
        parser = original()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction) and "recall" not in action.choices:
                add_subcommand(action)
        return parser

    monkeypatch.setattr(weft_cli, "build_parser", build_parser)
    return weft_cli.main(argv)


@pytest.fixture(scope="module")
def on_disk(tmp_path_factory: pytest.TempPathFactory, vectors: NDArray[np.float32]) -> Path:
    path = tmp_path_factory.mktemp("recall") / "idx"
    with Index.create(path, vector_dim=DIM) as index:
        index.add_many(Document(key=f"d{i:05d}", vector=row) for i, row in enumerate(vectors[:4_000]))
        index.commit()
    return path


def test_command_end_to_end(
    on_disk: Path,
    queries: NDArray[np.float32],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    npy = tmp_path / "q.npy"
    np.save(npy, queries[:12])
    out = tmp_path / "out.json"
    plot = tmp_path / "recall.png"
    argv = ["recall", "--index", str(on_disk), "--queries", str(npy), "--nprobe", "1,4,20"]
    argv += ["--limit", "10", "--json", str(out)]
    try:
        import matplotlib  # noqa: F401

        argv += ["--plot", str(plot)]
    except ImportError:
        pass
    assert _main(argv, monkeypatch) == 0
    printed = capsys.readouterr().out
    assert "4,000 vectors" in printed and "10 queries" in printed
    assert "exact" in printed and "20 *" in printed
    payload = json.loads(out.read_text(encoding="utf-8"))
    assert [p["nprobe"] for p in payload["points"]] == [1, 4, 20, None]
    assert payload["queries"] == 10
    assert payload["points"][-1]["recall"]["10"] == 1.0
    assert payload["segments"][0]["rows"] == 4_000 and payload["segments"][0]["nlist"] == 32
    if "--plot" in argv:
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("weft-search: error: ") and "\n" not in err, err
    return err


def test_bad_width_exits_2(
    on_disk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    npy = tmp_path / "q.npy"
    np.save(npy, np.ones((3, DIM + 1), dtype=np.float32))
    assert _main(["recall", "--index", str(on_disk), "--queries", str(npy)], monkeypatch) == 2
    assert "width 17" in _one_line_error(capsys)


def test_missing_index_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    npy = tmp_path / "q.npy"
    np.save(npy, np.ones((3, DIM), dtype=np.float32))
    assert _main(["recall", "--index", str(tmp_path / "nope"), "--queries", str(npy)], monkeypatch) == 2
    _one_line_error(capsys)


def test_unreadable_queries_exit_2(
    on_disk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "q.npy"
    bad.write_text("not an array", encoding="utf-8")
    assert _main(["recall", "--index", str(on_disk), "--queries", str(bad)], monkeypatch) == 2
    _one_line_error(capsys)
    assert (
        _main(["recall", "--index", str(on_disk), "--queries", str(tmp_path / "absent.npy")], monkeypatch)
        == 2
    )
    _one_line_error(capsys)
    np.save(bad, np.array([["a", "b"]]))
    assert _main(["recall", "--index", str(on_disk), "--queries", str(bad)], monkeypatch) == 2
    _one_line_error(capsys)
