"""The evaluation harness: index a judged collection, run arms, compare them honestly.

Data flow::

    Collection (+ CollectionVectors)          verified against pins (datasets.py)
        -> build_testbed      index the documents, build the queries, check the pairing
        -> compare(arms)      run every arm (runs.py), evaluate (metrics.py),
                              paired bootstrap + randomisation against a baseline (stats.py)
        -> Comparison         numbers + the record of exactly what produced them
        -> reports.py         Markdown, JSON, TREC runs, PNG plots

Also here: :func:`sweep` (one arm family over a parameter grid),
:func:`learn_fusion` (pick a fuser on development queries, then freeze it) and
:func:`development_split` (train queries minus those that duplicate a test
query).

The harness never learns what a scorer is. It calls arms built elsewhere
(:mod:`weftsearch.ranking.specs` turns names into scorers for the command line);
fusers it may build itself, for learned fusion, because fusion is generic.

**Refused pairings.** :func:`build_testbed` raises
:class:`~weftsearch.errors.PairingError` rather than produce a number it cannot
vouch for: a judged document that is not in the index, vectors of another
collection or model than the one expected, or vector rows whose ids do not
match the documents and queries. (Whether the vectors were made from these
very texts is checked when they are loaded, by hash:
:func:`~weftsearch.eval.datasets.load_frozen_vectors`, which refuses query
vectors of other texts with a ``PairingError`` even under ``any_snapshot``.)
"""

from __future__ import annotations

import hashlib
import math
import platform
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import metadata
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np

from weftsearch.documents import Document
from weftsearch.embedders import EMBED_BATCH_SIZE, Embedder, embedder_record, run_embedder
from weftsearch.engine.index import Index
from weftsearch.engine.protocols import Fuser
from weftsearch.engine.query import Query
from weftsearch.engine.snapshot import Snapshot
from weftsearch.errors import InvalidParameterError, PairingError, QuerySyntaxError
from weftsearch.eval.collection import DEV_SPLIT, DUPLICATE_RULE, DerivedSplit, derive_split
from weftsearch.eval.datasets import Collection, CollectionVectors, Judgements, Provenance
from weftsearch.eval.metrics import Evaluation, Measure, evaluate, parse_measure
from weftsearch.eval.runs import ArmRun, StreamCache, run_arm
from weftsearch.eval.stats import BootstrapResult, RandomisationResult, fisher_randomisation, paired_bootstrap
from weftsearch.fusion import RRF, ScoreFusion, WeightedRRF
from weftsearch.ranking.arm import Arm
from weftsearch.schema import Schema, TextField

__all__ = [
    "DEFAULT_MEASURES",
    "Testbed",
    "build_testbed",
    "fielded_schema",
    "title_body_documents",
    "BODY_FIELD",
    "content_hash",
    "code_version",
    "ArmResult",
    "arm_result",
    "ORDERINGS",
    "Comparison",
    "compare",
    "SweepPoint",
    "Sweep",
    "sweep",
    "DevelopmentSplit",
    "development_split",
    "LearnedFusion",
    "learn_fusion",
    "fusion_grid",
]

#: Measures every comparison reports unless told otherwise; the first is the headline.
DEFAULT_MEASURES: tuple[str, ...] = ("nDCG@10", "R@100", "AP", "RR", "P@10")

_REPO = Path(__file__).resolve().parents[3]


def _installed(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def _cpu_features() -> str:
    """The machine and the SIMD features numpy dispatches to, e.g. ``"x86_64: X86_V2 X86_V3 X86_V4"``.

    numpy picks a kernel per CPU for some functions, and those kernels may
    differ in the last bit, so a report records which ones ran (what numpy
    found, after any ``NPY_DISABLE_CPU_FEATURES``).
    """
    try:
        simd = np.show_config(mode="dicts")["SIMD Extensions"]
        features = [*simd.get("baseline", []), *simd.get("found", [])]
    except (AttributeError, KeyError, TypeError):  # a numpy without the record
        features = ["unknown"]
    return f"{platform.machine() or 'unknown'}: {' '.join(features) or 'none'}"


def code_version() -> dict[str, str]:
    """The versions that decide the numbers, and, from a git checkout, the commit and whether it is dirty.

    Recorded: weft-search, Python, numpy, scipy (sparse products of the graph
    scorers) and the CPU features numpy dispatches to.
    """
    out = {
        "weftsearch": _installed("weft-search"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": _installed("scipy"),
        "cpu": _cpu_features(),
    }
    if (_REPO / ".git").exists():
        try:
            commit = subprocess.run(
                ["git", "-C", str(_REPO), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
            )
            status = subprocess.run(
                ["git", "-C", str(_REPO), "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
                timeout=10,
            )
        except (OSError, subprocess.SubprocessError):
            return out
        if commit.returncode == 0:
            out["git_commit"] = commit.stdout.strip()
            out["git_dirty"] = "yes" if status.stdout.strip() else "no"
    return out


def content_hash(documents: Iterable[Document], analyzer: str) -> str:
    """SHA-256 over what the index holds: every document's key, text, vector, links and time.

    Documents are taken in key order, so the hash does not depend on the order
    they were added in; the analyzer's name is included because it decides
    the postings. O(total size of the documents).
    """
    digest = hashlib.sha256()

    def field(data: bytes) -> None:
        # Length-prefixed, so no choice of texts or keys can make two indexes hash alike.
        digest.update(len(data).to_bytes(8, "little") + data)

    field(b"weft-content-v2")
    field(analyzer.encode("utf-8"))
    for document in sorted(documents, key=lambda d: d.key):
        field(document.key.encode("utf-8"))
        field(document.text.encode("utf-8"))
        field(
            b"" if document.vector is None else b"v" + np.ascontiguousarray(document.vector, "<f4").tobytes()
        )
        links = sorted(set(document.links))  # the index treats links as a set
        field(len(links).to_bytes(8, "little"))
        for link in links:
            field(link.encode("utf-8"))
        field(repr(document.timestamp).encode())
        if document.text_fields:
            # Only documents with named text fields add to the hash, so every hash published
            # before them holds; a key never holds NUL, so this marker is never a next key.
            field(b"\x00text_fields")
            field(len(document.text_fields).to_bytes(8, "little"))
            for name in sorted(document.text_fields):
                field(name.encode("utf-8"))
                field(document.text_fields[name].encode("utf-8"))
    return digest.hexdigest()


@dataclass(frozen=True, eq=False)
class Testbed:
    """A collection indexed and ready to run arms on.

    Attributes:
        collection: what was loaded.
        split: the judgements used (``None``: the collection's default qrels).
        qrels: those judgements.
        queries: the judged queries (at least one relevant document), in file
            order, with vectors when the testbed has vectors.
        index: the in-memory index of every document.
        snapshot: the snapshot every arm runs against.
        vectors: the vectors attached to documents and queries, or ``None``.
        analyzer: the analyzer's name.
        link_set: the link set the documents' links come from (``None``: as loaded).
        content_hash: :func:`content_hash` of the indexed documents.
        query_syntax: how query texts are read: ``"plain"`` (bag of words) or
            ``"lucene"`` (each parsed with :meth:`Query.parse <weftsearch.Query.parse>`).

    """

    collection: Collection
    split: str | None
    qrels: Judgements
    queries: dict[str, Query]
    index: Index
    snapshot: Snapshot
    vectors: CollectionVectors | None
    analyzer: str
    link_set: str | None
    content_hash: str
    query_syntax: str = "plain"

    @property
    def provenance(self) -> Provenance:
        """Where the inputs stand against the pins, collection and vectors together.

        ``"mismatched"`` when any input differs from its pin (unpublishable),
        else ``"unpinned"`` when any input has no public pin (your own data:
        the report records the files' SHA-256 instead), else ``"pinned"``.
        """
        kinds = {self.collection.provenance}
        if not self.collection.publishable:
            kinds.add("mismatched")
        if self.vectors is not None:
            kinds.add(self.vectors.provenance)
        for kind in ("mismatched", "unpinned"):
            if kind in kinds:
                return kind
        return "pinned"

    @property
    def split_derivation(self) -> DerivedSplit | None:
        """How this testbed's split was derived (SciFact's ``dev``), or ``None`` for a file's own split.

        Its :meth:`~weftsearch.eval.collection.DerivedSplit.record` is what
        reports (``testbed["split_derivation"]``) and saved profiles record:
        the split's name, its source, what it was deduplicated against, and
        every removed query id with its twin.
        """
        return self.collection.derivation(self.split)

    @property
    def publishable(self) -> bool:
        """Whether no input contradicts its pin (numbers may be published; see :attr:`provenance`)."""
        return self.provenance != "mismatched"

    def with_split(self, split: str | None, qids: Sequence[str] | None = None) -> Testbed:
        """The same index with another split's judgements (and optionally only ``qids``)."""
        qrels = self.collection.judgements(split)
        wanted = self.collection.judged_query_ids(split) if qids is None else tuple(qids)
        missing = [qid for qid in wanted if qid not in qrels]
        if missing:
            raise InvalidParameterError(f"queries without judgements in split {split!r}: {missing[:5]}")
        queries = self._embedded({qid: self._query(qid) for qid in wanted})
        # Only the chosen queries' judgements: a judged query left out on
        # purpose (a development split's duplicates) is not "missing".
        return replace(self, split=split, qrels={qid: qrels[qid] for qid in wanted}, queries=queries)

    def _embedded(self, queries: dict[str, Query]) -> dict[str, Query]:
        """``queries``, each without a vector given its text's by the index's embedder (when it has one)."""
        embedder = self.index.embedder
        todo = [qid for qid, query in queries.items() if query.vector is None and query.text.strip()]
        if embedder is None or not todo:
            return queries
        out = dict(queries)
        for start in range(0, len(todo), EMBED_BATCH_SIZE):
            chunk = todo[start : start + EMBED_BATCH_SIZE]
            what = f"{len(chunk)} query texts of {self.collection.name} (from query {chunk[0]!r})"
            rows = run_embedder(embedder, [queries[qid].text for qid in chunk], what)
            for qid, row in zip(chunk, rows, strict=True):
                out[qid] = replace(queries[qid], vector=row)
        return out

    def _query(self, qid: str) -> Query:
        text = self.collection.queries[qid]
        vector = None
        if self.vectors is not None and self.vectors.has_query_vector(qid):
            vector = self.vectors.query_vector(qid)
        if self.query_syntax != "lucene":
            return Query(text=text, vector=vector)
        try:
            return Query.parse(text, vector=vector)
        except QuerySyntaxError as exc:
            # Which query of which file: a collection's queries are not written in the syntax.
            raise QuerySyntaxError(
                f"query {qid!r} of {self.collection.name} does not parse as the query language "
                f"(query_syntax='lucene'): {exc.reason}",
                exc.position,
                exc.query,
            ) from None

    def record(self) -> dict[str, Any]:
        """What produced this testbed, for reports: files and hashes, content hash, choices."""
        out: dict[str, Any] = {
            "collection": self.collection.name,
            "split": self.split,
            "queries": len(self.queries),
            "documents": len(self.collection.documents),
            "files": self.collection.manifest_dicts(),
            "loader_parameters": dict(self.collection.parameters),
            "analyzer": self.analyzer,
            "link_set": self.link_set,
            "index_content_sha256": self.content_hash,
            "publishable": self.publishable,
            "provenance": self.provenance,
        }
        if self.query_syntax != "plain":
            out["query_syntax"] = self.query_syntax  # only when parsed: older records keep their bytes
        if self.index.schema.named_fields:
            # Only a fielded testbed says so: every record published before fields reads as it did.
            out["text_fields"] = list(self.index.schema.names)
        if self.index.embedder is not None:
            out["embedder"] = embedder_record(self.index.embedder)
        if self.vectors is not None:
            out["vectors"] = {
                "variant": self.vectors.variant,
                "model": self.vectors.model,
                "dims": self.vectors.dims,
                "files": [record.as_dict() for record in self.vectors.manifest],
                "documents_with_vector": len(self.vectors.document_keys),
                "queries_with_vector": len(self.vectors.query_ids),
            }
        derivation = self.split_derivation
        if derivation is not None:
            out["split_derivation"] = derivation.record()
        return out


def _check_vectors(collection: Collection, vectors: CollectionVectors, model: str | None) -> None:
    if vectors.collection != collection.name:
        raise PairingError(
            f"vectors are of collection {vectors.collection!r}, the testbed is {collection.name!r}"
        )
    if model is not None and vectors.model != model:
        raise PairingError(f"vectors were made by model {vectors.model!r}, expected {model!r}")
    for what, rows, keys in (
        ("documents", vectors.document_keys, collection.document_keys),
        ("queries", vectors.query_ids, collection.query_ids),
    ):
        which = "vector rows" if what == "documents" else "query vector rows"
        if vectors.partial:
            # A partial set names some of them, in the collection's order.
            known = {key: position for position, key in enumerate(keys)}
            positions = [known.get(key, -1) for key in rows]
            if -1 in positions or positions != sorted(positions) or len(set(positions)) != len(positions):
                raise PairingError(
                    f"{collection.name}: the {which} do not name some of the collection's {what} in order"
                )
        elif tuple(rows) != tuple(keys):
            raise PairingError(f"{collection.name}: the {which} do not name the collection's {what} in order")


#: The named text field :func:`title_body_documents` puts a document's text (its abstract) in.
BODY_FIELD = "body"


def title_body_documents(documents: Iterable[Document]) -> list[Document]:
    """Documents of a ``fields=True`` collection with the joined text back as their default field.

    Each document's ``text`` (BEIR's ``text``, SMART's ``.W``) moves to the
    text field ``body`` (absent when empty) beside its ``title``, and
    ``text`` becomes ``title + " " + text`` again: exactly the text of the
    collection loaded without ``fields``. So one index serves both sides of a
    comparison: ``bm25`` scores the joined text to the bit as every published
    number does (same postings, N and average length), and
    ``bm25f(title=W, body=1)`` the two fields (its IDF counts documents
    holding the term in either, which are those holding it in the joined
    text). What ``weft-search eval --fields`` indexes. O(total text).
    """
    out: list[Document] = []
    for document in documents:
        title = document.text_fields.get("title", "")
        named = {name: value for name, value in document.text_fields.items()}
        if document.text:
            named[BODY_FIELD] = document.text
        joined = " ".join(part for part in (title, document.text) if part)
        out.append(replace(document, text=joined, text_fields=named))
    return out


def fielded_schema(
    documents: Iterable[Document], analyzer: str = "english", positions: bool = False
) -> Schema | None:
    """The schema :func:`build_testbed` indexes ``documents`` with when given none.

    ``None`` (the index's default: the field ``text`` alone) when no document
    has a named text field, else ``text`` and every named field the documents
    use (in name order), all analysed by ``analyzer`` and kept without
    positions, as the default field is: BM25F needs one analysis for every
    field it scores, and plain queries need no positions. With ``positions``
    (parsed queries, which may hold phrases) every field keeps them, the
    default field alone included. O(documents).
    """
    names = sorted({name for document in documents for name in document.text_fields})
    if not names and not positions:
        return None
    return Schema(tuple(TextField(name, analyzer=analyzer, positions=positions) for name in ("text", *names)))


def build_testbed(
    collection: Collection,
    *,
    split: str | None = None,
    vectors: CollectionVectors | None = None,
    model: str | None = None,
    analyzer: str = "english",
    link_set: str | None = None,
    progress: bool | None = False,
    embedder: Embedder | str | None = None,
    schema: Schema | None = None,
    query_syntax: str = "plain",
) -> Testbed:
    """Index ``collection`` and prepare its judged queries.

    Args:
        collection: a loaded collection.
        split: which judgements to use (``None``: :attr:`Collection.qrels`).
        vectors: attach these vectors to documents and queries (``None``: the
            collection's own, :attr:`Collection.vectors`, when it has them).
        model: the model the vectors must come from (``None``: not checked).
        analyzer: the text analyzer's registered name.
        link_set: replace every document's links by its neighbours in
            ``collection.link_sets[link_set]`` (``None``: links as loaded).
        progress: a progress bar while indexing (``None``: on a terminal).
        embedder: embed documents and query texts with this
            :class:`~weftsearch.Embedder` (or registered name) instead of
            attaching stored vectors: the testbed's index is made with it, so
            every document and judged query gets the vector of its text, and
            :meth:`Testbed.record` names it (``"embedder"``). Refused with
            ``vectors``; a collection's own vectors are then not attached.
        schema: the index's text fields. ``None``: :func:`fielded_schema`,
            the default field alone unless documents carry named text fields
            (a collection loaded with ``fields=True``), each then a field
            analysed by ``analyzer``.
        query_syntax: ``"plain"`` (default): query texts are bags of words;
            ``"lucene"``: each is parsed as the query language (phrases,
            ``+must -not``, ``field:term``, boosts), so a query file can hold
            boolean and fielded queries.

    Raises:
        PairingError: the vectors belong to another collection or model, or a
            judged document is not in the index.
        InvalidParameterError: an unknown split or link set, both
            ``vectors`` and ``embedder``, or an unknown ``query_syntax``.
        QuerySyntaxError: with ``"lucene"``, a query that does not parse (its id named).
        EmbeddingError: the embedder failed on a batch.

    """
    if query_syntax not in ("plain", "lucene"):
        raise InvalidParameterError(f"query_syntax must be 'plain' or 'lucene', got {query_syntax!r}")
    documents = list(collection.documents)
    if embedder is not None and vectors is not None:
        raise InvalidParameterError("give vectors (stored ones) or embedder (to embed the texts), not both")
    if vectors is None and embedder is None:
        vectors = collection.vectors
    if link_set is not None:
        if link_set not in collection.link_sets:
            known = ", ".join(sorted(collection.link_sets)) or "none"
            raise InvalidParameterError(f"{collection.name} has no link set {link_set!r} (known: {known})")
        table = collection.link_sets[link_set]
        documents = [replace(d, links=tuple(sorted(table.get(d.key, {})))) for d in documents]
    if vectors is not None:
        _check_vectors(collection, vectors, model)
        documents = vectors.attach(documents)
    qrels = collection.judgements(split)
    keys = set(collection.document_keys)
    absent = sorted({doc for judged in qrels.values() for doc in judged if doc not in keys})
    if absent:
        raise PairingError(
            f"{collection.name}: {len(absent)} judged documents are not in the index (first: {absent[:5]})"
        )
    if schema is None:
        schema = fielded_schema(documents, analyzer, positions=query_syntax == "lucene")
    index = Index(
        analyzer, vector_dim=None if vectors is None else vectors.dims, embedder=embedder, schema=schema
    )
    index.add_many(documents, progress=progress)
    snapshot = index.snapshot()
    testbed = Testbed(
        collection=collection,
        split=split,
        qrels=qrels,
        queries={},
        index=index,
        snapshot=snapshot,
        vectors=vectors,
        analyzer=index.analyzer.name,
        link_set=link_set,
        content_hash=content_hash(documents, index.analyzer.name),
        query_syntax=query_syntax,
    )
    return testbed.with_split(split)


# ---------------------------------------------------------------------- comparing arms


#: What each kind of mean in a report is, for the reports and ``report.json`` (``"orderings"``).
ORDERINGS: Mapping[str, str] = {
    "means": (
        "trec_eval's tie rule: scores rounded to float32, descending, ties by document id descending "
        "(what trec_eval, pytrec_eval and published numbers use)"
    ),
    "served_means": (
        "the served order: the ranking Index.search and the server return, fused score descending, "
        "ties by key ascending (what users get)"
    ),
}


@dataclass(frozen=True, eq=False)
class ArmResult:
    """One arm's run and its evaluations.

    Attributes:
        run: the arm's rankings.
        evaluation: the run evaluated with trec_eval's semantics, ties
            re-broken by document id descending (comparable with trec_eval,
            pytrec_eval and published numbers); every interval and p-value
            is computed from it.
        served: the run evaluated in the order the engine serves it (ties by
            key ascending, :attr:`ArmRun.served_run`): what users get. It
            differs from ``evaluation`` only where fused scores tie.
            :func:`compare` and cross-validation always fill it; ``None``
            (a hand-built result) means it was not evaluated.

    """

    run: ArmRun
    evaluation: Evaluation
    served: Evaluation | None = None

    def served_mean(self, measure: str | Measure) -> float | None:
        """The served order's mean of ``measure`` (``None`` when :attr:`served` was not evaluated)."""
        return None if self.served is None else self.served.mean(measure)

    def served_differs(self, measures: Iterable[str | Measure]) -> tuple[str, ...]:
        """The measures of ``measures`` whose served-order mean differs from the trec_eval-rule mean.

        Empty when there are no ties that change a mean (or :attr:`served` is
        ``None``): then the two orders give one number, and reports print one.
        """
        if self.served is None:
            return ()
        served = self.served
        return tuple(
            str(parse_measure(m))
            for m in measures
            if served.mean(m) != self.evaluation.mean(m)
            and not (math.isnan(served.mean(m)) and math.isnan(self.evaluation.mean(m)))
        )


@dataclass(frozen=True, eq=False)
class Comparison:
    """Arms evaluated on one testbed, each against a baseline arm.

    Attributes:
        testbed: :meth:`Testbed.record` of the testbed.
        measures: canonical measure names; the first is the headline.
        baseline: the baseline arm's name.
        arms: arm name -> result, in the order the arms were given.
        bootstrap: (arm, measure) -> paired bootstrap of arm minus baseline,
            for every arm but the baseline.
        randomisation: (arm, measure) -> Fisher randomisation test, same pairs.
        k: hits per query.
        resamples: bootstrap resamples (and randomisation permutations).
        seed: the seed of both tests.
        code: :func:`code_version` at the time of the run.

    """

    testbed: Mapping[str, Any]
    measures: tuple[str, ...]
    baseline: str
    arms: Mapping[str, ArmResult]
    bootstrap: Mapping[tuple[str, str], BootstrapResult]
    randomisation: Mapping[tuple[str, str], RandomisationResult]
    k: int
    resamples: int
    seed: int
    code: Mapping[str, str] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def mean(self, arm: str, measure: str | Measure) -> float:
        """The mean of ``measure`` for ``arm``."""
        return self.arms[arm].evaluation.mean(measure)

    def record(self) -> dict[str, Any]:
        """Everything needed to reprint and to audit the numbers, JSON-ready."""
        arms = []
        for name, result in self.arms.items():
            entry: dict[str, Any] = {
                "arm": result.run.description,
                "means": result.evaluation.means,
                # Both kinds always (equal where no tie changes a mean); "orderings" says which is which.
                "served_means": None if result.served is None else result.served.means,
                "served_differs": list(result.served_differs(self.measures)),
                "tie_break_slots": result.run.tied_total(),
                "queries_with_ties": sum(1 for v in result.run.tied.values() if v),
                "coverage": [item.record() for item in result.run.coverage],
            }
            if name != self.baseline:
                entry["against_baseline"] = {
                    m: {
                        "mean_difference": self.bootstrap[name, m].mean_difference,
                        "low": self.bootstrap[name, m].low,
                        "high": self.bootstrap[name, m].high,
                        "bootstrap_p": self.bootstrap[name, m].p_value,
                        "randomisation_p": self.randomisation[name, m].p_value,
                    }
                    for m in self.measures
                }
            arms.append(entry)
        return {
            "testbed": dict(self.testbed),
            "measures": list(self.measures),
            "orderings": dict(ORDERINGS),
            "baseline": self.baseline,
            "k": self.k,
            "bootstrap": {
                "resamples": self.resamples,
                "seed": self.seed,
                "confidence": 0.95,
                "generator": "numpy PCG64",
                "percentiles": "nearest rank",
            },
            "code": dict(self.code),
            "arms": arms,
            **({"extra": dict(self.extra)} if self.extra else {}),
        }


def _evaluate_run(run: ArmRun, qrels: Judgements, measures: Sequence[str]) -> Evaluation:
    evaluation = evaluate(qrels, run.run, measures)
    if evaluation.missing:
        raise PairingError(f"arm {run.arm!r}: judged queries missing from the run: {evaluation.missing[:5]}")
    return evaluation


def arm_result(run: ArmRun, qrels: Judgements, measures: Sequence[str | Measure]) -> ArmResult:
    """``run`` evaluated both ways: trec_eval's tie rule and the served order (see :class:`ArmResult`).

    Raises:
        PairingError: a judged query is missing from the run.

    """
    wanted = [str(parse_measure(m)) for m in measures]
    return ArmResult(run, _evaluate_run(run, qrels, wanted), evaluate(qrels, run.served_run, wanted))


def compare(
    testbed: Testbed,
    arms: Sequence[Arm],
    *,
    k: int = 100,
    measures: Sequence[str | Measure] = DEFAULT_MEASURES,
    baseline: str | None = None,
    resamples: int = 10_000,
    seed: int = 0,
    cache: StreamCache | None = None,
    progress: bool | None = False,
    extra: Mapping[str, Any] | None = None,
) -> Comparison:
    """Run ``arms`` on ``testbed`` and compare each with the baseline arm.

    Args:
        testbed: what to run on.
        arms: the arms; names must be distinct.
        k: hits kept per query.
        measures: measure names; the first is the headline.
        baseline: the arm every other is compared with (default: the first).
        resamples: paired bootstrap resamples and randomisation permutations.
        seed: the seed of both tests (each pair uses this same seed, so adding
            an arm never changes another arm's interval).
        cache: reuse streams computed before (must be on ``testbed.snapshot``).
        progress: progress bars over queries.
        extra: more facts to record (learned-fusion choices, dev split).

    Raises:
        InvalidParameterError: no arms, repeated names, an unknown baseline, or
            a cache built on another snapshot.
        PairingError: a judged query is missing from a run.

    """
    if not arms:
        raise InvalidParameterError("compare needs at least one arm")
    names = [arm.name for arm in arms]
    if len(set(names)) != len(names):
        raise InvalidParameterError(f"arm names must be distinct: {names}")
    baseline = names[0] if baseline is None else baseline
    if baseline not in names:
        raise InvalidParameterError(f"baseline {baseline!r} is not one of the arms {names}")
    wanted = tuple(str(parse_measure(m)) for m in measures)
    if not wanted:
        raise InvalidParameterError("compare needs at least one measure")
    cache = StreamCache(testbed.snapshot) if cache is None else cache
    if cache.snapshot is not testbed.snapshot:
        raise InvalidParameterError("the stream cache belongs to another snapshot")
    results: dict[str, ArmResult] = {}
    for arm in arms:
        run = run_arm(cache, arm, testbed.queries, k, progress=progress)
        results[arm.name] = arm_result(run, testbed.qrels, wanted)
    base = results[baseline].evaluation
    boot: dict[tuple[str, str], BootstrapResult] = {}
    rand: dict[tuple[str, str], RandomisationResult] = {}
    for name, result in results.items():
        if name == baseline:
            continue
        for measure in wanted:
            a, b = result.evaluation.per_query(measure), base.per_query(measure)
            boot[name, measure] = paired_bootstrap(a, b, resamples=resamples, seed=seed)
            rand[name, measure] = fisher_randomisation(a, b, permutations=resamples, seed=seed)
    return Comparison(
        testbed=testbed.record(),
        measures=wanted,
        baseline=baseline,
        arms=results,
        bootstrap=boot,
        randomisation=rand,
        k=k,
        resamples=resamples,
        seed=seed,
        code=code_version(),
        extra=dict(extra or {}),
    )


# ---------------------------------------------------------------------- sweeps


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """One grid point of a sweep.

    Attributes:
        params: the grid values of this point.
        arm: the arm's name at this point.
        mean: the sweep measure's mean.
        difference: the paired bootstrap of this point minus the reference
            run (``None`` without a reference).
        tie_break_slots: top-k slots decided by a tie-break, over all queries.

    """

    params: Mapping[str, Any]
    arm: str
    mean: float
    difference: BootstrapResult | None
    tie_break_slots: int


@dataclass(frozen=True, eq=False)
class Sweep:
    """An arm family evaluated over a parameter grid."""

    name: str
    measure: str
    grid: Mapping[str, tuple[Any, ...]]
    points: tuple[SweepPoint, ...]
    reference: str | None

    def best(self) -> SweepPoint:
        """The point with the highest mean (the first in grid order on a tie)."""
        return max(self.points, key=lambda p: p.mean)  # max keeps the first maximum

    def record(self) -> dict[str, Any]:
        """JSON-ready: the grid and every point."""
        return {
            "name": self.name,
            "measure": self.measure,
            "reference": self.reference,
            "grid": {key: list(values) for key, values in self.grid.items()},
            "points": [
                {
                    "params": dict(p.params),
                    "arm": p.arm,
                    "mean": p.mean,
                    "tie_break_slots": p.tie_break_slots,
                    **(
                        {}
                        if p.difference is None
                        else {
                            "difference": p.difference.mean_difference,
                            "low": p.difference.low,
                            "high": p.difference.high,
                        }
                    ),
                }
                for p in self.points
            ],
        }


def sweep(
    testbed: Testbed,
    name: str,
    make_arm: Callable[..., Arm],
    grid: Mapping[str, Sequence[Any]],
    *,
    measure: str | Measure = "nDCG@10",
    k: int = 100,
    reference: ArmRun | None = None,
    resamples: int = 10_000,
    seed: int = 0,
    cache: StreamCache | None = None,
) -> Sweep:
    """Evaluate ``make_arm(**point)`` at every point of ``grid`` (cartesian product, in order).

    Each point keeps ``k`` hits a query, or the arm's depth where that is
    smaller (a depth sweep may go below ``k``). ``make_arm`` returns the arm
    for one point; arms that reuse the same scorer objects share their
    streams through ``cache``. With a
    ``reference`` run, each point carries the paired bootstrap of its
    difference from it (same seed at every point).

    Raises:
        InvalidParameterError: an empty grid or an empty value list.

    """
    if not grid or any(len(values) == 0 for values in grid.values()):
        raise InvalidParameterError(f"sweep {name!r} needs a grid with at least one value per parameter")
    measure_name = str(parse_measure(measure))
    cache = StreamCache(testbed.snapshot) if cache is None else cache
    reference_values = None
    if reference is not None:
        reference_values = _evaluate_run(reference, testbed.qrels, [measure_name]).per_query(measure_name)
    names = list(grid)
    points = []
    for values in product(*(grid[key] for key in names)):
        params = dict(zip(names, values, strict=True))
        arm = make_arm(**params)
        run = run_arm(cache, arm, testbed.queries, min(k, arm.depth))
        evaluation = _evaluate_run(run, testbed.qrels, [measure_name])
        difference = None
        if reference_values is not None:
            difference = paired_bootstrap(
                evaluation.per_query(measure_name), reference_values, resamples=resamples, seed=seed
            )
        points.append(
            SweepPoint(params, arm.name, evaluation.mean(measure_name), difference, run.tied_total())
        )
    return Sweep(
        name=name,
        measure=measure_name,
        grid={key: tuple(grid[key]) for key in names},
        points=tuple(points),
        reference=None if reference is None else reference.arm,
    )


# ---------------------------------------------------------------------- learned fusion


@dataclass(frozen=True, slots=True)
class DevelopmentSplit:
    """Development queries kept apart from the test queries.

    Attributes:
        qids: the development query ids, in file order.
        removed: train query id -> the test query id whose text it duplicates.
        rule: how a duplicate is recognised.

    """

    qids: tuple[str, ...]
    removed: Mapping[str, str]
    rule: str = DUPLICATE_RULE


def development_split(
    collection: Collection, *, train: str = "train", test: str = "test"
) -> DevelopmentSplit:
    """The ``train`` split's judged queries minus any whose text duplicates a ``test`` query.

    The rule of :func:`~weftsearch.eval.collection.derive_split` (which
    :meth:`Collection.with_derived_split` uses to add the ``dev`` split).

    Raises:
        InvalidParameterError: the collection lacks either split, or no query is left.

    """
    split = derive_split(collection, name=DEV_SPLIT, source=train, against=test)
    return DevelopmentSplit(split.qids, split.removed, split.rule)


def fusion_grid(streams: int) -> list[Fuser]:
    """The candidate fusers :func:`learn_fusion` tries by default, in a fixed order.

    For ``streams`` streams: plain RRF at k in (10, 20, 40, 60, 100); weighted
    RRF at those k with each non-first stream's weight, relative to the first,
    in (0.1, 0.2, 0.3, 0.5, 0.7, 1.5, 2.0, 3.0);
    score fusion (min-max and z-score) at the same relative weights and 1.0.
    The first stream's weight is fixed at 1 because only ratios matter.
    """
    if streams < 1:
        raise InvalidParameterError(f"fusion_grid needs at least one stream, got {streams}")
    ratios = (0.1, 0.2, 0.3, 0.5, 0.7, 1.5, 2.0, 3.0)
    constants = (10.0, 20.0, 40.0, 60.0, 100.0)
    rest = list(product(ratios, repeat=streams - 1)) if streams > 1 else []
    candidates: list[Fuser] = []
    for constant in constants:
        candidates.append(RRF(k=constant))
        candidates.extend(WeightedRRF([1.0, *weights], k=constant) for weights in rest)
    for norm in ("minmax", "zscore"):
        candidates.append(ScoreFusion(norm=norm))
        candidates.extend(ScoreFusion([1.0, *weights], norm=norm) for weights in rest)
    return candidates


@dataclass(frozen=True, eq=False)
class LearnedFusion:
    """The fuser chosen on development queries, frozen.

    Attributes:
        fuser: the chosen fuser.
        measure: the measure it maximised.
        dev_mean: its mean on the development queries.
        tried: (repr of each candidate, its development mean), in grid order.
        dev_queries: how many development queries were used.

    """

    fuser: Fuser
    measure: str
    dev_mean: float
    tried: tuple[tuple[str, float], ...]
    dev_queries: int

    def record(self) -> dict[str, Any]:
        """JSON-ready: the choice and every candidate's development mean."""
        return {
            "chosen": repr(self.fuser),
            "measure": self.measure,
            "dev_mean": self.dev_mean,
            "dev_queries": self.dev_queries,
            "tried": [{"fuser": r, "dev_mean": m} for r, m in self.tried],
        }


def learn_fusion(
    dev: Testbed,
    arm: Arm,
    *,
    candidates: Sequence[Fuser] | None = None,
    measure: str | Measure = "nDCG@10",
    k: int = 100,
    cache: StreamCache | None = None,
) -> LearnedFusion:
    """Choose the fuser for ``arm``'s scorers that maximises ``measure`` on ``dev``'s queries.

    Only ``dev`` is read: pass a testbed whose queries and judgements are
    the development ones (:meth:`Testbed.with_split`). The best candidate
    wins; on an exact tie, the earlier in ``candidates`` order (the grid puts
    simpler fusers first). The returned fuser is then used unchanged on test
    queries.

    Raises:
        InvalidParameterError: no candidate.

    """
    candidates = fusion_grid(len(arm.scorers)) if candidates is None else list(candidates)
    if not candidates:
        raise InvalidParameterError("learn_fusion needs at least one candidate fuser")
    measure_name = str(parse_measure(measure))
    cache = StreamCache(dev.snapshot) if cache is None else cache
    tried: list[tuple[str, float]] = []
    best: tuple[float, int] | None = None
    for position, fuser in enumerate(candidates):
        run = run_arm(cache, arm, dev.queries, k, fuser=fuser)
        mean = _evaluate_run(run, dev.qrels, [measure_name]).mean(measure_name)
        tried.append((repr(fuser), mean))
        if best is None or mean > best[0]:
            best = (mean, position)
    assert best is not None
    return LearnedFusion(candidates[best[1]], measure_name, best[0], tuple(tried), len(dev.queries))
