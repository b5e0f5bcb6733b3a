"""Evaluation: judged collections, arms, paired significance tests and reports.

Everything README.md's "Evaluate" section names is importable from here::

    from weftsearch.eval import (load_collection, load_beir, build_testbed, Arm,
                                 compare, sweep, learn_fusion, write_report)

The imports are eager: the submodules cost about 30 ms on top of
``import weftsearch`` (they need numpy and the engine, which the package has
already loaded), and matplotlib, the one heavy optional dependency, is imported
only inside :mod:`weftsearch.eval.reports`' plotting code, never at import
time. No submodule imports this package's names (each imports the submodules
it needs), so there is no import cycle whatever the order below.
:mod:`weftsearch.eval.links` (link figures) and :mod:`weftsearch.eval.embedding`
(a collection's vectors) stay submodules; the ``weft-search eval`` command line
is :mod:`weftsearch.cli.eval`.

The harness must not know what any scorer is: it reads qrels and runs
(query id -> document id -> grade or score) and calls arms built elsewhere;
:mod:`weftsearch.ranking.specs` is the one part that names scorers.
"""

from __future__ import annotations

from weftsearch.eval.datasets import (
    Collection,
    CollectionVectors,
    DerivedSplit,
    FetchResult,
    FileRecord,
    fetch,
    load_beir,
    load_collection,
    load_frozen_vectors,
)
from weftsearch.eval.harness import (
    Comparison,
    LearnedFusion,
    Sweep,
    Testbed,
    build_testbed,
    compare,
    development_split,
    learn_fusion,
    sweep,
)
from weftsearch.eval.metrics import (
    Evaluation,
    Measure,
    evaluate,
    jaccard,
    parse_measure,
    rank_biased_overlap,
    run_from_rankings,
)
from weftsearch.eval.reports import ReportFiles, format_table, markdown_report, write_report
from weftsearch.eval.runs import ArmRun, run_arm
from weftsearch.eval.stats import (
    BootstrapResult,
    RandomisationResult,
    fisher_randomisation,
    fisher_randomisation_exact,
    paired_bootstrap,
)
from weftsearch.ranking.arm import Arm
from weftsearch.ranking.specs import ArmBuilder, parse_arm, register_scorer

__all__ = [
    # Measures and significance tests.
    "Measure",
    "parse_measure",
    "Evaluation",
    "evaluate",
    "jaccard",
    "rank_biased_overlap",
    "run_from_rankings",
    "BootstrapResult",
    "paired_bootstrap",
    "RandomisationResult",
    "fisher_randomisation",
    "fisher_randomisation_exact",
    # Datasets: judged collections verified against pinned hashes, their vectors, fetching.
    "Collection",
    "CollectionVectors",
    "DerivedSplit",
    "FileRecord",
    "FetchResult",
    "load_beir",
    "load_collection",
    "load_frozen_vectors",
    "fetch",
    # Arms and the harness: index a collection, run arms, compare, sweep, learn a fuser.
    "Arm",
    "ArmRun",
    "run_arm",
    "Testbed",
    "build_testbed",
    "Comparison",
    "compare",
    "Sweep",
    "sweep",
    "LearnedFusion",
    "learn_fusion",
    "development_split",
    # Arms written as text (the one module that names scorers), and reports.
    "ArmBuilder",
    "parse_arm",
    "register_scorer",
    "ReportFiles",
    "format_table",
    "markdown_report",
    "write_report",
]
