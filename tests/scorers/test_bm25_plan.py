"""BM25's plan: every path (numpy, compiled, filtered, batch, no match) says what it did, exactly.

The plan's counts are checked against brute force: the live documents' own
texts analysed one by one (terms matched, postings, documents), and the
segments' stored postings (blocks of 128, deleted documents included) for the
compiled kernel's block counts.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest

import weftsearch.scorers.bm25 as bm25_module
from tests.scorers.test_bm25_kernel import DISABLED, block_max_everywhere
from weftsearch import RRF, BM25Scorer, Document, F, Index, Query, Snapshot
from weftsearch.engine.stream import PlanValue
from weftsearch.native import bm25 as kernel
from weftsearch.scorers.bm25 import PLAN_KEYS

needs_compiled = pytest.mark.skipif(DISABLED, reason=f"{kernel.DISABLE_VARIABLE} turns the kernel off")

#: Keys every path knows and must agree on (the rest are the compiled kernel's own counters).
SHARED = ("terms", "terms_matched", "segments", "postings")

TEXTS = [
    "",
    "alpha",
    "alpha beta",
    "alpha alpha beta",
    "beta gamma",
    "gone",  # only in a deleted document
    "gamma absent",
    "alpha beta gamma delta",
    "delta delta delta",
]


@pytest.fixture(scope="module")
def built() -> Iterator[tuple[Index, dict[str, str]]]:
    """Three in-memory segments (one long list crosses blocks of 128), deletions; the live texts by key."""
    rng = np.random.default_rng(5)
    words = ["alpha", "beta", "gamma", "delta", "epsilon"]
    texts: dict[str, str] = {}
    index = Index("simple")
    serial = 0
    for segment in range(3):
        batch = []
        for _ in range(300 if segment == 0 else 90):
            text = " ".join(rng.choice(words, size=int(rng.integers(1, 6))).tolist())
            batch.append(Document(f"{rng.integers(10**4):04d}-{serial}", text, fields={"n": serial % 3}))
            texts[batch[-1].key] = text
            serial += 1
        if segment == 1:
            batch.append(Document("gone-doc", "gone alpha", fields={"n": 0}))
            texts["gone-doc"] = "gone alpha"
        index.add_many(batch)
        index.snapshot()  # seals the batch into its own segment
    doomed = list(dict.fromkeys(["gone-doc", *list(texts)[::7]]))
    index.delete_many(doomed)
    for key in doomed:
        del texts[key]
    yield index, texts
    index.close()


def brute(snapshot: Snapshot, texts: dict[str, str], text: str) -> dict[str, int]:
    """The plan's path-independent counts, from each live document's analysed text."""
    terms = sorted(set(snapshot.analyzer.analyze(text)))
    held = [set(snapshot.analyzer.analyze(doc)) for doc in texts.values()]
    frequencies = [sum(term in doc for doc in held) for term in terms]
    return {
        "terms": len(terms),
        "terms_matched": sum(count > 0 for count in frequencies),
        "segments": len(snapshot.parts),
        "postings": sum(frequencies),
        "documents": sum(bool(doc & set(terms)) for doc in held),
    }


def stored(snapshot: Snapshot, text: str) -> tuple[int, int]:
    """Postings and blocks of 128 in the query terms' stored lists, deleted documents included."""
    postings = blocks = 0
    for term in set(snapshot.analyzer.analyze(text)):
        for part in snapshot.parts:
            count = int(part.reader.postings(term)[0].shape[0])
            postings += count
            blocks += math.ceil(count / kernel.BLOCK)
    return postings, blocks


def check_keys(plan: dict[str, PlanValue] | None, path: str) -> dict[str, PlanValue]:
    assert plan is not None
    assert tuple(plan) == PLAN_KEYS
    assert plan["path"] == path
    return plan


@pytest.mark.parametrize("text", TEXTS)
def test_the_numpy_plan_counts_every_live_posting(
    built: tuple[Index, dict[str, str]], text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    index, texts = built
    snapshot = index.snapshot()
    monkeypatch.setattr(bm25_module, "_COMPILED_FROM_DOCS", 10**9)
    want = brute(snapshot, texts, text)
    for query in (Query(text), Query(text, filter=F("n") == 1)):
        plan = check_keys(BM25Scorer().score(snapshot, query, 10).plan, "numpy")
        assert {key: plan[key] for key in SHARED} == {key: want[key] for key in SHARED}
        # numpy scores every live posting (a filter applies after), and reads no blocks.
        assert plan["postings_scored"] == want["postings"] and plan["postings_skipped"] == 0
        assert plan["blocks"] is None and plan["blocks_skipped"] is None and plan["documents_scored"] is None


@needs_compiled
@pytest.mark.parametrize("text", TEXTS)
def test_the_compiled_plan_is_exact_and_agrees_with_numpy(
    built: tuple[Index, dict[str, str]], text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    index, texts = built
    snapshot = index.snapshot()
    scorer = BM25Scorer()
    numpy_plan = check_keys(scorer._score_numpy(snapshot, Query(text), 10).plan, "numpy")
    monkeypatch.setattr(bm25_module, "_COMPILED_FROM_DOCS", 0)
    want = brute(snapshot, texts, text)
    postings, blocks = stored(snapshot, text)
    big = 10**6  # k above every match: nothing can be pruned, so every live posting is scored
    for query, k in ((Query(text), 10), (Query(text), big), (Query(text, filter=F("n") == 1), 10)):
        plan = check_keys(scorer.score(snapshot, query, k).plan, "compiled")
        assert {key: plan[key] for key in SHARED} == {key: numpy_plan[key] for key in SHARED}
        assert {key: plan[key] for key in SHARED} == {key: want[key] for key in SHARED}
        scored, skipped = int(plan["postings_scored"] or 0), int(plan["postings_skipped"] or 0)
        if want["terms_matched"] == 0 and postings == 0:
            assert plan["blocks"] == 0 and scored == skipped == 0 and plan["documents_scored"] == 0
            continue
        assert scored + skipped == postings and plan["blocks"] == blocks
        assert 0 <= int(plan["blocks_skipped"] or 0) <= blocks
        if query.filter is None and k == big:
            # No k-th score to beat: every posting is read (deleted documents' too), every block
            # scored, and every live document holding a term fully scored.
            assert skipped == 0 and plan["blocks_skipped"] == 0
            assert plan["documents_scored"] == want["documents"]


@needs_compiled
def test_block_max_skips_show_in_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rare term beside one in every document: k = 1 skips most of the common list, and the plan says so."""
    monkeypatch.setattr(bm25_module, "_COMPILED_FROM_DOCS", 0)
    block_max_everywhere(monkeypatch)  # 4,000 documents: else scored densely, nothing skipped
    with Index("simple") as index:
        index.add_many(
            Document(f"d{i:05d}", "common filler" + (" rare" if i % 997 == 0 else "")) for i in range(4000)
        )
        snapshot = index.snapshot()
        plan = check_keys(BM25Scorer().score(snapshot, Query("common rare"), 1).plan, "compiled")
        assert plan["postings"] == 4000 + 5 and plan["terms_matched"] == 2
        assert int(plan["postings_skipped"] or 0) > 0 and int(plan["blocks_skipped"] or 0) > 0
        assert int(plan["postings_scored"] or 0) + int(plan["postings_skipped"] or 0) == 4005
        assert (
            int(plan["postings_scored"] or 0) + int(plan["postings_skipped"] or 0),
            plan["blocks"],
        ) == stored(snapshot, "common rare")
        assert 1 <= int(plan["documents_scored"] or 0) < 4000


@needs_compiled
@pytest.mark.skipif(not kernel.top_k_batch_available(), reason="no compiled BM25 batch function")
def test_each_query_of_a_batch_has_its_own_plan(
    built: tuple[Index, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    index, _ = built
    snapshot = index.snapshot()
    monkeypatch.setattr(bm25_module, "_BATCH_COMPILED_MAX_K", 10**9)
    monkeypatch.setattr(bm25_module, "_COMPILED_FROM_DOCS", 0)  # score() compiled too: the same counters
    scorer = BM25Scorer()
    batch = [Query(text) for text in TEXTS] + [Query("alpha", filter=F("n") == 2)]
    for k in (1, 10, 5000):  # 5,000: more than every match
        many = scorer.score_many(snapshot, batch, k)
        for query, stream in zip(batch, many, strict=True):
            assert stream.plan == scorer.score(snapshot, query, k).plan, (query.text, k)


def test_index_search_reports_the_bm25_plan(built: tuple[Index, dict[str, str]]) -> None:
    index, texts = built
    results = index.search("alpha beta", 5, RRF(), BM25Scorer())
    plan = results.plans["bm25"]
    assert plan is not None and tuple(plan) == PLAN_KEYS and plan["path"] in ("numpy", "compiled")
    assert plan["postings"] == brute(index.snapshot(), texts, "alpha beta")["postings"]
    assert results.to_dict()["plans"]["bm25"] == plan
    for batch in index.search_many(["alpha beta", "absent", ""], 5, RRF(), BM25Scorer()):
        assert batch.plans["bm25"] is not None and tuple(batch.plans["bm25"]) == PLAN_KEYS
