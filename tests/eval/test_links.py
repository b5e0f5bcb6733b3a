"""weftsearch.eval.links on a hand-built collection, every count derived by hand."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from weftsearch import Document
from weftsearch.errors import InvalidParameterError
from weftsearch.eval.datasets import Collection, FileRecord
from weftsearch.eval.links import (
    PairLinkRate,
    co_relevant_pairs,
    format_link_independence,
    link_coverage,
    link_independence,
    random_pairs,
)

# Links d1-d2 and d2-d3 are named from one end only (still links); d4-d6 from both; d6's self link
# is dropped. Linked: d1, d2, d3, d4, d6. Relevant to some query: d1, d2, d3, d5.
LINKS = {"d1": ("d2",), "d2": ("d3",), "d4": ("d6",), "d6": ("d4", "d6")}
QRELS = {
    "q1": {"d1": 1, "d2": 2, "d3": 1, "d4": 0},  # pairs d1-d2 (linked), d1-d3, d2-d3 (linked)
    "q2": {"d1": 1, "d2": 1},  # pair d1-d2 (linked), counted again for this query
    "q3": {"d5": 1},  # one relevant document: no pair
}


def make_collection(**changes: Any) -> Collection:
    keys = [f"d{i}" for i in range(1, 7)]
    base: dict[str, Any] = {
        "name": "linky",
        "folder": Path("/nonexistent/linky"),
        "documents": [Document(key, f"text of {key}", links=LINKS.get(key, ())) for key in keys],
        "queries": {qid: f"query {qid}" for qid in QRELS},
        "qrels": QRELS,
        "splits": {"other": {"q1": {"d4": 1, "d6": 1}}},
        "link_sets": {"ring": {key: {keys[(i + 1) % 6]: 1} for i, key in enumerate(keys)}},
        "query_file_ids": {qid: qid for qid in QRELS},
        "manifest": (FileRecord("docs", 1, "a" * 64, 1, "a" * 64),),
        "publishable": True,
    }
    base.update(changes)
    return Collection(**base)


def test_coverage_counts() -> None:
    coverage = link_coverage(make_collection())
    assert coverage.documents == 6
    assert coverage.linked_documents == 5  # d1 d2 d3 d4 d6
    assert coverage.relevant_documents == 4  # d1 d2 d3 d5 (d4 has grade 0 only)
    assert coverage.linked_relevant == 3
    assert coverage.linked_relevant_to_none == 2  # d4, d6
    assert coverage.links == 3
    assert coverage.all_pairs == PairLinkRate(15, 3)


def test_co_relevant_pairs_are_counted_per_query() -> None:
    result = co_relevant_pairs(make_collection())
    assert result == PairLinkRate(4, 3)
    assert result.rate == 0.75


def test_a_link_set_and_a_split_replace_the_defaults() -> None:
    collection = make_collection()
    # The ring links d1-d2, d2-d3, ..., d6-d1: d1-d2 and d2-d3 still, d1-d3 not.
    assert co_relevant_pairs(collection, link_set="ring") == PairLinkRate(4, 3)
    assert link_coverage(collection, link_set="ring").links == 6
    # Split "other" judges d4 and d6 relevant to q1: one pair, linked.
    assert co_relevant_pairs(collection, split="other") == PairLinkRate(1, 1)
    assert link_coverage(collection, split="other").linked_relevant_to_none == 3  # d1 d2 d3
    with pytest.raises(InvalidParameterError, match="no link set 'nosuch'"):
        link_coverage(collection, link_set="nosuch")
    with pytest.raises(InvalidParameterError, match="no split"):
        co_relevant_pairs(collection, split="nosuch")


def test_random_pairs_are_of_distinct_documents_and_seeded() -> None:
    two = [Document("x", "x", links=("y",)), Document("y", "y")]
    # Two documents: every pair of distinct documents is x-y, which is linked.
    assert random_pairs(make_collection(documents=two), pairs=500) == PairLinkRate(500, 500)
    unlinked = [Document("x", "x"), Document("y", "y")]
    assert random_pairs(make_collection(documents=unlinked), pairs=500) == PairLinkRate(500, 0)
    collection = make_collection()
    first = random_pairs(collection, pairs=20_000, seed=5)
    assert first == random_pairs(collection, pairs=20_000, seed=5)
    assert first != random_pairs(collection, pairs=20_000, seed=6)
    assert abs(first.rate - 3 / 15) < 0.015  # estimates the all-pairs rate (sd 0.003)
    for bad in ({"pairs": 0}, {"pairs": True}, {"seed": -1}):
        with pytest.raises(InvalidParameterError):
            random_pairs(collection, **bad)
    with pytest.raises(InvalidParameterError, match="at least two documents"):
        random_pairs(make_collection(documents=two[:1]))


def test_link_independence_record_and_printout() -> None:
    result = link_independence(make_collection(), pairs=1000, seed=2)
    record = result.record()
    assert record["co_relevant_pairs"] == {"pairs": 4, "linked": 3, "rate": 0.75}
    assert record["random_pairs"]["pairs"] == 1000 and record["random_pairs"]["seed"] == 2
    assert record["coverage"]["linked_documents"] == 5
    printed = format_link_independence(result)
    assert "documents with links: 5 of 6 (3 undirected links)" in printed
    assert "pairs relevant to the same query: 4, linked: 3 (75.0 %)" in printed
    assert "all pairs: 15, linked: 3 (20.0 %)" in printed


def test_an_empty_pair_set_has_no_rate() -> None:
    assert math.isnan(PairLinkRate(0, 0).rate)
    alone = make_collection(qrels={"q3": {"d5": 1}})
    assert "pairs relevant to the same query: 0, linked: 0 (n/a)" in format_link_independence(
        link_independence(alone, pairs=10)
    )
