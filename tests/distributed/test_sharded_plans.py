"""A sharded BM25 search reports each shard's plan (in process, no Ray): ``shard-N.<key>`` entries.

Each shard scores its own documents, so its plan counts its own postings;
the shards partition the documents, so their postings add up to the single
index's, and each shard analyses the query into the same terms.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.distributed.building import close_all, sharded_copies
from weftsearch import RRF, BM25Scorer, Document, Index, Query
from weftsearch.cli import format_results
from weftsearch.distributed import ShardedIndex
from weftsearch.scorers.bm25 import PLAN_KEYS

WORDS = ["alpha", "beta", "gamma", "delta"]


def documents() -> list[Document]:
    return [
        Document(f"doc-{i:03d}", " ".join(WORDS[j] for j in range(4) if (i >> j) & 1 or j == i % 4))
        for i in range(60)
    ]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Index, dict[int, ShardedIndex]]]:
    root: Path = tmp_path_factory.mktemp("plans")
    single = Index()
    single.add_many(documents())
    sharded = sharded_copies(root, documents(), (1, 2))
    yield single, sharded
    close_all(single, sharded)


@pytest.mark.parametrize("count", [1, 2])
@pytest.mark.parametrize("text", ["alpha beta", "gamma gamma", "absent", ""])
def test_each_shard_has_its_bm25_plan(
    built: tuple[Index, dict[int, ShardedIndex]], count: int, text: str
) -> None:
    single, sharded = built
    index = sharded[count]
    for got, want in (
        (
            index.search(Query(text), 5, RRF(), BM25Scorer()),
            single.search(Query(text), 5, RRF(), BM25Scorer()),
        ),
        (
            index.search_many([Query(text)], 5, RRF(), BM25Scorer(), BM25Scorer(0.9, 0.4, name="other"))[0],
            single.search_many([Query(text)], 5, RRF(), BM25Scorer(), BM25Scorer(0.9, 0.4, name="other"))[0],
        ),
    ):
        plan, whole = got.plans["bm25"], want.plans["bm25"]
        assert plan is not None and whole is not None
        assert plan["shards"] == count
        names = index.shards
        for name in names:
            assert [key.split(".", 1)[1] for key in plan if key.startswith(f"{name}.")] == list(PLAN_KEYS)
            assert plan[f"{name}.path"] in ("numpy", "compiled")
            assert plan[f"{name}.terms"] == whole["terms"]
        assert set(plan) == {"shards"} | {f"{name}.{key}" for name in names for key in PLAN_KEYS}
        assert sum(int(plan[f"{name}.postings"] or 0) for name in names) == whole["postings"]
        assert max(int(plan[f"{name}.terms_matched"] or 0) for name in names) == whole["terms_matched"]
        assert got.to_dict()["plans"]["bm25"] == plan


def test_explain_prints_a_line_per_shard(built: tuple[Index, dict[int, ShardedIndex]]) -> None:
    _, sharded = built
    lines = format_results(sharded[2].search("alpha beta", 3, RRF(), BM25Scorer()), explain=True).splitlines()
    at = lines.index("  plan bm25: 2 shards")
    for offset, name in enumerate(sharded[2].shards, start=1):
        assert lines[at + offset].startswith(f"    {name}: ")
        assert "terms 2, terms_matched 2, segments 1, postings " in lines[at + offset]
