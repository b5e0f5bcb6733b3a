"""The shared synthetic corpus, for the scripts in this folder: see :mod:`weftsearch.bench.synthetic`.

The scripts put this folder on ``sys.path`` and import from here; the generator itself
lives in the package so that ``weft-search bench load --synthetic N`` draws the same
documents and queries as ``make bench``.
"""

from weftsearch.bench.synthetic import (
    CHUNK,
    LENGTH_SIGMA,
    MEDIAN_LENGTH,
    QUERY_SKIPS_TOP,
    SEED,
    VOCABULARY,
    ZIPF_EXPONENT,
    SyntheticCorpus,
    distinct_queries,
    unit_vectors,
    vocabulary_weights,
    zipf_corpus,
)

__all__ = [
    "CHUNK",
    "LENGTH_SIGMA",
    "MEDIAN_LENGTH",
    "QUERY_SKIPS_TOP",
    "SEED",
    "VOCABULARY",
    "ZIPF_EXPONENT",
    "SyntheticCorpus",
    "distinct_queries",
    "unit_vectors",
    "vocabulary_weights",
    "zipf_corpus",
]
