"""The evaluation harness: testbeds, refused pairings, comparisons, sweeps, learned fusion.

Most tests run on a synthetic :class:`Collection` built here (30 documents with
text, links and times; ten queries of which eight are judged with a relevant
document, one is unjudged and one is judged with grade 0 only). Reference
values come from the pieces the harness is made of (:func:`evaluate`,
:func:`paired_bootstrap`, :func:`fisher_randomisation`, :func:`run_arm`) called
directly, and from pytrec_eval (trec_eval itself) on the TREC lines the runs
write. One test reads the shared CACM copy and skips when it is absent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from weftsearch.documents import Document
from weftsearch.engine.protocols import Fuser, Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.snapshot import Snapshot
from weftsearch.engine.stream import Stream
from weftsearch.errors import InvalidParameterError, PairingError
from weftsearch.eval import harness, reports
from weftsearch.eval.datasets import Collection, CollectionVectors, FileRecord, load_collection
from weftsearch.eval.harness import (
    Comparison,
    build_testbed,
    compare,
    content_hash,
    development_split,
    fusion_grid,
    learn_fusion,
    sweep,
)
from weftsearch.eval.metrics import evaluate, run_from_rankings
from weftsearch.eval.runs import ArmRun, StreamCache, run_arm
from weftsearch.eval.stats import fisher_randomisation, paired_bootstrap
from weftsearch.fusion import RRF, ScoreFusion, WeightedRRF
from weftsearch.ranking.arm import Arm
from weftsearch.scorers import BM25Scorer, GraphScorer, RecencyScorer, VectorScorer

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"

MEASURES = ("nDCG@10", "R@100", "AP", "RR", "P@10")
#: Our measure name -> (pytrec_eval measure to ask for, the key it answers under).
PYTREC = {
    "nDCG@10": ("ndcg_cut.10", "ndcg_cut_10"),
    "R@100": ("recall.100", "recall_100"),
    "AP": ("map", "map"),
    "RR": ("recip_rank", "recip_rank"),
    "P@10": ("P.10", "P_10"),
}
TOLERANCE = 1e-12

Scorers = tuple[Scorer, Scorer, Scorer]
DevAndTest = tuple[harness.Testbed, harness.Testbed]  # qualified: pytest would collect a bare Test*

# ---------------------------------------------------------------------------- the synthetic collection

TOPICS = (
    ("retrieval", "ranking", "fusion"),
    ("graph", "citation", "link"),
    ("vector", "embedding", "neural"),
    ("recency", "news", "stream"),
    ("compiler", "parser", "grammar"),
    ("matrix", "algebra", "numeric"),
)
KEYS = tuple(f"D{i}" for i in range(1, 31))  # string order differs from numeric: D1, D10, D11, ...


def synthetic_documents() -> list[Document]:
    documents = []
    for i, key in enumerate(KEYS):
        main, side = TOPICS[i % 6], TOPICS[(i * 5 + 1) % 6]
        words = [main[i % 3], main[(i + 1) % 3], main[(i + 2) % 3], side[i % 3], f"unique{i}"]
        words += [main[0]] * (i % 4 == 0) + [f"filler{j}" for j in range(i % 5)]
        links = tuple(KEYS[j] for j in ((i + 6) % 30, (i * 7 + 3) % 30) if j != i)
        documents.append(Document(key, " ".join(words), links=links, time=1e6 + 3600.0 * ((i * 11) % 30)))
    return documents


#: In file order; "4" is unjudged, "8" judged with grade 0 only, "11" a train duplicate of test "3".
QUERIES = {
    "7": "ranking fusion",
    "3": "citation graph",
    "12": "neural embedding vector",
    "4": "unjudged query",
    "1": "news stream",
    "5": "parser grammar",
    "8": "all zero",
    "9": "matrix numeric",
    "2": "retrieval link",
    "10": "compiler algebra",
    "11": "Citation  GRAPH",
}
JUDGED = ("7", "3", "12", "1", "5", "9", "2", "10")
TOPIC_OF = {"7": 0, "3": 1, "12": 2, "1": 3, "5": 4, "9": 5, "2": 0, "10": 4, "11": 1}
TEST = ("7", "3", "12", "1")
TRAIN = ("3", "5", "9", "2", "10", "11")


def judgements(qids: Sequence[str]) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for qid in qids:
        topic = TOPIC_OF[qid]
        graded = {key: 2 if i % 12 < 6 else 1 for i, key in enumerate(KEYS) if i % 6 == topic}
        # Two grade-0 judgements per query (documents of the next topic).
        qrels[qid] = {**graded, KEYS[(topic + 1) % 30]: 0, KEYS[(topic + 7) % 30]: 0}
    return qrels


MANIFEST = (
    FileRecord("docs.txt", 120, "a" * 64, 120, "a" * 64),
    FileRecord("qrels.txt", 40, "b" * 64, 40, "b" * 64),
)


def make_collection(**changes: Any) -> Collection:
    base: dict[str, Any] = {
        "name": "synth",
        "folder": Path("/nonexistent/synth"),
        "documents": synthetic_documents(),
        "queries": dict(QUERIES),
        "qrels": {**judgements(JUDGED), "8": {KEYS[0]: 0, KEYS[1]: 0}},
        "splits": {"test": judgements(TEST), "train": judgements(TRAIN)},
        "link_sets": {
            "ring": {key: {KEYS[(i + 1) % 30]: 1, KEYS[(i - 1) % 30]: 1} for i, key in enumerate(KEYS)}
        },
        "query_file_ids": {qid: qid for qid in QUERIES},
        "manifest": MANIFEST,
        "publishable": True,
        "parameters": {"choice": "x"},
    }
    base.update(changes)
    return Collection(**base)


def make_vectors(collection: Collection, /, **changes: Any) -> CollectionVectors:
    rng = np.random.default_rng(5)
    documents = rng.standard_normal((len(collection.documents), 4)).astype(np.float32)
    queries = rng.standard_normal((len(collection.queries), 4)).astype(np.float32)
    base: dict[str, Any] = {
        "collection": collection.name,
        "variant": "toy",
        "model": "toy-model",
        "dims": 4,
        "documents": documents,
        "queries": queries,
        "document_keys": collection.document_keys,
        "query_ids": collection.query_ids,
        "record": {"model": "toy-model"},
        "manifest": (FileRecord("vectors/toy/corpus.npy", 10, "c" * 64, 10, "c" * 64),),
        "publishable": True,
    }
    base.update(changes)
    return CollectionVectors(**base)


@pytest.fixture(scope="module")
def collection() -> Collection:
    return make_collection()


@pytest.fixture(scope="module")
def testbed(collection: Collection) -> harness.Testbed:
    return build_testbed(collection)


@pytest.fixture(scope="module")
def scorers() -> Scorers:
    bm25 = BM25Scorer()
    return bm25, GraphScorer(seed_scorer=bm25), RecencyScorer(half_life=7200.0)


def three_arms(scorers: Scorers) -> list[Arm]:
    bm25, graph, recency = scorers
    return [
        Arm("text", (bm25,), ScoreFusion(), depth=30),
        Arm("text+graph", (bm25, graph), RRF(), depth=30),
        Arm("text+recency", (bm25, recency), RRF(k=10), depth=30),
    ]


class RecordingScorer:
    """Wraps a scorer and records the query texts it was asked about."""

    def __init__(self, inner: Scorer) -> None:
        self.inner = inner
        self.texts: list[str] = []

    @property
    def name(self) -> str:
        return str(self.inner.name)

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        self.texts.append(query.text)
        return self.inner.score(snapshot, query, k)


def trec_run(lines: Sequence[str], qids: Sequence[str]) -> dict[str, dict[str, float]]:
    """Parse TREC run lines back into ``{qid: {doc: score}}`` (every qid present, maybe empty)."""
    out: dict[str, dict[str, float]] = {qid: {} for qid in qids}
    for line in lines:
        qid, _, doc, _, score, _ = line.split()
        out[qid][doc] = float(score)
    return out


def pytrec_values(
    qrels: Mapping[str, Mapping[str, int]], run: Mapping[str, Mapping[str, float]]
) -> dict[str, dict[str, float]]:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    evaluator = pytrec_eval.RelevanceEvaluator(
        {q: dict(j) for q, j in qrels.items()}, {asked for asked, _ in PYTREC.values()}
    )
    result: dict[str, dict[str, float]] = evaluator.evaluate({q: dict(s) for q, s in run.items()})
    return result


def assert_agrees_with_pytrec(
    result: ArmRun, qrels: Mapping[str, Mapping[str, int]], comparison: Comparison
) -> None:
    reference = pytrec_values(qrels, trec_run(list(result.trec_lines()), result.qids))
    evaluation = comparison.arms[result.arm].evaluation
    assert sorted(reference) == list(evaluation.qids)
    for ours, (_, theirs) in PYTREC.items():
        values = evaluation.per_query(ours)
        for qid in evaluation.qids:
            assert abs(values[qid] - reference[qid][theirs]) <= TOLERANCE, (result.arm, ours, qid)


# ---------------------------------------------------------------------------- build_testbed


def test_queries_are_the_judged_ones_in_file_order(collection: Collection, testbed: harness.Testbed) -> None:
    assert tuple(testbed.queries) == JUDGED  # not "4" (unjudged) nor "8" (grade 0 only)
    assert all(testbed.queries[qid] == Query(text=QUERIES[qid]) for qid in JUDGED)
    assert tuple(testbed.qrels) == JUDGED
    assert testbed.qrels["7"] == collection.qrels["7"]
    assert testbed.split is None
    assert testbed.vectors is None
    assert testbed.analyzer == "english"
    assert len(testbed.index) == 30
    assert testbed.snapshot.keys() == sorted(KEYS)


def test_content_hash_is_the_hash_of_the_documents(collection: Collection, testbed: harness.Testbed) -> None:
    assert testbed.content_hash == content_hash(collection.documents, "english")
    assert len(testbed.content_hash) == 64
    assert content_hash(collection.documents, "english") != content_hash(collection.documents, "other")


def test_content_hash_does_not_depend_on_document_order(
    collection: Collection, testbed: harness.Testbed
) -> None:
    documents = collection.documents
    shuffled = [documents[i] for i in np.random.default_rng(1).permutation(len(documents))]
    assert content_hash(shuffled, "english") == testbed.content_hash
    assert content_hash(reversed(documents), "english") == testbed.content_hash
    assert (
        build_testbed(make_collection(documents=list(reversed(documents)))).content_hash
        == testbed.content_hash
    )


CHANGES: dict[str, dict[str, Any]] = {
    "text": {"text": "retrieval ranking fusion graph unique0 retrieval!"},
    "one link dropped": {"links": ("D7",)},
    "one link added": {"links": ("D7", "D4", "D30")},
    "no links": {"links": ()},
    "time": {"time": 1e6 + 1.0},
    "no time": {"time": None},
    "vector added": {"vector": np.ones(4, dtype=np.float32)},
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_content_hash_changes_with_any_document_field(collection: Collection, change: str) -> None:
    documents = list(collection.documents)
    before = content_hash(documents, "english")
    documents[0] = replace(documents[0], **CHANGES[change])
    assert content_hash(documents, "english") != before


def test_content_hash_changes_with_a_vector_component() -> None:
    one = [Document("a", "x", vector=np.array([1.0, 2.0], dtype=np.float32))]
    two = [Document("a", "x", vector=np.array([1.0, np.nextafter(np.float32(2.0), np.float32(3.0))]))]
    assert content_hash(one, "english") != content_hash(two, "english")


def test_content_hash_tells_apart_documents_that_index_differently() -> None:
    # A key holding a separator a joined encoding could use (a control character such as
    # \x1f is no longer a key at all: Document refuses it).
    base = [Document("a", "x"), Document("b", "y"), Document("a b", "z")]
    one = [*base, Document("d", "w", links=("a b",))]
    two = [*base, Document("d", "w", links=("a", "b"))]
    assert content_hash(one, "english") != content_hash(two, "english")


def test_record_holds_files_hash_and_publishability(collection: Collection, testbed: harness.Testbed) -> None:
    record = testbed.record()
    assert record == {
        "collection": "synth",
        "split": None,
        "queries": 8,
        "documents": 30,
        "files": [entry.as_dict() for entry in MANIFEST],
        "loader_parameters": {"choice": "x"},
        "analyzer": "english",
        "link_set": None,
        "index_content_sha256": testbed.content_hash,
        "publishable": True,
        "provenance": "pinned",
    }
    assert record["files"][0]["sha256"] == "a" * 64
    assert record["files"][0]["verified"] is True
    mismatched = build_testbed(make_collection(publishable=False))
    assert mismatched.publishable is False
    assert mismatched.record()["publishable"] is False
    assert mismatched.record()["provenance"] == "mismatched"


def test_a_split_testbed_uses_that_splits_judged_queries(collection: Collection) -> None:
    testbed = build_testbed(collection, split="train")
    assert tuple(testbed.queries) == ("3", "5", "9", "2", "10", "11")
    assert testbed.split == "train"
    assert testbed.record()["split"] == "train"
    assert testbed.qrels == collection.splits["train"]


def test_with_split_narrows_queries_and_judgements(testbed: harness.Testbed) -> None:
    narrow = testbed.with_split("test", ["12", "7"])
    assert tuple(narrow.queries) == ("12", "7")  # the order asked
    assert tuple(narrow.qrels) == ("12", "7")
    assert narrow.snapshot is testbed.snapshot
    with pytest.raises(InvalidParameterError, match="without judgements"):
        testbed.with_split("test", ["7", "5"])


# ---------------------------------------------------------------------------- vectors and pairings


def test_vectors_are_attached_to_documents_and_queries(collection: Collection) -> None:
    vectors = make_vectors(collection)
    testbed = build_testbed(collection, vectors=vectors, model="toy-model")
    assert testbed.vectors is vectors
    for qid in JUDGED:
        query_vector = testbed.queries[qid].vector
        assert query_vector is not None
        assert query_vector.tolist() == vectors.query_vector(qid).tolist()
    document = testbed.index.get("D5")
    assert document.vector is not None
    assert document.vector.tolist() == vectors.document_vector("D5").tolist()
    assert testbed.content_hash == content_hash(vectors.attach(collection.documents), "english")
    assert testbed.content_hash != build_testbed(collection).content_hash
    record = testbed.record()
    assert record["vectors"] == {
        "variant": "toy",
        "model": "toy-model",
        "dims": 4,
        "files": [vectors.manifest[0].as_dict()],
        "documents_with_vector": 30,
        "queries_with_vector": len(collection.queries),
    }
    # A vector arm runs and is evaluated on every judged query.
    result = compare(testbed, [Arm("vector", (VectorScorer(),), RRF(), depth=10)], k=10, resamples=10)
    assert result.arms["vector"].evaluation.qids == tuple(sorted(JUDGED))


def test_one_changed_vector_changes_the_content_hash(collection: Collection) -> None:
    vectors = make_vectors(collection)
    changed = vectors.documents.copy()
    changed[17, 2] += 0.5
    before = build_testbed(collection, vectors=vectors).content_hash
    assert (
        build_testbed(collection, vectors=make_vectors(collection, documents=changed)).content_hash != before
    )


def test_unpublishable_vectors_make_the_testbed_unpublishable(collection: Collection) -> None:
    testbed = build_testbed(collection, vectors=make_vectors(collection, publishable=False))
    assert testbed.publishable is False
    assert testbed.record()["publishable"] is False


def test_a_judged_document_absent_from_the_collection_is_refused() -> None:
    qrels = {**judgements(JUDGED), "9": {**judgements(["9"])["9"], "D99": 1}}
    with pytest.raises(PairingError, match="D99"):
        build_testbed(make_collection(qrels=qrels))
    # Absent with grade 0 is refused as well: the pairing is wrong either way.
    qrels = {**judgements(JUDGED), "8": {"GONE": 0}}
    with pytest.raises(PairingError, match="GONE"):
        build_testbed(make_collection(qrels=qrels))
    # ... and in the split used, not only the default judgements.
    splits = {"test": {**judgements(TEST), "7": {"D1": 1, "NOPE": 2}}, "train": judgements(TRAIN)}
    with pytest.raises(PairingError, match="NOPE"):
        build_testbed(make_collection(splits=splits), split="test")


def test_vectors_of_another_collection_are_refused(collection: Collection) -> None:
    with pytest.raises(PairingError, match="collection 'other'"):
        build_testbed(collection, vectors=make_vectors(collection, collection="other"))


def test_vectors_of_another_model_are_refused(collection: Collection) -> None:
    vectors = make_vectors(collection)
    with pytest.raises(PairingError, match="other-model"):
        build_testbed(collection, vectors=vectors, model="other-model")
    assert build_testbed(collection, vectors=vectors).vectors is vectors  # model=None: not checked


def test_vector_rows_naming_other_documents_are_refused(collection: Collection) -> None:
    renamed = ("X1", *collection.document_keys[1:])
    with pytest.raises(PairingError, match="vector rows"):
        build_testbed(collection, vectors=make_vectors(collection, document_keys=renamed))
    swapped = (collection.document_keys[1], collection.document_keys[0], *collection.document_keys[2:])
    with pytest.raises(PairingError, match="vector rows"):
        build_testbed(collection, vectors=make_vectors(collection, document_keys=swapped))


def test_vector_rows_naming_other_queries_are_refused(collection: Collection) -> None:
    ids = (*collection.query_ids[:-1], "99")
    with pytest.raises(PairingError, match="query vector rows"):
        build_testbed(collection, vectors=make_vectors(collection, query_ids=ids))
    with pytest.raises(PairingError, match="query vector rows"):
        build_testbed(collection, vectors=make_vectors(collection, query_ids=collection.query_ids[:-1]))


def test_unknown_link_set_or_split_is_refused(collection: Collection) -> None:
    with pytest.raises(InvalidParameterError, match=r"no link set 'cocitation' \(known: ring\)"):
        build_testbed(collection, link_set="cocitation")
    with pytest.raises(InvalidParameterError, match="no split 'dev'"):
        build_testbed(collection, split="dev")


def link_pairs(snapshot: Snapshot) -> set[tuple[str, str]]:
    links = snapshot.links().tocoo()
    keys = snapshot.keys()
    return {(keys[int(r)], keys[int(c)]) for r, c in zip(links.row, links.col, strict=True)}


def test_a_link_set_replaces_every_documents_links(collection: Collection, testbed: harness.Testbed) -> None:
    ring = build_testbed(collection, link_set="ring")
    assert ring.link_set == "ring"
    assert ring.record()["link_set"] == "ring"
    expected = {(KEYS[i], KEYS[(i + d) % 30]) for i in range(30) for d in (1, -1)}
    assert link_pairs(ring.snapshot) == expected
    loaded = {(d.key, target) for d in collection.documents for target in d.links}
    assert link_pairs(testbed.snapshot) == loaded != expected
    assert ring.content_hash != testbed.content_hash
    # A graph arm seeded explicitly at D5 sees D4 and D6 one hop away, D3 and D7 two hops.
    arm = Arm("graph", (GraphScorer(max_depth=2),), ScoreFusion(), depth=10)
    result = run_arm(StreamCache(ring.snapshot), arm, {"s": Query(seeds=("D5",))}, 10)
    assert result.keys["s"] == ("D4", "D6", "D3", "D7")
    # One stream passes through unfused (docs/ARCHITECTURE.md): the graph scorer's own 1 / (1 + hops).
    assert result.scores["s"].tolist() == [1 / 2, 1 / 2, 1 / 3, 1 / 3]


# ---------------------------------------------------------------------------- compare


@pytest.fixture(scope="module")
def comparison(testbed: harness.Testbed, scorers: Scorers) -> Comparison:
    return compare(testbed, three_arms(scorers), k=30, resamples=2000, seed=7)


def test_compare_means_equal_evaluate_on_each_run(testbed: harness.Testbed, comparison: Comparison) -> None:
    assert comparison.measures == MEASURES
    assert comparison.baseline == "text"
    assert list(comparison.arms) == ["text", "text+graph", "text+recency"]
    for name, result in comparison.arms.items():
        direct = evaluate(testbed.qrels, result.run.run, MEASURES)
        assert result.evaluation.qids == tuple(sorted(JUDGED))
        assert result.evaluation.means == direct.means
        for measure in MEASURES:
            assert comparison.mean(name, measure) == direct.mean(measure)
            assert result.evaluation.per_query(measure) == direct.per_query(measure)


def test_compare_runs_are_run_arm(testbed: harness.Testbed, comparison: Comparison, scorers: Scorers) -> None:
    for arm in three_arms(scorers):
        direct = run_arm(StreamCache(testbed.snapshot), arm, testbed.queries, 30)
        result = comparison.arms[arm.name].run
        assert result.keys == direct.keys
        assert {q: s.tolist() for q, s in result.scores.items()} == {
            q: s.tolist() for q, s in direct.scores.items()
        }
        assert result.description == arm.describe()


def test_compare_tests_equal_direct_calls(comparison: Comparison) -> None:
    base = comparison.arms["text"].evaluation
    assert set(comparison.bootstrap) == {(arm, m) for arm in ("text+graph", "text+recency") for m in MEASURES}
    assert set(comparison.randomisation) == set(comparison.bootstrap)
    for (arm, measure), boot in comparison.bootstrap.items():
        a = comparison.arms[arm].evaluation.per_query(measure)
        b = base.per_query(measure)
        assert boot == paired_bootstrap(a, b, resamples=2000, seed=7)
        assert comparison.randomisation[arm, measure] == fisher_randomisation(a, b, permutations=2000, seed=7)
        assert boot.mean_difference == pytest.approx(
            comparison.mean(arm, measure) - comparison.mean("text", measure)
        )
    # The fixture is not degenerate: graph fusion changes nDCG@10 here.
    assert comparison.bootstrap["text+graph", "nDCG@10"].mean_difference != 0.0


def test_compare_is_reproducible(testbed: harness.Testbed, scorers: Scorers, comparison: Comparison) -> None:
    again = compare(testbed, three_arms(scorers), k=30, resamples=2000, seed=7).record()
    first = comparison.record()
    first.pop("code")
    again.pop("code")
    assert again == first
    assert first["bootstrap"]["seed"] == 7
    assert first["bootstrap"]["resamples"] == 2000
    entries = {entry["arm"]["name"]: entry for entry in first["arms"]}
    assert "against_baseline" not in entries["text"]
    against = entries["text+graph"]["against_baseline"]["nDCG@10"]
    assert against["low"] == comparison.bootstrap["text+graph", "nDCG@10"].low
    assert against["randomisation_p"] == comparison.randomisation["text+graph", "nDCG@10"].p_value
    for name, result in comparison.arms.items():
        assert entries[name]["tie_break_slots"] == result.run.tied_total()
        assert entries[name]["queries_with_ties"] == sum(1 for v in result.run.tied.values() if v)
    # Another seed gives another interval (so the equality above is not vacuous).
    other = compare(testbed, three_arms(scorers), k=30, resamples=2000, seed=8)
    assert other.bootstrap["text+graph", "nDCG@10"] != comparison.bootstrap["text+graph", "nDCG@10"]


def test_adding_an_arm_does_not_change_anothers_interval(
    testbed: harness.Testbed, scorers: Scorers, comparison: Comparison
) -> None:
    two = compare(testbed, three_arms(scorers)[:2], k=30, resamples=2000, seed=7)
    for measure in MEASURES:
        assert two.bootstrap["text+graph", measure] == comparison.bootstrap["text+graph", measure]
        assert two.randomisation["text+graph", measure] == comparison.randomisation["text+graph", measure]


def test_baseline_selection(testbed: harness.Testbed, scorers: Scorers) -> None:
    result = compare(testbed, three_arms(scorers), k=30, resamples=500, seed=1, baseline="text+graph")
    assert result.baseline == "text+graph"
    assert {arm for arm, _ in result.bootstrap} == {"text", "text+recency"}
    graph = result.arms["text+graph"].evaluation.per_query("AP")
    text = result.arms["text"].evaluation.per_query("AP")
    assert result.bootstrap["text", "AP"] == paired_bootstrap(text, graph, resamples=500, seed=1)
    assert result.bootstrap["text", "AP"].mean_difference == pytest.approx(
        result.mean("text", "AP") - result.mean("text+graph", "AP")
    )


def test_compare_refuses_bad_arm_lists(testbed: harness.Testbed, scorers: Scorers) -> None:
    arms = three_arms(scorers)
    with pytest.raises(InvalidParameterError, match="at least one arm"):
        compare(testbed, [], resamples=10)
    with pytest.raises(InvalidParameterError, match="distinct"):
        compare(testbed, [arms[0], arms[1], replace(arms[2], name="text")], resamples=10)
    with pytest.raises(InvalidParameterError, match="baseline 'nope'"):
        compare(testbed, arms, baseline="nope", resamples=10)
    with pytest.raises(InvalidParameterError, match="at least one measure"):
        compare(testbed, arms, measures=(), resamples=10)
    other = build_testbed(make_collection())
    with pytest.raises(InvalidParameterError, match="another snapshot"):
        compare(testbed, arms, cache=StreamCache(other.snapshot), resamples=10)


def test_compare_measures_are_canonical_and_first_is_the_headline(
    testbed: harness.Testbed, scorers: Scorers
) -> None:
    result = compare(testbed, three_arms(scorers)[:2], k=30, measures=["MAP", "P@5"], resamples=10)
    assert result.measures == ("AP", "P@5")
    assert set(result.arms["text"].evaluation.means) == {"AP", "P@5"}


def test_compare_reuses_a_given_cache(testbed: harness.Testbed) -> None:
    counted = RecordingScorer(BM25Scorer())
    cache = StreamCache(testbed.snapshot)
    arms = [Arm("a", (counted,), RRF(), depth=30), Arm("b", (counted,), ScoreFusion(), depth=30)]
    compare(testbed, arms, k=30, cache=cache, resamples=10)
    compare(testbed, arms, k=30, cache=cache, resamples=10)
    assert counted.texts == [QUERIES[qid] for qid in JUDGED]  # once per query, for four runs
    assert len(cache) == len(JUDGED)


def test_compare_records_extra_facts(testbed: harness.Testbed) -> None:
    arms = [Arm("a", (BM25Scorer(),), RRF(), depth=10)]
    result = compare(testbed, arms, k=10, resamples=10, extra={"note": 1})
    assert result.record()["extra"] == {"note": 1}
    assert "extra" not in compare(testbed, arms, k=10, resamples=10).record()


# ---------------------------------------------------------------------------- agreement with trec_eval


@pytest.mark.reference
@pytest.mark.parametrize("k", [5, 30])
def test_comparison_agrees_with_pytrec_eval_on_the_trec_lines(
    testbed: harness.Testbed, scorers: Scorers, k: int
) -> None:
    result = compare(testbed, three_arms(scorers), k=k, resamples=10)
    tie_break_mattered = False
    for name, arm_result in result.arms.items():
        assert_agrees_with_pytrec(arm_result.run, testbed.qrels, result)
        # Would evaluating in the engine's order (key ascending on ties) have given other numbers?
        engine_order = run_from_rankings({q: list(arm_result.run.keys[q]) for q in arm_result.run.qids})
        in_engine_order = evaluate(testbed.qrels, engine_order, MEASURES)
        tie_break_mattered |= any(
            in_engine_order.per_query(m) != arm_result.evaluation.per_query(m) for m in MEASURES
        )
        assert arm_result.run.tied_total() > 0 or name == "text+recency"
    # The fixture has fused ties that decide a measure: the tie-break rule was exercised.
    assert tie_break_mattered


# ---------------------------------------------------------------------------- sweep


def test_sweep_visits_the_grid_in_order_and_evaluates_each_point(
    testbed: harness.Testbed, scorers: Scorers
) -> None:
    bm25, _, recency = scorers
    counted = RecordingScorer(bm25)

    def make_arm(c: float, w: float) -> Arm:
        return Arm(f"rrf-{c:g}-{w:g}", (counted, recency), WeightedRRF([1.0, w], k=c), depth=30)

    grid = {"c": (10.0, 60.0, 1.0), "w": (0.5, 2.0)}
    result = sweep(testbed, "rrf", make_arm, grid, measure="AP", k=30)
    assert [p.params for p in result.points] == [
        {"c": c, "w": w} for c in (10.0, 60.0, 1.0) for w in (0.5, 2.0)
    ]
    assert [p.arm for p in result.points] == [
        "rrf-10-0.5",
        "rrf-10-2",
        "rrf-60-0.5",
        "rrf-60-2",
        "rrf-1-0.5",
        "rrf-1-2",
    ]
    assert result.measure == "AP"
    assert result.grid == {"c": (10.0, 60.0, 1.0), "w": (0.5, 2.0)}
    assert result.reference is None
    # Every point shares the BM25 streams: one call per query for the whole sweep.
    assert counted.texts == [QUERIES[qid] for qid in JUDGED]
    for point in result.points:
        c, w = point.params["c"], point.params["w"]
        direct = run_arm(StreamCache(testbed.snapshot), make_arm(c, w), testbed.queries, 30)
        assert point.mean == evaluate(testbed.qrels, direct.run, "AP").mean("AP")
        assert point.tie_break_slots == direct.tied_total()
        assert point.difference is None
    means = [p.mean for p in result.points]
    assert len(set(means)) > 1
    assert result.best() is result.points[means.index(max(means))]
    record = result.record()
    assert record["grid"] == {"c": [10.0, 60.0, 1.0], "w": [0.5, 2.0]}
    assert [p["mean"] for p in record["points"]] == means


def test_sweep_best_picks_the_first_maximum(testbed: harness.Testbed) -> None:
    bm25 = BM25Scorer()
    # The grid value does not change the arm: every point ties, and the first wins.
    result = sweep(testbed, "flat", lambda n: Arm(f"p{n}", (bm25,), RRF(), depth=30), {"n": (3, 1, 2)}, k=30)
    assert len({p.mean for p in result.points}) == 1
    assert result.best() is result.points[0]
    assert result.best().params == {"n": 3}


def test_sweep_differences_equal_paired_bootstrap_against_the_reference(
    testbed: harness.Testbed, scorers: Scorers
) -> None:
    bm25, graph, _ = scorers
    reference = run_arm(
        StreamCache(testbed.snapshot), Arm("base", (bm25,), ScoreFusion(), depth=30), testbed.queries, 30
    )
    base_values = evaluate(testbed.qrels, reference.run, "nDCG@10").per_query("nDCG@10")

    def make_arm(c: float) -> Arm:
        return Arm(f"g{c:g}", (bm25, graph), RRF(k=c), depth=30)

    result = sweep(
        testbed, "g", make_arm, {"c": (5.0, 60.0)}, k=30, reference=reference, resamples=700, seed=4
    )
    assert result.reference == "base"
    for point in result.points:
        direct = run_arm(StreamCache(testbed.snapshot), make_arm(point.params["c"]), testbed.queries, 30)
        values = evaluate(testbed.qrels, direct.run, "nDCG@10").per_query("nDCG@10")
        assert point.difference == paired_bootstrap(values, base_values, resamples=700, seed=4)
    assert all(p.difference is not None and p.difference.mean_difference != 0.0 for p in result.points)
    assert "low" in result.record()["points"][0]


def test_sweep_refuses_an_empty_grid(testbed: harness.Testbed) -> None:
    def make_arm(**params: Any) -> Arm:
        return Arm("a", (BM25Scorer(),), RRF())

    with pytest.raises(InvalidParameterError, match="grid"):
        sweep(testbed, "s", make_arm, {})
    with pytest.raises(InvalidParameterError, match="grid"):
        sweep(testbed, "s", make_arm, {"c": (1.0,), "w": ()})


# ---------------------------------------------------------------------------- development split


def dev_collection(
    queries: Mapping[str, str], train: Sequence[str], test: Sequence[str], test_zero: Sequence[str] = ()
) -> Collection:
    """Every train and test query judged relevant to D1; ``test_zero`` judged with grade 0 only."""
    one, zero = {KEYS[0]: 1}, {KEYS[0]: 0}
    tests = {**{qid: one for qid in test}, **{qid: zero for qid in test_zero}}
    return make_collection(
        queries=dict(queries),
        qrels=tests,
        splits={"train": {qid: one for qid in train}, "test": tests},
        query_file_ids={qid: qid for qid in queries},
    )


def test_development_split_removes_normalised_duplicates_of_test_queries() -> None:
    queries = {
        "t1": "Foo  Bar",
        "r1": "foo bar",  # case and whitespace
        "r2": "\uff26\uff2f\uff2f\tbar\n",  # fullwidth FOO: NFKC, then casefold
        "r3": "foo baz",
        "t2": "Straße",
        "r4": "STRASSE",  # casefold, not lower: "straße" -> "strasse"
        "r5": "foobar",  # not a duplicate: a space is not nothing
        "t3": "shared id",
        "r6": "  another   one ",
        "u1": "unjudged test text",
        "r7": "Unjudged Test Text",  # duplicates a test query with no relevant document (not run): kept
    }
    train = ("r1", "r2", "r3", "r4", "r5", "t3", "r6", "r7")
    collection = dev_collection(queries, train, ("t1", "t2", "t3"), test_zero=("u1",))
    assert collection.judged_query_ids("test") == ("t1", "t2", "t3")
    split = development_split(collection)
    assert split.qids == ("r3", "r5", "r6", "r7")  # train file order
    assert split.removed == {"r1": "t1", "r2": "t1", "r4": "t2", "t3": "t3"}
    assert "NFKC" in split.rule


def test_development_split_of_the_synthetic_collection(collection: Collection) -> None:
    split = development_split(collection)
    assert split.qids == ("5", "9", "2", "10")
    assert split.removed == {"3": "3", "11": "3"}


def test_development_split_needs_both_splits(collection: Collection) -> None:
    with pytest.raises(InvalidParameterError, match="no split 'dev'"):
        development_split(collection, train="dev")
    with pytest.raises(InvalidParameterError, match="no split"):
        development_split(make_collection(splits={}))


# ---------------------------------------------------------------------------- learned fusion


def test_fusion_grid_sizes_and_order() -> None:
    one, two, three = fusion_grid(1), fusion_grid(2), fusion_grid(3)
    # 5 RRF constants x (1 plain + 8^(s-1) weighted if s > 1) + 2 norms x (1 plain + 8^(s-1)).
    assert (len(one), len(two), len(three)) == (7, 63, 455)
    assert [repr(f) for f in one] == [
        "RRF(k=10)",
        "RRF(k=20)",
        "RRF(k=40)",
        "RRF(k=60)",
        "RRF(k=100)",
        "ScoreFusion(weights=None, norm='minmax')",
        "ScoreFusion(weights=None, norm='zscore')",
    ]
    assert repr(two[0]) == "RRF(k=10)"
    assert repr(two[1]) == "WeightedRRF(weights=[1.0, 0.1], k=10)"
    assert repr(two[9]) == "RRF(k=20)"
    assert repr(two[45]) == "ScoreFusion(weights=None, norm='minmax')"
    assert repr(two[46]) == "ScoreFusion(weights=[1.0, 0.1], norm='minmax')"
    assert repr(three[2]) == "WeightedRRF(weights=[1.0, 0.1, 0.2], k=10)"
    for candidate in three:
        weights = getattr(candidate, "weights", None)
        assert weights is None or (len(weights) == 3 and weights[0] == 1.0)
    assert len({repr(f) for f in three}) == len(three)
    with pytest.raises(InvalidParameterError):
        fusion_grid(0)


@pytest.fixture(scope="module")
def dev_and_test(collection: Collection) -> DevAndTest:
    test = build_testbed(collection, split="test")
    return test.with_split("train", development_split(collection).qids), test


def test_learn_fusion_reads_only_development_queries(dev_and_test: DevAndTest) -> None:
    dev, test = dev_and_test
    assert tuple(dev.queries) == ("5", "9", "2", "10")
    text, recency = RecordingScorer(BM25Scorer()), RecordingScorer(RecencyScorer(half_life=7200.0))
    learned = learn_fusion(dev, Arm("learn", (text, recency), RRF(), depth=30), k=30)
    dev_texts = {QUERIES[qid] for qid in dev.queries}
    test_texts = {QUERIES[qid] for qid in test.queries}
    assert set(text.texts) == set(recency.texts) == dev_texts
    assert not test_texts & set(text.texts)
    assert len(learned.tried) == 63
    assert learned.dev_queries == 4
    # The choice is the first candidate of highest development mean.
    means = [mean for _, mean in learned.tried]
    assert learned.dev_mean == max(means)
    assert learned.tried[means.index(max(means))][0] == repr(learned.fuser)
    assert learned.record()["chosen"] == repr(learned.fuser)
    assert len(learned.record()["tried"]) == 63


def test_learn_fusion_means_are_run_arm_means(dev_and_test: DevAndTest) -> None:
    dev, _ = dev_and_test
    arm = Arm("learn", (BM25Scorer(), RecencyScorer(half_life=7200.0)), RRF(), depth=30)
    candidates: list[Fuser] = [ScoreFusion([0.0, 1.0]), RRF(k=60), ScoreFusion([1.0, 0.0])]
    learned = learn_fusion(dev, arm, candidates=candidates, measure="AP", k=30)
    expected = []
    for fuser in candidates:
        direct = run_arm(StreamCache(dev.snapshot), arm, dev.queries, 30, fuser=fuser)
        expected.append((repr(fuser), evaluate(dev.qrels, direct.run, "AP").mean("AP")))
    assert list(learned.tried) == expected
    means = [mean for _, mean in expected]
    assert means[0] < max(means)  # recency alone is not the best here: the choice is not just the first
    assert learned.fuser is candidates[means.index(max(means))]
    assert learned.measure == "AP"


def test_learn_fusion_picks_the_earlier_of_two_exactly_tied_candidates(
    dev_and_test: DevAndTest,
) -> None:
    dev, _ = dev_and_test
    arm = Arm("learn", (BM25Scorer(), RecencyScorer(half_life=7200.0)), RRF(), depth=30)
    # Equal weights: WeightedRRF([1, 1]) is RRF, score for score. A worse candidate goes first.
    worse: Fuser = ScoreFusion([0.0, 1.0])
    plain, weighted = RRF(k=60), WeightedRRF([1.0, 1.0], k=60)
    first = learn_fusion(dev, arm, candidates=[worse, plain, weighted], k=30)
    assert first.tried[1][1] == first.tried[2][1] > first.tried[0][1]
    assert first.fuser is plain
    second = learn_fusion(dev, arm, candidates=[worse, weighted, plain], k=30)
    assert second.fuser is weighted


def test_learn_fusion_needs_a_candidate(dev_and_test: DevAndTest) -> None:
    dev, _ = dev_and_test
    with pytest.raises(InvalidParameterError, match="at least one candidate"):
        learn_fusion(dev, Arm("a", (BM25Scorer(),), RRF()), candidates=[])


def test_the_learned_fuser_runs_on_test_queries(dev_and_test: DevAndTest) -> None:
    dev, test = dev_and_test
    scorers = (BM25Scorer(), RecencyScorer(half_life=7200.0))
    learned = learn_fusion(dev, Arm("learn", scorers, RRF(), depth=30), k=30)
    arms = [Arm("base", scorers, RRF(), depth=30), Arm("learned", scorers, learned.fuser, depth=30)]
    result = compare(test, arms, k=30, resamples=200, extra={"learned": learned.record()})
    assert result.arms["learned"].evaluation.qids == tuple(sorted(TEST))
    assert result.arms["learned"].run.description["fuser"]["repr"] == repr(learned.fuser)
    direct = run_arm(StreamCache(test.snapshot), arms[0], test.queries, 30, fuser=learned.fuser)
    assert result.mean("learned", "nDCG@10") == evaluate(test.qrels, direct.run, "nDCG@10").mean("nDCG@10")
    assert result.record()["extra"]["learned"]["chosen"] == repr(learned.fuser)


# ---------------------------------------------------------------------------- CACM (shared data)


@pytest.mark.reference
@pytest.mark.data
def test_cacm_end_to_end() -> None:
    if not (DATA / "cacm" / "cacm.all").is_file():
        pytest.skip(f"the shared CACM copy is absent ({DATA / 'cacm'})")
    collection = load_collection("cacm", DATA)
    testbed = build_testbed(collection)
    bm25 = BM25Scorer()
    arms = [
        Arm("text", (bm25,), ScoreFusion()),
        Arm("text+graph", (bm25, GraphScorer(seed_scorer=bm25)), RRF()),
    ]
    result = compare(testbed, arms, resamples=1000)
    judged = collection.judged_query_ids()
    assert tuple(testbed.queries) == judged
    for arm_result in result.arms.values():
        assert arm_result.evaluation.qids == tuple(sorted(judged))
        assert all(0.0 < mean < 1.0 for mean in arm_result.evaluation.means.values())
        assert_agrees_with_pytrec(arm_result.run, testbed.qrels, result)
    assert result.record()["testbed"]["publishable"] is True


def test_a_users_own_beir_folder_runs_end_to_end(tmp_path: Path) -> None:
    """A collection nobody pinned: loads without any_snapshot, evaluates, is unpinned (not unpublishable)."""
    from weftsearch.eval.datasets import load_beir
    from weftsearch.scorers import BM25Scorer

    corpus = [
        ("d1", "Gene X", "gene x causes disease y in mice"),
        ("d2", "Weather", "rain and wind over the sea"),
        ("d3", "Gene Z", "gene z has no known effect on disease"),
        ("d4", "", "sea birds follow fishing boats"),
    ]
    lines = [
        json.dumps({"_id": key, "title": title, "text": text})
        if title
        else json.dumps({"_id": key, "text": text})
        for key, title, text in corpus
    ]
    (tmp_path / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    queries = [("q1", "what causes disease y"), ("q2", "birds at sea")]
    (tmp_path / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries), encoding="utf-8"
    )
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td4\t1\n")
    collection = load_beir(tmp_path, name="mine")
    testbed = build_testbed(collection)
    assert testbed.publishable is True and testbed.provenance == "unpinned"
    assert testbed.record()["provenance"] == "unpinned"
    arms = [
        Arm("text", (BM25Scorer(),), RRF(), depth=10),
        Arm("text-k1", (BM25Scorer(k1=0.5),), RRF(), depth=10),
    ]
    result = compare(testbed, arms, k=10, resamples=200)
    ndcg = result.arms["text"].evaluation.mean("nDCG@10")
    assert ndcg == pytest.approx(1.0)  # both relevant documents ranked first by BM25
    assert set(result.arms) == {"text", "text-k1"}


def test_code_version_records_scipy_and_the_cpu_features_numpy_dispatches_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A number that moved between two x86-64 machines (numpy's per-CPU log1p) could not be traced
    # from report.json, which recorded numpy's version but neither scipy's nor the CPU.
    import platform

    import scipy

    record = harness.code_version()
    assert record["numpy"] == np.__version__
    assert record["scipy"] == scipy.__version__
    simd = np.show_config(mode="dicts")["SIMD Extensions"]
    features = [*simd["baseline"], *simd["found"]]
    assert record["cpu"] == f"{platform.machine()}: {' '.join(features)}"
    monkeypatch.setattr(np, "show_config", lambda mode="stdout": None)  # a numpy without the record
    assert harness.code_version()["cpu"] == f"{platform.machine()}: unknown"


# ---------------------------------------------------------------------------- two orderings of ties


class EveryDocumentScorer:
    """Returns every document: all with one score (``tied``) or with distinct scores, best first by key."""

    def __init__(self, tied: bool) -> None:
        self.tied = tied

    @property
    def name(self) -> str:
        return "tied" if self.tied else "distinct"

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        keys = sorted(KEYS)[:k]
        scores = [1.0] * len(keys) if self.tied else [float(len(keys) - i) for i in range(len(keys))]
        return Stream(snapshot.ids_of(keys), scores)


@pytest.fixture(scope="module")
def tie_comparison(testbed: harness.Testbed) -> Comparison:
    arms = [
        Arm("distinct", (EveryDocumentScorer(tied=False),), RRF(), depth=30),
        Arm("tied", (EveryDocumentScorer(tied=True),), RRF(), depth=30),
    ]
    return compare(testbed, arms, k=10, resamples=200)


@pytest.mark.reference
def test_tied_scores_report_trec_evals_number_and_the_served_orders_labelled(
    testbed: harness.Testbed, tie_comparison: Comparison
) -> None:
    # All 30 documents tie: the engine serves D1, D10, D11, ... (key ascending), trec_eval re-sorts
    # the same ten as D18, D17, ..., D1 (id descending). Both numbers must be reported, each labelled.
    tied = tie_comparison.arms["tied"]
    assert tied.run.keys["7"] == ("D1", "D10", "D11", "D12", "D13", "D14", "D15", "D16", "D17", "D18")
    trec_rule = evaluate(testbed.qrels, tied.run.run, MEASURES)
    served = evaluate(testbed.qrels, run_from_rankings(dict(tied.run.keys)), MEASURES)
    assert tied.evaluation.means == trec_rule.means
    assert tied.served is not None and tied.served.means == served.means
    assert served.mean("nDCG@10") != trec_rule.mean("nDCG@10")
    assert "nDCG@10" in tied.served_differs(MEASURES)
    assert_agrees_with_pytrec(tied.run, testbed.qrels, tie_comparison)  # the headline stays trec_eval's

    table = reports.format_table(tie_comparison)
    served_row = next(line for line in table.splitlines() if "tied: served order" in line)
    assert f"{served.mean('nDCG@10'):.4f}" in served_row
    tied_row = next(line for line in table.splitlines() if line.startswith("tied "))
    assert f"{trec_rule.mean('nDCG@10'):.4f}" in tied_row
    assert "Means: trec_eval's tie rule" in table and "'served order' rows" in table

    markdown = reports.markdown_report(tie_comparison)
    assert f"| tied: served order | {served.mean('nDCG@10'):.4f} |" in markdown
    assert f"| tied | {trec_rule.mean('nDCG@10'):.4f} |" in markdown

    record = reports.report_record(tie_comparison)
    entry = next(arm for arm in record["arms"] if arm["arm"]["name"] == "tied")
    assert entry["means"]["nDCG@10"] == trec_rule.mean("nDCG@10")
    assert entry["served_means"]["nDCG@10"] == served.mean("nDCG@10")
    assert "nDCG@10" in entry["served_differs"]
    assert set(record["orderings"]) == {"means", "served_means"}
    assert "trec_eval" in record["orderings"]["means"] and "served" in record["orderings"]["served_means"]
    assert set(record["per_query_served"]) == {"tied"}
    assert record["per_query_served"]["tied"]["nDCG@10"] == served.per_query("nDCG@10")


def test_without_ties_one_number_is_printed(tie_comparison: Comparison) -> None:
    # Distinct scores: both orders are one ranking, so the reports print one number per measure
    # (report.json still holds both, equal).
    distinct = tie_comparison.arms["distinct"]
    assert distinct.served is not None and distinct.served.means == distinct.evaluation.means
    assert distinct.served_differs(MEASURES) == ()
    only = replace(tie_comparison, arms={"distinct": distinct})
    table = reports.format_table(only)
    assert "served order" not in table.replace("The served order", "")
    assert "The served order (ties by key ascending) gives the same means for every arm." in table
    assert "| distinct: served order |" not in reports.markdown_report(only)
    record = reports.report_record(only)
    assert record["arms"][0]["served_means"] == record["arms"][0]["means"]
    assert record["arms"][0]["served_differs"] == [] and record["per_query_served"] == {}


# ---------------------------------------------------------------------- an embedder instead of stored vectors


def test_a_testbed_with_an_embedder_embeds_documents_and_queries(collection: Collection) -> None:
    from tests.fake_embedder import DIM, NAME, FakeEmbedder

    bed = build_testbed(collection, embedder=NAME)
    fake = FakeEmbedder()
    for qid, query in bed.queries.items():
        assert query.vector is not None, qid
        np.testing.assert_array_equal(query.vector, fake.embed([collection.queries[qid]])[0])
    assert bed.index.vector_dim == DIM
    assert all(d.vector is not None for d in (bed.index.get(key) for key in collection.document_keys[:5]))
    assert bed.record()["embedder"]["name"] == NAME
    run = run_arm(StreamCache(bed.snapshot), Arm("vec", (VectorScorer(),), RRF()), bed.queries, 5)
    assert all(len(keys) == 5 for keys in run.keys.values())  # every query had a vector: no empty stream
    assert bed.with_split("test").queries["7"].vector is not None
    with pytest.raises(InvalidParameterError, match="not both"):
        build_testbed(collection, embedder=NAME, vectors=make_vectors(collection))
