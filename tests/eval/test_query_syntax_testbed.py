"""``build_testbed(query_syntax="lucene")``: a query file of boolean, phrase and fielded queries is
parsed as the engine's query language, each arm ranks exactly what ``Index.search`` ranks for the
parsed query, the record says so, and a query that does not parse names its id."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.eval.test_datasets import load_mini
from weftsearch import RRF, BM25Scorer, Query
from weftsearch.errors import InvalidParameterError, QuerySyntaxError
from weftsearch.eval.harness import build_testbed, compare
from weftsearch.ranking import Arm


def test_parsed_queries_rank_as_the_engine_ranks_them(tmp_path: Path) -> None:
    collection = load_mini(tmp_path, "scifact")
    collection = replace(collection, queries={"1": "+body -untitled", "2": "claim"})
    parsed = build_testbed(collection, query_syntax="lucene")
    plain = build_testbed(collection)
    assert parsed.queries["1"].tree is not None and plain.queries["1"].tree is None
    assert parsed.record()["query_syntax"] == "lucene" and "query_syntax" not in plain.record()
    arm = Arm("bm25", (BM25Scorer(),), RRF())
    run = compare(parsed, [arm], resamples=10).arms["bm25"].run
    expected = parsed.index.search(Query.parse("+body -untitled"), 100, RRF(), BM25Scorer())
    assert list(run.keys["1"]) == expected.keys == ["10"]  # "7" holds "untitled": excluded
    plain_run = compare(plain, [arm], resamples=10).arms["bm25"].run
    assert sorted(plain_run.keys["1"]) == ["10", "7"]  # plain text: "untitled" is one more word


def test_a_query_that_does_not_parse_names_its_id(tmp_path: Path) -> None:
    collection = replace(load_mini(tmp_path, "scifact"), queries={"1": 'claim "one', "2": "claim"})
    with pytest.raises(QuerySyntaxError, match="query '1' of scifact") as caught:
        build_testbed(collection, query_syntax="lucene")
    assert caught.value.position == 6
    with pytest.raises(InvalidParameterError, match="query_syntax must be"):
        build_testbed(collection, query_syntax="sql")
