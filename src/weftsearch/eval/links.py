"""How a collection's links go with its relevance judgements: the evidence, reprinted.

A graph signal is worth testing only if the links carry something about
relevance, and a graph experiment is fair only if the links were not made
from the judgements. docs/EVAL.md (Experiment 3) states both with figures;
this module computes them, and ``weft-search datasets links NAME --data DIR``
prints them:

* **coverage** (:func:`link_coverage`): how many documents have a link, how
  many of those are relevant to no query, how many documents are relevant to
  some query;
* **co-relevant pairs** (:func:`co_relevant_pairs`): for each judged query,
  every unordered pair of two different documents relevant to it (grade
  above zero); a pair relevant to two queries is counted once for each. The
  figure is the fraction of those pairs that are linked;
* **random pairs** (:func:`random_pairs`): the same fraction over pairs of
  two different documents drawn uniformly, with replacement, from a seeded
  ``numpy.random.PCG64``: the base rate the co-relevant fraction is read
  against.

"Linked" means one document names the other among its links (the link sets
are symmetric). By default the links are the documents' own
(:attr:`Document.links`, what a graph scorer follows: CACM's type-5 citation
links, CISI's associations); ``link_set`` reads one of
:attr:`Collection.link_sets` instead.

Nothing here knows what a scorer is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

from weftsearch.errors import InvalidParameterError
from weftsearch.eval.datasets import Collection

__all__ = [
    "DEFAULT_RANDOM_PAIRS",
    "LinkCoverage",
    "PairLinkRate",
    "LinkIndependence",
    "link_coverage",
    "co_relevant_pairs",
    "random_pairs",
    "link_independence",
    "format_link_independence",
]

#: How many random pairs :func:`link_independence` draws unless told otherwise.
DEFAULT_RANDOM_PAIRS = 200_000


@dataclass(frozen=True, slots=True)
class PairLinkRate:
    """How many of some document pairs are linked.

    Attributes:
        pairs: pairs counted.
        linked: how many of them are linked.

    """

    pairs: int
    linked: int

    @property
    def rate(self) -> float:
        """``linked / pairs`` (NaN when there is no pair)."""
        return self.linked / self.pairs if self.pairs else math.nan


@dataclass(frozen=True, slots=True)
class LinkCoverage:
    """Which documents the links touch, and how that meets the judgements.

    Attributes:
        documents: documents in the collection.
        linked_documents: documents with at least one link.
        linked_relevant_to_none: linked documents relevant to no judged query.
        relevant_documents: documents relevant (grade above zero) to some query.
        linked_relevant: documents both linked and relevant to some query.
        links: undirected links (each pair of linked documents once).

    """

    documents: int
    linked_documents: int
    linked_relevant_to_none: int
    relevant_documents: int
    linked_relevant: int
    links: int

    @property
    def all_pairs(self) -> PairLinkRate:
        """Every pair of two different documents, and how many are linked: what random pairs estimate."""
        return PairLinkRate(self.documents * (self.documents - 1) // 2, self.links)


@dataclass(frozen=True, slots=True)
class LinkIndependence:
    """Everything :func:`link_independence` measured, with how.

    Attributes:
        collection: the collection's name.
        link_set: the link set read (``None``: the documents' own links).
        split: the judgements used (``None``: the collection's default).
        coverage: :func:`link_coverage`.
        co_relevant: :func:`co_relevant_pairs`.
        random: :func:`random_pairs`.
        seed: the seed of the random pairs.

    """

    collection: str
    link_set: str | None
    split: str | None
    coverage: LinkCoverage
    co_relevant: PairLinkRate
    random: PairLinkRate
    seed: int

    def record(self) -> dict[str, Any]:
        """JSON-ready: every count, the rates and the parameters."""
        return {
            "collection": self.collection,
            "link_set": self.link_set,
            "split": self.split,
            "coverage": {
                "documents": self.coverage.documents,
                "linked_documents": self.coverage.linked_documents,
                "linked_relevant_to_none": self.coverage.linked_relevant_to_none,
                "relevant_documents": self.coverage.relevant_documents,
                "linked_relevant": self.coverage.linked_relevant,
                "links": self.coverage.links,
                "all_pairs": self.coverage.all_pairs.pairs,
                "all_pairs_rate": self.coverage.all_pairs.rate,
            },
            "co_relevant_pairs": {
                "pairs": self.co_relevant.pairs,
                "linked": self.co_relevant.linked,
                "rate": self.co_relevant.rate,
            },
            "random_pairs": {
                "pairs": self.random.pairs,
                "linked": self.random.linked,
                "rate": self.random.rate,
                "seed": self.seed,
                "generator": "numpy PCG64",
            },
        }


def _neighbours(collection: Collection, link_set: str | None) -> dict[str, frozenset[str]]:
    """Document key -> the keys it is linked with (no self links), from ``link_set`` or the documents."""
    if link_set is None:
        table: Mapping[str, Any] = {d.key: d.links for d in collection.documents}
    else:
        if link_set not in collection.link_sets:
            known = ", ".join(sorted(collection.link_sets)) or "none"
            raise InvalidParameterError(f"{collection.name} has no link set {link_set!r} (known: {known})")
        table = collection.link_sets[link_set]
    keys = set(collection.document_keys)
    out: dict[str, frozenset[str]] = {}
    for key in collection.document_keys:
        others = frozenset(other for other in table.get(key, ()) if other != key and other in keys)
        if others:
            out[key] = others
    # Symmetric by construction: a link named from one end only still links both.
    for key, others in list(out.items()):
        for other in others:
            if key not in out.get(other, frozenset()):
                out[other] = out.get(other, frozenset()) | {key}
    return out


def _relevant(collection: Collection, split: str | None) -> dict[str, list[str]]:
    """Query id -> its relevant document keys (grade above zero), sorted; judged queries only."""
    qrels = collection.judgements(split)
    out: dict[str, list[str]] = {}
    for qid, judged in qrels.items():
        relevant = sorted(doc for doc, grade in judged.items() if grade > 0)
        if relevant:
            out[qid] = relevant
    return out


def link_coverage(
    collection: Collection, *, link_set: str | None = None, split: str | None = None
) -> LinkCoverage:
    """Documents with links, and how they meet the judgements; see the module docstring.

    Raises:
        InvalidParameterError: an unknown link set or split.

    """
    neighbours = _neighbours(collection, link_set)
    relevant = {doc for docs in _relevant(collection, split).values() for doc in docs}
    linked = set(neighbours)
    return LinkCoverage(
        documents=len(collection.documents),
        linked_documents=len(linked),
        linked_relevant_to_none=len(linked - relevant),
        relevant_documents=len(relevant),
        linked_relevant=len(linked & relevant),
        links=sum(len(others) for others in neighbours.values()) // 2,
    )


def co_relevant_pairs(
    collection: Collection, *, link_set: str | None = None, split: str | None = None
) -> PairLinkRate:
    """Pairs of documents relevant to the same query, and how many are linked.

    Every unordered pair of two different documents relevant to one query,
    over every judged query; a pair relevant to several queries counts once
    for each. O(sum over queries of relevant documents squared).

    Raises:
        InvalidParameterError: an unknown link set or split.

    """
    neighbours = _neighbours(collection, link_set)
    pairs = linked = 0
    for relevant in _relevant(collection, split).values():
        for a, b in combinations(relevant, 2):
            pairs += 1
            linked += b in neighbours.get(a, ())
    return PairLinkRate(pairs, linked)


def random_pairs(
    collection: Collection,
    *,
    link_set: str | None = None,
    pairs: int = DEFAULT_RANDOM_PAIRS,
    seed: int = 0,
) -> PairLinkRate:
    """``pairs`` random pairs of two different documents, and how many are linked.

    Each pair is drawn uniformly from the pairs of distinct documents, with
    replacement: the first document's index from ``integers(0, n)``, the
    second's from ``integers(0, n - 1)`` shifted past the first, both from
    ``numpy.random.Generator(PCG64(seed))``, first all ``pairs`` first
    indices, then all second ones. Same seed, same pairs.

    Raises:
        InvalidParameterError: ``pairs`` below 1, a negative seed, fewer than
            two documents, or an unknown link set.

    """
    if isinstance(pairs, bool) or not isinstance(pairs, int) or pairs < 1:
        raise InvalidParameterError(f"random pairs must be a positive integer, got {pairs!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InvalidParameterError(f"seed must be a non-negative integer, got {seed!r}")
    keys = collection.document_keys
    n = len(keys)
    if n < 2:
        raise InvalidParameterError(f"{collection.name}: random pairs need at least two documents, got {n}")
    position = {key: i for i, key in enumerate(keys)}
    codes = [
        position[key] * n + position[other]
        for key, others in _neighbours(collection, link_set).items()
        for other in others
    ]
    edges = np.unique(np.asarray(codes, dtype=np.int64))
    rng = np.random.Generator(np.random.PCG64(seed))
    first = rng.integers(0, n, size=pairs, dtype=np.int64)
    second = rng.integers(0, n - 1, size=pairs, dtype=np.int64)
    second += second >= first
    linked = int(np.count_nonzero(np.isin(first * n + second, edges)))
    return PairLinkRate(pairs, linked)


def link_independence(
    collection: Collection,
    *,
    link_set: str | None = None,
    split: str | None = None,
    pairs: int = DEFAULT_RANDOM_PAIRS,
    seed: int = 0,
) -> LinkIndependence:
    """Coverage, co-relevant pairs and random pairs of ``collection``'s links, in one record.

    Raises:
        InvalidParameterError: an unknown link set or split, or bad ``pairs`` / ``seed``.

    """
    return LinkIndependence(
        collection=collection.name,
        link_set=link_set,
        split=split,
        coverage=link_coverage(collection, link_set=link_set, split=split),
        co_relevant=co_relevant_pairs(collection, link_set=link_set, split=split),
        random=random_pairs(collection, link_set=link_set, pairs=pairs, seed=seed),
        seed=seed,
    )


def _percent(rate: float) -> str:
    """A rate as a percentage to three significant figures (``5.12 %``, ``0.0530 %``)."""
    if math.isnan(rate):
        return "n/a"
    return f"{rate * 100:#.3g} %"


def format_link_independence(result: LinkIndependence) -> str:
    """What ``weft-search datasets links`` prints: the counts and rates, one fact a line."""
    c = result.coverage
    source = "the documents' links" if result.link_set is None else f"link set {result.link_set!r}"
    split = "default" if result.split is None else result.split
    co, rnd, every = result.co_relevant, result.random, c.all_pairs
    ratio = co.rate / rnd.rate if rnd.linked and not math.isnan(co.rate) else math.nan
    lines = [
        f"{result.collection}: {source}, judgements of split {split}",
        f"documents with links: {c.linked_documents} of {c.documents} ({c.links} undirected links)",
        f"linked documents relevant to no query: {c.linked_relevant_to_none} of {c.linked_documents}",
        f"documents relevant to some query: {c.relevant_documents} ({c.linked_relevant} of them linked)",
        f"pairs relevant to the same query: {co.pairs}, linked: {co.linked} ({_percent(co.rate)})",
        f"random pairs (seed {result.seed}): {rnd.pairs}, linked: {rnd.linked} ({_percent(rnd.rate)})",
        f"all pairs: {every.pairs}, linked: {every.linked} ({_percent(every.rate)})",
        "co-relevant / random: " + ("n/a" if math.isnan(ratio) else f"{ratio:.1f}x"),
    ]
    return "\n".join(lines) + "\n"
