"""Derived splits (:mod:`weftsearch.eval.collection`): SciFact's ``dev``, and the same rule anywhere."""

from __future__ import annotations

import pytest

from tests.eval.test_harness import dev_collection, make_collection
from weftsearch.errors import InvalidParameterError
from weftsearch.eval.collection import DUPLICATE_RULE, DerivedSplit, derive_split
from weftsearch.eval.harness import build_testbed

QUERIES = {
    "t1": "Does Gene X cause Disease Y?",
    "t2": "birds at sea",
    "both": "a query judged in both splits",
    "r1": "does gene x  CAUSE disease y?",  # case and whitespace: a duplicate of t1
    "r2": "BIRDS AT SEA",  # a duplicate of t2
    "r3": "birds at the sea",  # not a duplicate
    "r4": "what follows fishing boats",
}


def test_a_derived_split_drops_case_insensitive_duplicates_and_shared_ids_with_their_twins() -> None:
    collection = dev_collection(QUERIES, ("r1", "r3", "both", "r2", "r4"), ("t1", "t2", "both"))
    derived = collection.with_derived_split()
    split = derived.derivation("dev")
    assert isinstance(split, DerivedSplit)
    assert (split.name, split.source, split.against, split.rule) == ("dev", "train", "test", DUPLICATE_RULE)
    assert split.qids == ("r3", "r4")  # the train file's order
    assert dict(split.removed) == {"r1": "t1", "both": "both", "r2": "t2"}
    assert list(split.removed) == ["both", "r1", "r2"]  # the query file's order, as the report lists them
    # The derived split is a split like the files' own: judgements of the kept queries only.
    assert set(derived.splits) == {"train", "test", "dev"}
    assert derived.splits["dev"] == {
        "r3": collection.splits["train"]["r3"],
        "r4": collection.splits["train"]["r4"],
    }
    assert derived.judged_query_ids("dev") == ("r3", "r4")
    # The collection it came from is unchanged, and its own splits are not "derived".
    assert "dev" not in collection.splits and collection.derivation("dev") is None
    assert derived.derivation("train") is None and derived.derivation(None) is None
    assert split.record() == {
        "name": "dev",
        "derived_from": "train",
        "deduplicated_against": "test",
        "queries": 2,
        "removed": [{"id": "both", "twin": "both"}, {"id": "r1", "twin": "t1"}, {"id": "r2", "twin": "t2"}],
        "rule": DUPLICATE_RULE,
    }


def test_without_duplicates_nothing_is_removed() -> None:
    collection = dev_collection(QUERIES, ("r3", "r4"), ("t1", "t2"))
    split = derive_split(collection, name="dev", source="train", against="test")
    assert split.qids == ("r3", "r4") and dict(split.removed) == {}
    assert split.record()["removed"] == []


def test_any_pair_of_splits_and_any_name() -> None:
    collection = dev_collection(QUERIES, ("r1", "r3"), ("t1", "t2"))
    # Reversed: the test queries minus those a train query duplicates.
    reverse = collection.with_derived_split("heldout", source="test", against="train")
    split = reverse.derivation("heldout")
    assert split is not None and (split.source, split.against) == ("test", "train")
    assert split.qids == ("t2",) and dict(split.removed) == {"t1": "r1"}
    assert reverse.judged_query_ids("heldout") == ("t2",)


def test_derived_splits_refuse_unknown_splits_naming_the_known_ones() -> None:
    collection = dev_collection(QUERIES, ("r1", "r3"), ("t1",))
    with pytest.raises(InvalidParameterError, match=r"no split 'nope' \(splits: test, train\)"):
        collection.with_derived_split(source="nope")
    with pytest.raises(InvalidParameterError, match=r"no split 'validation' \(splits: test, train\)"):
        collection.with_derived_split(against="validation")
    with pytest.raises(InvalidParameterError, match="against its own source 'train'"):
        collection.with_derived_split(source="train", against="train")
    with pytest.raises(InvalidParameterError, match=r"already has a split 'test' \(read from the files\)"):
        collection.with_derived_split("test")
    with pytest.raises(InvalidParameterError, match=r"already has a split 'dev' \(derived\)"):
        collection.with_derived_split().with_derived_split()
    with pytest.raises(InvalidParameterError, match="no split 'train'"):
        make_collection(splits={}).with_derived_split()


def test_a_split_left_empty_is_refused() -> None:
    collection = dev_collection(QUERIES, ("r1", "r2"), ("t1", "t2"))
    with pytest.raises(InvalidParameterError, match="split 'dev' would be empty"):
        collection.with_derived_split()


def test_a_testbed_on_the_derived_split_runs_its_queries_and_records_its_provenance() -> None:
    collection = make_collection()
    derived = collection.with_derived_split()
    testbed = build_testbed(derived, split="dev")
    split = testbed.split_derivation
    assert split is not None and split is derived.derivation("dev")
    assert tuple(testbed.queries) == split.qids == ("5", "9", "2", "10")
    assert set(testbed.qrels) == set(split.qids)
    record = testbed.record()
    assert record["split"] == "dev" and record["queries"] == 4
    assert record["split_derivation"] == split.record()
    assert record["split_derivation"]["removed"] == [{"id": "3", "twin": "3"}, {"id": "11", "twin": "3"}]
    # A file's own split records no derivation.
    plain = build_testbed(derived, split="train")
    assert plain.split_derivation is None and "split_derivation" not in plain.record()
