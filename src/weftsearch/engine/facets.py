"""Facets: how many of the documents a query matches hold each value of a field.

``Index.facets``, ``search(..., facets=[...])``, the CLI's ``--facets``, the
server's ``facets`` and the sharded index all count here (docs/ARCHITECTURE.md,
"Facets"). Counts are exact: over every live document the filter matches (or
over a ranking's top N hits), each document counted once per distinct value it
holds (a list field's document once under each of its values). A field's values
are ordered by count descending, then value ascending, and cut to ``k``.

Faceted fields: keyword, boolean, number (each distinct value, integral ones as
``int``) and the list kinds. The work per segment is vectorised in
:meth:`~weftsearch.storage.fields.FieldIndex.value_counts`; the only Python
steps are one per distinct value held by a matching document (to add counts
across segments), never one per document. Memory: one byte per document of a
segment for its mask, about 9 bytes per (document, value) entry of the field in
the largest segment, and one entry per distinct matching value.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from typing import Union

import numpy as np
from numpy.typing import NDArray

from weftsearch.engine.filters import TIME_FIELD
from weftsearch.engine.snapshot import Snapshot
from weftsearch.errors import InvalidParameterError, UnknownFieldError

__all__ = [
    "FacetCounts",
    "FacetValue",
    "Facets",
    "MAX_FACET_FIELDS",
    "MAX_FACET_K",
    "check_facet_fields",
    "check_facet_k",
    "count_facets",
    "add_facet_counts",
    "facets_to_json",
    "snapshot_facets",
    "top_facets",
]

#: A value a facet counts: a keyword, a number (``int`` when integral) or a boolean.
FacetValue = Union[str, int, float, bool]
#: Field -> its top values with their counts, count descending then value ascending.
Facets = dict[str, list[tuple[FacetValue, int]]]
#: Field -> every counted value with its count (what shards add up before the cut to k).
FacetCounts = dict[str, dict[FacetValue, int]]

#: Most fields one request may facet on.
MAX_FACET_FIELDS = 32
#: Most values returned per field.
MAX_FACET_K = 10_000


def check_facet_k(k: object) -> int:
    """``k`` if it is an int from 1 to :data:`MAX_FACET_K`, else :class:`InvalidParameterError`."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_FACET_K:
        raise InvalidParameterError(f"facet k must be an integer from 1 to {MAX_FACET_K}, got {k!r}")
    return k


def check_facet_fields(fields: object, kinds: Mapping[str, str]) -> tuple[str, ...]:
    """The facet field names, checked against the index's fields (``kinds``: name -> kind).

    Raises:
        InvalidParameterError: not a non-empty sequence of names (a single
            string is refused: ``["tags"]``, not ``"tags"``), more than
            :data:`MAX_FACET_FIELDS`, a name twice, or ``@time`` (a time is
            no facet: filter on ranges of it instead).
        UnknownFieldError: a field no document has (document text and vectors
            are not fields), with the known fields.

    """
    if isinstance(fields, (str, bytes)) or not isinstance(fields, Iterable):
        raise InvalidParameterError(f"facets takes a list of field names, got {fields!r}")
    names = tuple(fields)
    if not names:
        raise InvalidParameterError("facets takes at least one field name")
    if len(names) > MAX_FACET_FIELDS:
        raise InvalidParameterError(f"facets takes at most {MAX_FACET_FIELDS} fields, got {len(names)}")
    for name in names:
        if not isinstance(name, str) or not name:
            raise InvalidParameterError(f"a facet field is a non-empty str, got {name!r}")
        if name == TIME_FIELD:
            raise InvalidParameterError(
                f"{TIME_FIELD} cannot be a facet (each document has its own time); filter on a range of it"
            )
        if name not in kinds:
            known = ", ".join(sorted(kinds)[:20]) or "none"
            raise UnknownFieldError(
                f"no document has field {name!r} to facet on (fields: {known}; a document's text and "
                "vector are not fields)"
            )
    if len(set(names)) != len(names):
        raise InvalidParameterError(f"facets names a field twice: {list(names)!r}")
    return names


def count_facets(snapshot: Snapshot, mask: NDArray[np.bool_] | None, fields: Sequence[str]) -> FacetCounts:
    """Every value of each field in ``fields`` with the number of selected live documents holding it.

    ``mask``: over the snapshot's internal ids (live documents), ``None`` for
    all of them. ``fields`` must be checked already (:func:`check_facet_fields`).
    Exact; see the module docstring for the cost.
    """
    kinds = snapshot.field_kinds()
    counts: FacetCounts = {name: {} for name in fields}
    for part in snapshot.parts:
        reader = part.reader
        local = np.zeros(reader.n_docs, dtype=np.bool_)
        local[part.live_locals] = True if mask is None else mask[part.base : part.base + part.n_live]
        if not local.any():
            continue
        index = reader.field_index()
        for name in fields:
            values, found = index.value_counts(name, local)
            into = counts[name]
            for value, count in zip(_python_values(values, kinds.get(name, "")), found.tolist(), strict=True):
                into[value] = into.get(value, 0) + count
    return counts


def _python_values(values: list[str] | NDArray[np.float64], kind: str) -> list[FacetValue]:
    if isinstance(values, list):
        return list(values)
    if kind == "boolean":
        return [value != 0.0 for value in values.tolist()]
    return [int(value) if value.is_integer() else value for value in values.tolist()]


def add_facet_counts(parts: Iterable[FacetCounts]) -> FacetCounts:
    """The sum of several :func:`count_facets` results (the shards of one collection). O(values)."""
    total: FacetCounts = {}
    for part in parts:
        for name, values in part.items():
            into = total.setdefault(name, {})
            for value, count in values.items():
                into[value] = into.get(value, 0) + count
    return total


def top_facets(counts: FacetCounts, k: int) -> Facets:
    """Each field's ``k`` values of highest count (ties: value ascending). O(values log k)."""
    return {
        name: heapq.nsmallest(k, values.items(), key=lambda item: (-item[1], item[0]))
        for name, values in counts.items()
    }


def snapshot_facets(
    snapshot: Snapshot, mask: NDArray[np.bool_] | None, fields: Sequence[str], k: int
) -> Facets:
    """:func:`top_facets` of :func:`count_facets`, after checking ``fields`` and ``k``."""
    names = check_facet_fields(fields, snapshot.field_kinds())
    return top_facets(count_facets(snapshot, mask, names), check_facet_k(k))


def facets_to_json(facets: Facets) -> dict[str, list[dict[str, FacetValue | int]]]:
    """``facets`` as JSON-ready data: field -> ``[{"value": v, "count": n}, ...]`` in order."""
    return {
        name: [{"value": value, "count": count} for value, count in pairs] for name, pairs in facets.items()
    }
