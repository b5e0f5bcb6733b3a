"""The synthetic corpus every benchmark shares (issue 14: one generator, fixed seed).

``bench/query_path.py`` (``make bench``), ``bench/bm25_vs_bm25s.py``,
``bench/bm25_kernel.py`` (through ``bench/synthetic_corpus.py``) and ``weft-search bench
load --synthetic N`` draw from here, so "synthetic 100k" or "synthetic 1M" means the
same documents and queries in every table of docs/BENCHMARKS.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

#: The default seed of every script (the date issue 14's benchmarks were specified).
SEED = 20261203
#: Terms in the vocabulary (``t0`` is the most frequent).
VOCABULARY = 50_000
#: Zipf exponent: term rank r is drawn with probability proportional to ``1 / r**ZIPF_EXPONENT``.
ZIPF_EXPONENT = 1.07
#: Median document length in tokens (log-normal, sigma :data:`LENGTH_SIGMA`, clipped to 5..1000).
MEDIAN_LENGTH = 100.0
LENGTH_SIGMA = 0.4
#: The most frequent terms queries never draw (queries rarely are stopwords).
QUERY_SKIPS_TOP = 50
#: Documents drawn per chunk: bounds the draw arrays for the 1M corpus.
CHUNK = 100_000


@dataclass
class SyntheticCorpus:
    """Keys, document tokens and query tokens of one draw."""

    name: str
    doc_keys: list[str]
    doc_tokens: list[list[str]]
    query_tokens: list[list[str]]


def vocabulary_weights() -> NDArray[np.float64]:
    """The probability of each term rank (sums to 1)."""
    weights: NDArray[np.float64] = 1.0 / np.arange(1, VOCABULARY + 1, dtype=np.float64) ** ZIPF_EXPONENT
    return np.asarray(weights / weights.sum(), dtype=np.float64)


def zipf_corpus(n_docs: int, n_queries: int, seed: int = SEED) -> SyntheticCorpus:
    """A reproducible corpus from a Zipfian vocabulary: same arguments, same tokens.

    :data:`VOCABULARY` terms ``t0``, ``t1``, ... with rank r drawn with probability
    proportional to ``1 / r**1.07`` (close to English word frequencies); document
    lengths log-normal with median 100 tokens (sigma 0.4, clipped to 5..1000);
    ``n_queries`` queries of 2 to 8 terms from the same distribution without its 50
    most frequent terms. Memory: about 8 bytes a token for the lists (the term strings
    are shared), so some 0.9 GB for 1M documents. Time: about a minute per million.
    """
    rng = np.random.default_rng(seed)
    weights = vocabulary_weights()
    words = np.array([f"t{rank}" for rank in range(VOCABULARY)], dtype=object)
    lengths = np.clip(rng.lognormal(np.log(MEDIAN_LENGTH), LENGTH_SIGMA, n_docs), 5, 1000).astype(np.int64)
    bounds = np.concatenate(([0], np.cumsum(lengths)))
    doc_tokens: list[list[str]] = []
    for start in range(0, n_docs, CHUNK):
        stop = min(start + CHUNK, n_docs)
        draws = rng.choice(VOCABULARY, size=int(bounds[stop] - bounds[start]), p=weights).astype(np.int32)
        offsets = bounds[start : stop + 1] - bounds[start]
        doc_tokens.extend(words[draws[offsets[i] : offsets[i + 1]]].tolist() for i in range(stop - start))
    tail = weights[QUERY_SKIPS_TOP:] / weights[QUERY_SKIPS_TOP:].sum()
    query_tokens = [
        words[QUERY_SKIPS_TOP + rng.choice(VOCABULARY - QUERY_SKIPS_TOP, size=int(m), p=tail)].tolist()
        for m in rng.integers(2, 9, size=n_queries)
    ]
    width = len(str(max(n_docs - 1, 0)))
    return SyntheticCorpus(
        name=f"synthetic {n_docs:,} (seed {seed})",
        doc_keys=[f"d{i:0{width}d}" for i in range(n_docs)],
        doc_tokens=doc_tokens,
        query_tokens=query_tokens,
    )


def distinct_queries(doc_tokens: list[list[str]], n_queries: int, seed: int = SEED + 1) -> list[list[str]]:
    """``n_queries`` pairwise distinct queries of 2 to 6 terms drawn from the corpus's own tokens.

    For the memory test (RSS growth over many distinct queries): every query
    touches terms a cache could keep. Tokens are drawn uniformly over token
    occurrences, so frequent terms are drawn more often, as in real queries.
    Raises ValueError when the corpus cannot give that many distinct queries.
    """
    rng = np.random.default_rng(seed)
    flat = [token for tokens in doc_tokens[: min(len(doc_tokens), 20_000)] for token in tokens]
    if not flat:
        raise ValueError("the corpus has no tokens to draw queries from")
    seen: set[tuple[str, ...]] = set()
    out: list[list[str]] = []
    attempts = 0
    while len(out) < n_queries:
        attempts += 1
        if attempts > 20 * n_queries + 1000:
            raise ValueError(f"could not draw {n_queries} distinct queries from {len(flat)} tokens")
        picks = rng.integers(0, len(flat), size=int(rng.integers(2, 7)))
        query = tuple(sorted({flat[int(i)] for i in picks}))
        if len(query) >= 2 and query not in seen:
            seen.add(query)
            out.append(list(query))
    return out


#: Width of :func:`unit_vectors` (all-MiniLM-L6-v2's, the width of the frozen SciFact vectors).
VECTOR_DIM = 384


def unit_vectors(n: int, dim: int = VECTOR_DIM, seed: int = SEED) -> NDArray[np.float32]:
    """``n`` seeded random unit vectors of width ``dim`` (float32, rows of norm 1).

    For load and speed on the synthetic corpus only: the vectors carry no meaning,
    so a hybrid ranking over them measures cost, never quality. Drawn in chunks of
    :data:`CHUNK` rows (Gaussian, normalised), so 1M x 384 needs its 1.5 GB result
    and little more. Same ``n``, ``dim`` and ``seed``: the same bytes.
    """
    rng = np.random.default_rng(seed)
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, CHUNK):
        stop = min(start + CHUNK, n)
        block = rng.standard_normal((stop - start, dim), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start:stop] = block
    return out
