"""``weft-search eval --ray ADDRESS``: the arms' streams computed over a Ray cluster.

Evaluation spreads *queries*, not documents: every worker actor indexes the
testbed's documents itself (the same documents in the same order, so the same
index), and each scores a share of the queries for every scorer of every arm.
The streams come back as keys and scores, are turned into the local
snapshot's ids, checked and put in the run's stream cache
(:meth:`~weftsearch.eval.runs.StreamCache.put`); fusion, measures, tests and
reports then run locally on exactly the streams a local run computes (scores
to the bit: the same scorer on the same documents), so the report is the
same. Sweeps and learned fusion reuse the cached streams where their depth
matches the arm's and compute any other depth locally.

A worker needs weft-search importable and the analyzer registered under the
testbed's analyzer name (a plugin analyzer must be importable on the workers).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from weftsearch.documents import Document
from weftsearch.engine.index import Index
from weftsearch.engine.protocols import Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.search import score_queries, stream_labels
from weftsearch.engine.stream import Stream
from weftsearch.errors import InvalidParameterError, MissingDependencyError, ShardUnavailableError
from weftsearch.eval.harness import Testbed
from weftsearch.eval.runs import StreamCache
from weftsearch.ranking.arm import Arm
from weftsearch.schema import Schema

from .ray_shard import connect

try:
    import ray
    import ray.exceptions
except ImportError as error:  # pragma: no cover - .ray_shard above already names the extra
    raise MissingDependencyError("eval --ray needs Ray: pip install 'weft-search[ray]'") from error

__all__ = ["fill_streams_on_ray"]


class _EvalWorker:
    """One replica of the testbed's index (its schema too), scoring the queries it is given."""

    def __init__(
        self, documents: list[Document], analyzer: str, vector_dim: int | None, schema: Schema | None = None
    ) -> None:
        self._index = Index(analyzer, vector_dim=vector_dim, schema=schema)
        self._index.add_many(documents, progress=False)
        self._snapshot = self._index.snapshot()

    def streams(
        self, scorer: Scorer, label: str, queries: list[Query], depth: int
    ) -> list[tuple[list[str], NDArray[np.float64]]]:
        streams = score_queries(scorer, label, self._snapshot, queries, depth)
        return [
            (self._snapshot.keys_of(stream.ids), np.asarray(stream.scores, np.float64)) for stream in streams
        ]


def fill_streams_on_ray(
    address: str, cache: StreamCache, testbed: Testbed, arms: Sequence[Arm], *, workers: int | None = None
) -> int:
    """Compute every arm's streams over the Ray cluster at ``address`` into ``cache``; return how many.

    Args:
        address: the cluster's address (``HOST:PORT``); joined if this process is not in one.
        cache: the run's stream cache, on ``testbed.snapshot``.
        testbed: what the arms run on (its documents are sent to every worker once).
        arms: the arms; each distinct (scorer, depth, filter) is computed once.
        workers: worker actors (default: the cluster's CPUs, at least 1).

    Raises:
        ShardUnavailableError: a worker died or its node left; the message names it.
        InvalidParameterError: a named text field of the testbed is not stored,
            so a worker could not index it (checked before connecting).

    """
    snapshot = testbed.snapshot
    schema = snapshot.schema
    unstored = [field.name for field in schema.fields if not field.stored]
    if unstored:
        # A worker indexes the stored documents: without a field's text its BM25F would differ.
        raise InvalidParameterError(
            f"eval --ray rebuilds the index on every worker from its stored documents, but the text "
            f"field {unstored[0]!r} is not stored (TextField(stored=False)); run without --ray"
        )
    connect(address)
    documents = [snapshot.document(doc) for doc in range(snapshot.n_docs)]
    count = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
    shared = ray.put(documents)
    remote = ray.remote(num_cpus=1, max_restarts=0)(_EvalWorker)
    actors: list[Any] = [
        remote.remote(shared, testbed.analyzer, snapshot.vector_dim, schema) for _ in range(count)
    ]
    try:
        return _fill(actors, cache, testbed.queries, arms)
    finally:
        for actor in actors:
            ray.kill(actor, no_restart=True)


def _fill(actors: list[Any], cache: StreamCache, queries: Mapping[str, Query], arms: Sequence[Arm]) -> int:
    stored = 0
    done: set[tuple[int, int, object]] = set()
    for arm in arms:
        wanted = dict(queries)
        if arm.filter is not None:  # as run_arm does: the arm's filter replaces each query's own
            wanted = {qid: dataclasses.replace(query, filter=arm.filter) for qid, query in wanted.items()}
        for scorer, label in zip(arm.scorers, stream_labels(arm.scorers), strict=True):
            key = (id(scorer), arm.depth, arm.filter)
            if key in done:
                continue
            done.add(key)
            items = list(wanted.items())
            shares = [items[start :: len(actors)] for start in range(len(actors))]
            pending = [
                (share, actor.streams.remote(scorer, label, [query for _, query in share], arm.depth))
                for share, actor in zip(shares, actors, strict=True)
                if share
            ]
            for position, (share, reference) in enumerate(pending):
                try:
                    answers = ray.get(reference)
                except ray.exceptions.RayTaskError as error:
                    raise error.cause if isinstance(error.cause, Exception) else error from None
                except ray.exceptions.RayError as error:
                    raise ShardUnavailableError(
                        f"evaluation worker {position} did not answer: {type(error).__name__}",
                        (f"worker-{position}",),
                    ) from None
                for (qid, query), (keys, scores) in zip(share, answers, strict=True):
                    ids = cache.snapshot.ids_of(keys)
                    cache.put(scorer, label, qid, query, arm.depth, Stream(ids, scores))
                    stored += 1
    return stored
