"""Comparing search results whose BM25 plans may come from different paths.

Which BM25 path runs (numpy or the compiled kernel, one query or a batch) may
differ between two searches of the same query (a batch, a concurrent search);
the results never do, and neither do the plan's counts that every path takes.
"""

from __future__ import annotations

from typing import Any

from weftsearch.scorers.bm25 import PLAN_KEYS

#: BM25 plan keys every path fills with the same value.
PATH_FREE = ("terms", "terms_matched", "segments", "postings")


def without_paths(payload: dict[str, Any]) -> dict[str, Any]:
    """``SearchResults.to_dict()`` with each BM25 plan cut to :data:`PATH_FREE` (all else kept)."""
    plans = payload.get("plans")
    if not plans:
        return payload
    cut = {
        label: {key: plan[key] for key in PATH_FREE}
        if plan is not None and tuple(plan) == PLAN_KEYS
        else plan
        for label, plan in plans.items()
    }
    return {**payload, "plans": cut}
