"""The hybrid arm's peer of ``weft-search bench load``: LanceDB.

Native full-text search + its vector search fused by its ``RRFReranker``
(K = 60). The vector search is an exact scan, unless the table has an IVF
index (:func:`build` makes one from :data:`LANCE_ANN_FROM_ROWS` rows): then
``nprobes`` of its lists are read, weft's default (``VectorScorer``'s
``DEFAULT_NPROBE``), so both engines probe the same share of the same number of
lists. Loaded by :mod:`weftsearch.bench.peers` from this folder
(``--peers-dir``); it needs the ``bench`` extra's ``lancedb`` and ``pyarrow``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from weftsearch.bench.workloads import Workload
from weftsearch.errors import InvalidParameterError, MissingDependencyError
from weftsearch.scorers.vector import DEFAULT_NPROBE
from weftsearch.storage.ivf import nlist_for

#: Rows from which the LanceDB peer gets an IVF vector index (below, it scans exactly, as weft's
#: small segments do).
LANCE_ANN_FROM_ROWS = 100_000


def _missing() -> MissingDependencyError:
    return MissingDependencyError(
        "the LanceDB peer needs lancedb: pip install 'weft-search[bench]' (or leave the peers out: --no-peer)"
    )


def build(path: Path, keys: Sequence[str], texts: Sequence[str], vectors: NDArray[np.float32] | None) -> None:
    """A LanceDB table ``docs`` at ``path`` (key, text, vector) with a full-text index on ``text``."""
    if vectors is None:
        raise InvalidParameterError("the LanceDB hybrid peer needs document vectors")
    os.environ.setdefault("LANCEDB_LOG", "error")  # see open_search
    try:
        import lancedb
        import pyarrow as pa
        from lancedb.index import FTS
    except ImportError:
        raise _missing() from None
    table = pa.table(
        {
            "key": list(keys),
            "text": list(texts),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), vectors.shape[1]),
        }
    )
    created = lancedb.connect(str(path)).create_table("docs", table)
    created.create_index(
        "text",
        config=FTS(base_tokenizer="whitespace", lower_case=False, stem=False, remove_stop_words=False,
                   ascii_folding=False, with_position=False),
    )  # fmt: skip
    if len(keys) >= LANCE_ANN_FROM_ROWS:
        # An exact scan of a million vectors is about 1 q/s: no peer for an IVF engine. Its IVF
        # index without compression (IVF_FLAT, as weft's lists hold the full vectors), with as
        # many lists as weft makes for that many vectors (nlist_for).
        from lancedb.index import IvfFlat

        created.create_index(
            "vector", config=IvfFlat(distance_type="cosine", num_partitions=nlist_for(len(keys)))
        )


def open_search(
    path: str, workload: Workload, k: int, depth: int, nprobes: int = DEFAULT_NPROBE
) -> Callable[[int], object]:
    """Open the LanceDB table ``docs`` at ``path``; the search function of query number ``item``."""
    # LanceDB's Rust side logs a deprecation warning per hybrid query on stderr unless told not
    # to (read at import): it would drown the progress lines and charge the peer for the writes.
    os.environ.setdefault("LANCEDB_LOG", "error")
    try:
        import lancedb
        from lancedb.rerankers import RRFReranker
    except ImportError:
        raise _missing() from None
    table = lancedb.connect(path).open_table("docs")
    reranker = RRFReranker(K=60)
    texts, vectors = workload.texts, workload.vectors
    if vectors is None:
        raise InvalidParameterError("the LanceDB hybrid peer needs query vectors")
    depth = max(depth, k)

    def search(item: int) -> object:
        hybrid: Any = table.search(query_type="hybrid")  # typed as the base builder: no nprobes
        rows = (
            hybrid.vector(vectors[item])
            .text(texts[item])
            .nprobes(nprobes)
            .rerank(reranker)
            .limit(depth)
            .select(["key"])
            .to_list()
        )
        return [row["key"] for row in rows[:k]]

    return search
