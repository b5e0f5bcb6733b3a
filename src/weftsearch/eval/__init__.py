"""Evaluation: measures with trec_eval's semantics and paired significance tests.

The harness must not know what any scorer is: it reads qrels and runs
(query id -> document id -> grade or score) and nothing else.
"""

from __future__ import annotations

from weftsearch.eval.metrics import Evaluation, Measure, evaluate, parse_measure, run_from_rankings
from weftsearch.eval.stats import (
    BootstrapResult,
    RandomisationResult,
    fisher_randomisation,
    fisher_randomisation_exact,
    paired_bootstrap,
)

__all__ = [
    "Measure",
    "parse_measure",
    "Evaluation",
    "evaluate",
    "run_from_rankings",
    "BootstrapResult",
    "paired_bootstrap",
    "RandomisationResult",
    "fisher_randomisation",
    "fisher_randomisation_exact",
]

# Datasets: judged collections verified against pinned hashes, their frozen vectors, fetching.
from weftsearch.eval.datasets import (
    Collection,
    CollectionVectors,
    FetchResult,
    FileRecord,
    fetch,
    load_beir,
    load_collection,
    load_frozen_vectors,
)

__all__ += [
    "Collection",
    "CollectionVectors",
    "FileRecord",
    "FetchResult",
    "load_beir",
    "load_collection",
    "load_frozen_vectors",
    "fetch",
]
