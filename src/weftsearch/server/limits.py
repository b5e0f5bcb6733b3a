"""What one request may ask for (:class:`ServerLimits`), and how the served schema states it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from weftsearch.errors import InvalidParameterError

__all__ = ["ServerLimits", "document_limits"]


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """Bounds on what one request may ask for; a request beyond one is refused (413 or 422).

    Every figure can be raised (or lowered) with ``weft-search serve``'s option of the same
    name (``--max-queries 20000``); the served ``/openapi.json`` states the server's figures
    (``maxItems``, ``maximum``, ``maxLength``, ``maxProperties``).

    Attributes:
        max_body_bytes: request body size (413 beyond it); the default holds 10,000 text
            queries with their judgements (a body of query vectors holds fewer).
        max_k: hits per query.
        max_depth: candidates per scorer.
        max_batch: queries per batch search request.
        max_queries: queries per compare or rank_eval request (a whole test set, such as
            SciFact's 300, gets one interval).
        max_documents: documents per upsert request.
        max_query_chars: characters of query text (and of a filter or spec).
        max_vector_dim: numbers in one vector.
        max_seeds: seed keys per query.
        max_resamples: bootstrap resamples per compare or rank_eval request.
        search_threads: threads of one batch search (``None``: the calling thread).

    """

    max_body_bytes: int = 16_000_000
    max_k: int = 1_000
    max_depth: int = 10_000
    max_batch: int = 256
    max_queries: int = 10_000
    max_documents: int = 1_000
    max_query_chars: int = 4_096
    max_vector_dim: int = 4_096
    max_seeds: int = 100
    max_resamples: int = 10_000
    search_threads: int | None = None

    def __post_init__(self) -> None:
        for name in (
            "max_body_bytes",
            "max_k",
            "max_depth",
            "max_batch",
            "max_queries",
            "max_documents",
            "max_query_chars",
            "max_vector_dim",
            "max_seeds",
            "max_resamples",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidParameterError(f"ServerLimits.{name} must be a positive integer, got {value!r}")
        threads = self.search_threads
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise InvalidParameterError(
                f"ServerLimits.search_threads must be a positive integer or None, got {threads!r}"
            )


#: Where each :class:`ServerLimits` figure shows in the schema: (model, property, JSON Schema keyword).
_LIMITED: dict[str, tuple[tuple[str, str, str], ...]] = {
    "max_k": tuple(
        (m, "k", "maximum")
        for m in ("SearchRequest", "BatchSearchRequest", "CompareRequest", "RankEvalRequest")
    ),
    "max_depth": tuple(
        (m, "depth", "maximum") for m in ("SearchRequest", "BatchSearchRequest", "RankingIn", "ProfileIn")
    ),
    "max_batch": (("BatchSearchRequest", "queries", "maxItems"),),
    "max_queries": (
        ("CompareRequest", "queries", "maxProperties"),
        ("RankEvalRequest", "queries", "maxProperties"),
    ),
    "max_documents": (("UpsertRequest", "documents", "maxItems"),),
    "max_query_chars": tuple(
        (m, p, "maxLength") for m in ("QueryIn", "SearchRequest") for p in ("text", "filter")
    )
    + tuple(
        (m, "spec", "maxLength") for m in ("SearchRequest", "BatchSearchRequest", "RankingIn", "ProfileIn")
    )
    + (("ProfileIn", "filter", "maxLength"),),
    "max_vector_dim": tuple((m, "vector", "maxItems") for m in ("QueryIn", "SearchRequest", "DocumentIn")),
    "max_seeds": (("QueryIn", "seeds", "maxItems"), ("SearchRequest", "seeds", "maxItems")),
    "max_resamples": (
        ("CompareRequest", "resamples", "maximum"),
        ("RankEvalRequest", "resamples", "maximum"),
    ),
}


def document_limits(schema: dict[str, Any], limits: ServerLimits) -> None:
    """Write this server's :class:`ServerLimits` into its OpenAPI ``schema`` (in place).

    Each bounded property gets the JSON Schema keyword that states its limit
    (on the non-null branch of an optional one) and a sentence naming the
    ``serve`` option that sets it; the body limit goes in the API's description.
    The server enforces the same figures itself (422 LimitExceeded, 413).
    """
    models = schema.get("components", {}).get("schemas", {})
    for name, places in _LIMITED.items():
        value = getattr(limits, name)
        for model, prop, keyword in places:
            found = models.get(model, {}).get("properties", {}).get(prop)
            if found is None:
                continue
            wanted = {"maximum": ("integer",), "maxItems": ("array",), "maxLength": ("string",)}.get(
                keyword, ("object",)
            )
            branches = found.get("anyOf", [found])
            for branch in branches:
                if branch.get("type") in wanted:
                    branch[keyword] = value
            said = found.get("description", "")
            option = "--" + name.replace("_", "-")
            found["description"] = (said + "; " if said else "") + f"at most {value} here (serve {option})"
    info = schema.setdefault("info", {})
    info["description"] = (
        f"Request bodies over {limits.max_body_bytes} bytes are refused with 413 (serve --max-body-bytes); "
        "every other limit is stated on its field, and a request over one is refused with 422 LimitExceeded."
    )
