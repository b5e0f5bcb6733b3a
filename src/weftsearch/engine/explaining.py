"""``Index.explain``: why documents rank where they do for a query (Elasticsearch's ``_explain``).

One search of the snapshot to ``depth`` gives each document's fused score,
its rank and raw score in every stream and its contribution; under each
stream, the scorer's own breakdown when the scorer offers the optional
``explain(snapshot, query, ids) -> Sequence[Explanation]`` method (one
explanation per id, value 0 and the reason where the scorer does not match
the document). The engine asks every scorer the same way; it never looks at
which scorer it is. A document the query does not reach is explained too:
value 0, and each stream says whether it holds the document at all.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from weftsearch.engine.explanation import Explanation
from weftsearch.engine.protocols import Fuser, Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.search import (
    PASSTHROUGH,
    Hit,
    SearchResults,
    _as_query,
    search_snapshot,
    stream_labels,
)
from weftsearch.engine.snapshot import Snapshot
from weftsearch.errors import InvalidParameterError, UnknownKeyError

__all__ = [
    "MAX_EXPLAINED",
    "check_keys_count",
    "check_scorers",
    "explain_keys",
    "explanation_trees",
    "scorer_breakdown",
]

#: Most documents one call explains (each is a tree of Python objects; a results page is far fewer).
MAX_EXPLAINED = 1_000


def explain_keys(
    snapshot: Snapshot,
    query: Query | str,
    keys: Sequence[str],
    fuser: Fuser,
    scorers: Sequence[Scorer],
    depth: int | None = None,
) -> list[Explanation]:
    """Each of ``keys``' explanation for ``query`` ranked by ``scorers`` fused by ``fuser``, in order.

    Args:
        snapshot: the snapshot searched (the one a page of results came from, to explain its hits).
        query: a :class:`~weftsearch.engine.query.Query` or plain text.
        keys: documents of the snapshot, at most :data:`MAX_EXPLAINED`.
        fuser: as :meth:`Index.search <weftsearch.engine.index.Index.search>`.
        scorers: as :meth:`Index.search`.
        depth: candidates per stream (``None``: ``max(100, 1)``, the search's default for fusion);
            a document below it in a stream gets no contribution from it, as in the search.

    Raises:
        UnknownKeyError: a key the snapshot lacks (named).
        InvalidParameterError: more than :data:`MAX_EXPLAINED` keys, or what the search refuses.

    O(one search to ``depth``) plus the scorers' breakdowns of ``keys``.

    """
    check_keys_count(keys)
    ids = snapshot.ids_of(list(keys))
    for key, found in zip(keys, ids.tolist(), strict=True):
        if found < 0:
            raise UnknownKeyError(
                f"no document with key {key!r} in this snapshot (generation {snapshot.generation})"
            )
    check_scorers(scorers)
    depth = 100 if depth is None else depth
    parsed = _as_query(query)
    results = search_snapshot(snapshot, parsed, depth, fuser, scorers, depth)
    breakdowns = [scorer_breakdown(scorer, snapshot, parsed, ids) for scorer in scorers]
    return explanation_trees(keys, results, stream_labels(scorers), depth, breakdowns)


def check_keys_count(keys: Sequence[str]) -> None:
    """Refuse more than :data:`MAX_EXPLAINED` keys.

    Raises:
        InvalidParameterError: too many keys (the count named).

    """
    if len(keys) > MAX_EXPLAINED:
        raise InvalidParameterError(
            f"at most {MAX_EXPLAINED} documents are explained a call, got {len(keys)}"
        )


def check_scorers(scorers: Sequence[Scorer]) -> None:
    """Refuse an explanation without scorers.

    Raises:
        InvalidParameterError: no scorer.

    """
    if not scorers:
        raise InvalidParameterError("explain needs at least one scorer")


def explanation_trees(
    keys: Sequence[str],
    results: SearchResults,
    labels: Sequence[str],
    depth: int,
    breakdowns: Sequence[Sequence[Explanation] | None],
) -> list[Explanation]:
    """Each key's tree from a search to ``depth`` and each scorer's breakdowns of the keys.

    Shared by one index and a sharded one, so both give the same tree for the
    same search: the root is the key's fused score (0 when it is not among the
    top ``depth``), one child per stream, the scorer's breakdown under it.

    Args:
        keys: the documents explained, in order.
        results: the search to ``depth`` (``k = depth``) the explanation reads.
        labels: the streams' labels (:func:`stream_labels` of the scorers).
        depth: candidates per stream of that search.
        breakdowns: per scorer, one explanation per key (``None``: it offers none).

    """
    by_key = {hit.key: hit for hit in results}
    out = []
    for row, key in enumerate(keys):
        hit = by_key.get(key)
        streams = tuple(
            _stream_node(label, hit, column, depth, None if found is None else found[row])
            for column, (label, found) in enumerate(zip(labels, breakdowns, strict=True))
        )
        if hit is None:
            out.append(
                Explanation(0.0, f"{key!r} is not among the top {depth} results; its streams:", streams)
            )
        elif results.fuser == PASSTHROUGH:
            out.append(
                Explanation(
                    hit.score, f"{key!r}, rank {hit.rank}: the one stream's score (no fusion)", streams
                )
            )
        else:
            out.append(
                Explanation(
                    hit.score,
                    f"{key!r}, rank {hit.rank}: fused by {results.fuser} from each stream's contribution:",
                    streams,
                )
            )
    return out


def scorer_breakdown(
    scorer: Scorer, snapshot: Snapshot, query: Query, ids: NDArray[np.int64]
) -> list[Explanation] | None:
    """The scorer's own explanations of ``ids`` of ``snapshot`` (``None``: the scorer offers none).

    Read through the optional ``explain`` method, never by the scorer's type.
    A sharded index calls it on each shard's view with the collection's
    statistics, with that shard's ids.

    Raises:
        InvalidParameterError: the scorer's answer is not one Explanation per id.

    """
    explain = getattr(scorer, "explain", None)
    if explain is None:
        return None
    found = list(explain(snapshot, query, ids))
    if len(found) != ids.shape[0] or not all(isinstance(item, Explanation) for item in found):
        raise InvalidParameterError(
            f"scorer {scorer.name!r}: explain must return one Explanation per document "
            f"({ids.shape[0]}), got {len(found)}"
        )
    return found


def _stream_node(
    label: str, hit: Hit | None, column: int, depth: int, breakdown: Explanation | None
) -> Explanation:
    """One stream's part in a document's explanation, with its scorer's breakdown under it."""
    details = () if breakdown is None else (breakdown,)
    signal = None if hit is None else hit.signals[column]
    if signal is None or signal.rank is None:
        if breakdown is not None and breakdown.value == 0.0:
            return Explanation(0.0, f"{label}: contributes nothing (it does not match)", details)
        return Explanation(0.0, f"{label}: contributes nothing (not among its top {depth})", details)
    return Explanation(
        signal.contribution,
        f"{label}: rank {signal.rank}, raw score {signal.score:.6g}, contribution:",
        details,
    )
