"""Field indexes: one segment's :attr:`Document.fields`, laid out for filtering.

A segment keeps, for every field any of its documents has:

* **keyword** fields (``str`` values): a sorted dictionary of the values, and
  for each value the ascending local ids of the documents holding it (an id
  list; equality and ``in`` are binary searches in the dictionary, then a slice);
* **number** fields (``int``/``float``, compared as float64) and **boolean**
  fields (``False``/``True`` as 0/1): the values sorted ascending with the id of
  each (ties by id), so a range is two binary searches and a slice;
* **keyword-list** and **number-list** fields (a list of strings, or of numbers):
  laid out as keyword and number fields, except that a document appears once
  under each distinct value it holds, so it may appear under several values
  (duplicates within one document's list count once; an empty list is no value).

All of it lives in eight sections of the segment file (docs/FORMAT.md, "Field
indexes"), whatever the number of fields, each checksummed like every section.
:meth:`FieldIndex.from_sections` checks the structure (offsets monotone and in
bounds, dictionaries strictly increasing, ids in range and ascending within a
value) before any of it is used, and scrub checks it again.

Why id lists and not compressed bitmaps (pyroaring): a filter is evaluated once
per query into one boolean mask over the segment, so what counts is the cost
of turning a value's documents into that mask; numpy's fancy assignment from a
uint32 slice of the memory map needs no copy and no decoding, and the lists
take 4 bytes per (document, field) pair. This module knows nothing of scoring.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from weftsearch._numbers import number_text
from weftsearch.documents import MAX_LIST_VALUES, Document
from weftsearch.errors import CorruptIndexError, FieldTypeError

__all__ = [
    "FieldIndex",
    "FIELD_KINDS",
    "FIELD_SECTIONS",
    "LIST_KINDS",
    "MAX_LIST_VALUES",
    "check_field_types",
    "field_kind",
    "is_field_value",
]

#: The field types a segment records, by code (the ``fld.kinds`` section).
FIELD_KINDS = ("keyword", "number", "boolean", "keyword-list", "number-list")

#: The list kinds, each with the kind of its elements (what a filter value compares as).
LIST_KINDS = {"keyword-list": "keyword", "number-list": "number"}


#: The section names and dtypes of the field index (see docs/FORMAT.md).
FIELD_SECTIONS = {
    "fld.names": "|u1",  # field names, UTF-8, concatenated in sorted order
    "fld.name_offsets": "<u8",  # F + 1 offsets into fld.names
    "fld.kinds": "|u1",  # F codes into FIELD_KINDS
    "fld.kw_start": "<u8",  # F + 1: each field's range of dictionary entries
    "fld.kw_values": "|u1",  # dictionary values, UTF-8, concatenated
    "fld.kw_value_offsets": "<u8",  # V + 1 offsets into fld.kw_values
    "fld.kw_id_offsets": "<u8",  # V + 1 offsets into fld.kw_ids
    "fld.kw_ids": "<u4",  # local ids per dictionary value, ascending
    "fld.num_start": "<u8",  # F + 1: each field's range of fld.num_values
    "fld.num_values": "<f8",  # values per field, ascending
    "fld.num_ids": "<u4",  # the local id of each value (ties by id)
}

#: Integers beyond this magnitude would compare inexactly once stored as float64.
_EXACT_FLOAT = 2.0**53


def field_kind(value: object) -> str | None:
    """The field type a value makes, or ``None`` (another type, or an empty list). O(1) for a scalar.

    ``keyword``, ``number``, ``boolean`` for a scalar; ``keyword-list`` for a
    non-empty list or tuple of str, ``number-list`` for one of int/float (not
    bool), ``None`` for a list mixing them or holding anything else, and for
    an empty list (it holds no value, so it makes no type: see
    :func:`is_field_value`). O(len) for a list.
    """
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return "keyword"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, (list, tuple)) and value:
        if all(isinstance(v, str) for v in value):
            return "keyword-list"
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            return "number-list"
    return None


def is_field_value(value: object) -> bool:
    """Whether ``value`` may be a stored field value: one :func:`field_kind` knows, or an empty list."""
    return field_kind(value) is not None or (isinstance(value, (list, tuple)) and not value)


def _number(value: object) -> float:
    # The range check comes first: float() of an integer past float64 is an OverflowError,
    # and one of more than 4,300 digits cannot even be printed (ValueError).
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _EXACT_FLOAT:
        raise FieldTypeError(
            f"integer field value {number_text(value)} is beyond 2**53: it would compare inexactly as float64"
        )
    return float(value)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class _Keyword:
    values: list[str]  # sorted
    id_offsets: NDArray[np.uint64]  # len(values) + 1, relative to ids
    ids: NDArray[np.uint32]


@dataclass(frozen=True, slots=True)
class _Numbers:
    values: NDArray[np.float64]  # ascending
    ids: NDArray[np.uint32]


class FieldIndex:
    """The field indexes of one segment (see the module docstring). Immutable, thread-safe.

    Build with :meth:`build` (the writer) or read with :meth:`from_sections`
    (a segment reader); :meth:`sections` gives what the writer stores.
    """

    __slots__ = ("_keyword", "_kinds", "_numbers", "n_docs")

    def __init__(
        self, n_docs: int, kinds: dict[str, str], keyword: dict[str, _Keyword], numbers: dict[str, _Numbers]
    ) -> None:
        self.n_docs = n_docs
        self._kinds = kinds
        self._keyword = keyword
        self._numbers = numbers

    # ------------------------------------------------------------------ build

    @classmethod
    def build(cls, fields: Sequence[Mapping[str, Any]], kinds: Mapping[str, str] | None = None) -> FieldIndex:
        """Index ``fields`` (one mapping per local id, in id order).

        ``kinds``: field types already fixed (by the index); a value of another
        type is refused. O(total values * log).

        Raises:
            FieldTypeError: a field holds two types, or another type than ``kinds`` says,
                naming the field and the document position.

        """
        fixed: dict[str, str] = dict(kinds or {})
        keyword_docs: dict[str, dict[str, list[int]]] = {}
        number_docs: dict[str, tuple[list[float], list[int]]] = {}
        seen: dict[str, str] = {}
        for doc, mapping in enumerate(fields):
            for name, value in mapping.items():
                if isinstance(value, (list, tuple)) and not value:
                    continue  # an empty list holds no value (and fixes no type)
                kind = field_kind(value)
                if kind is None:
                    raise FieldTypeError(f"document {doc}: field {name!r} holds a {type(value).__name__}")
                want = seen.get(name) or fixed.get(name)
                if want is not None and want != kind:
                    raise FieldTypeError(
                        f"field {name!r} holds {want} values; document {doc} gives it {value!r}, a {kind} "
                        "(a field's type is fixed by the first document that has it)"
                    )
                seen[name] = kind
                if kind == "keyword":
                    keyword_docs.setdefault(name, {}).setdefault(value, []).append(doc)
                elif kind == "keyword-list":
                    by_value = keyword_docs.setdefault(name, {})
                    for item in dict.fromkeys(value):  # once per distinct value, in order
                        by_value.setdefault(item, []).append(doc)
                elif kind == "number-list":
                    values, docs = number_docs.setdefault(name, ([], []))
                    for item in dict.fromkeys(_number(v) for v in value):  # 1 and 1.0 are one value
                        values.append(item)
                        docs.append(doc)
                else:
                    values, docs = number_docs.setdefault(name, ([], []))
                    values.append(_number(value))
                    docs.append(doc)
        keyword = {}
        for name, by_value in keyword_docs.items():
            ordered = sorted(by_value)
            counts = np.array([len(by_value[v]) for v in ordered], dtype=np.uint64)
            offsets = np.zeros(len(ordered) + 1, dtype=np.uint64)
            np.cumsum(counts, out=offsets[1:])
            ids = np.array([d for v in ordered for d in by_value[v]], dtype=np.uint32)
            keyword[name] = _Keyword(ordered, offsets, ids)
        numbers = {}
        for name, (values, docs) in number_docs.items():
            value_array = np.array(values, dtype=np.float64)
            id_array = np.array(docs, dtype=np.uint32)
            order = np.lexsort((id_array, value_array))
            numbers[name] = _Numbers(value_array[order], id_array[order])
        return cls(len(fields), seen, keyword, numbers)

    @classmethod
    def merge(cls, parts: Sequence[tuple[FieldIndex, NDArray[np.int64]]], n_docs: int) -> FieldIndex:
        """The field index of a merged segment: each part's ids renumbered through its map.

        ``parts``: (field index, new local id of each old local id, ``-1`` for
        a document the merge drops). Equal to :meth:`build` over the merged
        documents' fields (tested), without decoding a stored record: O(total
        values * log) in numpy, plus one Python step per distinct keyword value.

        Raises:
            FieldTypeError: two parts give one field different types.

        """
        kinds: dict[str, str] = {}
        for index, _ in parts:
            for name, kind in index._kinds.items():
                if kinds.setdefault(name, kind) != kind:
                    raise FieldTypeError(
                        f"field {name!r} is {kinds[name]} in one segment and {kind} in another"
                    )
        keyword: dict[str, _Keyword] = {}
        numbers: dict[str, _Numbers] = {}
        for name, kind in kinds.items():
            if kind in ("keyword", "keyword-list"):
                by_value: dict[str, list[NDArray[np.int64]]] = {}
                for index, new_ids in parts:
                    own = index._keyword.get(name)
                    if own is None:
                        continue
                    for position, value in enumerate(own.values):
                        ids = new_ids[
                            own.ids[int(own.id_offsets[position]) : int(own.id_offsets[position + 1])]
                        ]
                        ids = ids[ids >= 0]
                        if ids.shape[0]:
                            by_value.setdefault(value, []).append(ids)
                if not by_value:
                    continue
                ordered = sorted(by_value)
                runs = [np.sort(np.concatenate(by_value[value])) for value in ordered]
                offsets = np.zeros(len(ordered) + 1, dtype=np.uint64)
                np.cumsum([run.shape[0] for run in runs], out=offsets[1:])
                keyword[name] = _Keyword(ordered, offsets, np.concatenate(runs).astype(np.uint32))
            else:
                value_parts = []
                id_parts = []
                for index, new_ids in parts:
                    own_numbers = index._numbers.get(name)
                    if own_numbers is None:
                        continue
                    renumbered = new_ids[own_numbers.ids]
                    keep = renumbered >= 0
                    value_parts.append(own_numbers.values[keep])
                    id_parts.append(renumbered[keep])
                if not value_parts:
                    continue
                values = np.concatenate(value_parts)
                ids = np.concatenate(id_parts)
                if not values.shape[0]:
                    continue
                order = np.lexsort((ids, values))
                numbers[name] = _Numbers(values[order].astype(np.float64), ids[order].astype(np.uint32))
        present = {name: kind for name, kind in kinds.items() if name in keyword or name in numbers}
        return cls(n_docs, present, keyword, numbers)

    # ------------------------------------------------------------------ storage

    def sections(self) -> dict[str, NDArray[Any]]:
        """The sections :data:`FIELD_SECTIONS` names, for the segment file. Deterministic."""
        names = sorted(self._kinds)
        name_blob, name_offsets = _blob(names)
        kinds = np.array([FIELD_KINDS.index(self._kinds[n]) for n in names], dtype=np.uint8)
        kw_start = np.zeros(len(names) + 1, dtype=np.uint64)
        num_start = np.zeros(len(names) + 1, dtype=np.uint64)
        values: list[str] = []
        id_offsets = [np.zeros(1, dtype=np.uint64)]
        ids: list[NDArray[np.uint32]] = []
        number_values: list[NDArray[np.float64]] = []
        number_ids: list[NDArray[np.uint32]] = []
        id_base = 0
        for position, name in enumerate(names):
            keyword = self._keyword.get(name)
            numbers = self._numbers.get(name)
            if keyword is not None:
                values.extend(keyword.values)
                id_offsets.append(keyword.id_offsets[1:] + np.uint64(id_base))
                ids.append(keyword.ids)
                id_base += int(keyword.ids.shape[0])
            if numbers is not None:
                number_values.append(numbers.values)
                number_ids.append(numbers.ids)
            kw_start[position + 1] = len(values)
            num_start[position + 1] = num_start[position] + (
                0 if numbers is None else numbers.values.shape[0]
            )
        value_blob, value_offsets = _blob(values)
        return {
            "fld.names": name_blob,
            "fld.name_offsets": name_offsets,
            "fld.kinds": kinds,
            "fld.kw_start": kw_start,
            "fld.kw_values": value_blob,
            "fld.kw_value_offsets": value_offsets,
            "fld.kw_id_offsets": np.concatenate(id_offsets),
            "fld.kw_ids": np.concatenate(ids) if ids else np.zeros(0, dtype=np.uint32),
            "fld.num_start": num_start,
            "fld.num_values": np.concatenate(number_values) if number_values else np.zeros(0, np.float64),
            "fld.num_ids": np.concatenate(number_ids) if number_ids else np.zeros(0, dtype=np.uint32),
        }

    @classmethod
    def from_sections(cls, array: Callable[[str], NDArray[Any]], n_docs: int, where: str) -> FieldIndex:
        """Read the field index back through ``array(name)`` (a checked section), validating it.

        O(total values). Raises :class:`CorruptIndexError` naming ``where``
        and what is wrong, never a wrong filter result.
        """

        def corrupt(what: str) -> CorruptIndexError:
            return CorruptIndexError(f"{where}: field index: {what}")

        def checked(name: str) -> NDArray[Any]:
            try:
                found = array(name)
            except KeyError:
                raise corrupt(f"section {name} is missing") from None
            want = np.dtype(FIELD_SECTIONS[name])
            if (
                found.ndim != 1
                or found.dtype.str.lstrip("<>|=") != want.str.lstrip("<>|=")
                or (found.dtype.itemsize > 1 and found.dtype.str[0] != want.str[0])
            ):
                raise corrupt(f"section {name} is {found.dtype}, not {want}")
            return found

        names = _strings(checked("fld.names"), checked("fld.name_offsets"), "field names", corrupt)
        if any(a >= b for a, b in itertools.pairwise(names)):
            raise corrupt("field names are not strictly increasing")
        kind_codes = checked("fld.kinds")
        kw_start = checked("fld.kw_start")
        num_start = checked("fld.num_start")
        count = len(names)
        if kind_codes.shape[0] != count or kw_start.shape[0] != count + 1 or num_start.shape[0] != count + 1:
            raise corrupt("the per-field tables disagree on the number of fields")
        if count and int(kind_codes.max()) >= len(FIELD_KINDS):
            raise corrupt("unknown field kind code")
        values = _strings(
            checked("fld.kw_values"), checked("fld.kw_value_offsets"), "keyword values", corrupt
        )
        id_offsets = checked("fld.kw_id_offsets")
        kw_ids = checked("fld.kw_ids")
        num_values = checked("fld.num_values")
        num_ids = checked("fld.num_ids")
        _monotone(kw_start, len(values), "fld.kw_start", corrupt)
        _monotone(num_start, num_values.shape[0], "fld.num_start", corrupt)
        if id_offsets.shape[0] != len(values) + 1:
            raise corrupt("fld.kw_id_offsets has the wrong length")
        _monotone(id_offsets, kw_ids.shape[0], "fld.kw_id_offsets", corrupt)
        if num_ids.shape[0] != num_values.shape[0]:
            raise corrupt("fld.num_ids and fld.num_values differ in length")
        for ids, what in ((kw_ids, "fld.kw_ids"), (num_ids, "fld.num_ids")):
            if ids.shape[0] and int(ids.max()) >= n_docs:
                raise corrupt(f"{what} names a document past the segment's {n_docs}")
        if np.isnan(num_values).any():
            raise corrupt("a number value is NaN")
        kinds: dict[str, str] = {}
        keyword: dict[str, _Keyword] = {}
        numbers: dict[str, _Numbers] = {}
        starts = kw_start.tolist()
        num_bounds = num_start.tolist()
        offsets = id_offsets.tolist()
        for position, name in enumerate(names):
            kind = FIELD_KINDS[int(kind_codes[position])]
            kinds[name] = kind
            first, last = starts[position], starts[position + 1]
            low, high = num_bounds[position], num_bounds[position + 1]
            if kind in ("keyword", "keyword-list"):
                if low != high:
                    raise corrupt(f"{kind} field {name!r} has number values")
                if first == last:
                    raise corrupt(f"{kind} field {name!r} has no values")
                own = values[first:last]
                if any(a >= b for a, b in itertools.pairwise(own)):
                    raise corrupt(f"the values of field {name!r} are not strictly increasing")
                base = offsets[first]
                ids = kw_ids[base : offsets[last]]
                relative = id_offsets[first : last + 1] - np.uint64(base)
                for a, b in itertools.pairwise(relative.tolist()):
                    if a == b or (b - a > 1 and bool(np.any(ids[a + 1 : b] <= ids[a : b - 1]))):
                        raise corrupt(f"the ids of a value of field {name!r} are empty or not ascending")
                if kind == "keyword" and ids.shape[0] and int(np.bincount(ids.astype(np.int64)).max()) > 1:
                    raise corrupt(f"a document holds two values of field {name!r}")
                keyword[name] = _Keyword(own, relative, ids)
            else:
                if first != last:
                    raise corrupt(f"{kind} field {name!r} has keyword values")
                if low == high:
                    raise corrupt(f"{kind} field {name!r} has no values")
                own_values = num_values[low:high]
                own_ids = num_ids[low:high]
                if own_values.shape[0] > 1:
                    later = own_values[1:]
                    earlier = own_values[:-1]
                    if bool(np.any((later < earlier) | ((later == earlier) & (own_ids[1:] <= own_ids[:-1])))):
                        raise corrupt(f"the values of field {name!r} are not in (value, id) order")
                # A list field's document appears once per distinct value: the (value, id)
                # order above is strict, so a pair appears at most once.
                if kind != "number-list" and np.unique(own_ids).shape[0] != own_ids.shape[0]:
                    raise corrupt(f"a document holds two values of field {name!r}")
                if kind == "boolean" and bool(np.any((own_values != 0.0) & (own_values != 1.0))):
                    raise corrupt(f"boolean field {name!r} holds a value other than 0 and 1")
                numbers[name] = _Numbers(own_values, own_ids)
        return cls(n_docs, kinds, keyword, numbers)

    def disagreements(self, derived: FieldIndex) -> list[str]:
        """How this index differs from ``derived`` (built from the stored records), one line per field.

        Scrub's re-derivation (:meth:`SegmentReader.verify
        <weftsearch.storage.segment.SegmentReader.verify>`): a field index whose
        every section passes its checksum can still disagree with the records
        it was built from (a re-checksummed edit, a writer bug), and a filter
        would then match the wrong documents. Empty when they agree exactly.
        O(total values).
        """
        found = []
        for name in sorted(set(self._kinds) | set(derived._kinds)):
            mine, theirs = self._kinds.get(name), derived._kinds.get(name)
            if mine != theirs:
                found.append(
                    f"field {name!r} is {mine or 'absent'} here, {theirs or 'absent'} in the records"
                )
                continue
            if mine in ("keyword", "keyword-list"):
                a, b = self._keyword[name], derived._keyword[name]
                same = (
                    a.values == b.values
                    and np.array_equal(a.id_offsets, b.id_offsets)
                    and np.array_equal(a.ids, b.ids)
                )
                if not same:
                    found.append(f"the values or documents of {mine} field {name!r} differ from the records")
            else:
                x, y = self._numbers[name], derived._numbers[name]
                if x.values.shape != y.values.shape:
                    found.append(
                        f"field {name!r} has {x.values.shape[0]} values, the records {y.values.shape[0]}"
                    )
                elif not (np.array_equal(x.values, y.values) and np.array_equal(x.ids, y.ids)):
                    wrong = int(np.count_nonzero((x.values != y.values) | (x.ids != y.ids)))
                    found.append(
                        f"{wrong} of the {x.values.shape[0]} values of field {name!r} differ from the records"
                    )
        return found

    # ------------------------------------------------------------------ reading

    def kinds(self) -> dict[str, str]:
        """Field name -> type, for the fields this segment's documents have."""
        return dict(self._kinds)

    def present(self, name: str) -> NDArray[np.uint32]:
        """Ids of the documents that have field ``name`` (any order; a list field's may repeat). O(values)."""
        keyword = self._keyword.get(name)
        if keyword is not None:
            return keyword.ids
        numbers = self._numbers.get(name)
        return numbers.ids if numbers is not None else np.zeros(0, dtype=np.uint32)

    def equal(self, name: str, value: object) -> NDArray[np.uint32]:
        """Ids of the documents whose field ``name`` equals ``value``. O(log values + matches).

        For a list field: the documents whose list holds ``value`` (each once).
        """
        kind = self._kinds.get(name)
        if kind is None:
            return np.zeros(0, dtype=np.uint32)
        kind = LIST_KINDS.get(kind, kind)
        if field_kind(value) != kind:
            return np.zeros(0, dtype=np.uint32)
        if kind == "keyword":
            keyword = self._keyword[name]
            at = bisect.bisect_left(keyword.values, str(value))
            if at == len(keyword.values) or keyword.values[at] != value:
                return np.zeros(0, dtype=np.uint32)
            return keyword.ids[int(keyword.id_offsets[at]) : int(keyword.id_offsets[at + 1])]
        return self.between(name, _number(value), True, _number(value), True)

    def between(
        self, name: str, low: float | None, low_inclusive: bool, high: float | None, high_inclusive: bool
    ) -> NDArray[np.uint32]:
        """Ids of the documents whose number (or boolean) field lies in the range. O(log n + matches).

        For a number-list field: the documents holding a value in the range, once per such value.
        """
        numbers = self._numbers.get(name)
        if numbers is None:
            return np.zeros(0, dtype=np.uint32)
        start = 0
        stop = numbers.values.shape[0]
        if low is not None:
            start = int(np.searchsorted(numbers.values, low, side="left" if low_inclusive else "right"))
        if high is not None:
            stop = int(np.searchsorted(numbers.values, high, side="right" if high_inclusive else "left"))
        return numbers.ids[start:stop] if start < stop else np.zeros(0, dtype=np.uint32)

    def value_counts(
        self, name: str, mask: NDArray[np.bool_]
    ) -> tuple[list[str] | NDArray[np.float64], NDArray[np.int64]]:
        """The distinct values of field ``name`` the documents ``mask`` selects hold, and how many hold each.

        ``mask``: one bool per local id. Only values held by at least one
        selected document are returned, in the field's value order (keyword
        values as str, numbers and booleans as float64); a list field's
        document counts once per distinct value of its list. Vectorised: one
        gather of the mask over the field's id runs and a cumulative sum (or a
        run-length count over the sorted number values); no step per document.
        Memory: about 9 bytes per (document, value) entry of the field in this
        segment, plus the returned arrays.
        """
        keyword = self._keyword.get(name)
        if keyword is not None:
            selected = mask[keyword.ids]
            running = np.zeros(selected.shape[0] + 1, dtype=np.int64)
            np.cumsum(selected, out=running[1:])
            offsets = keyword.id_offsets.astype(np.intp)
            counts = running[offsets[1:]] - running[offsets[:-1]]
            held = np.flatnonzero(counts)
            return [keyword.values[i] for i in held.tolist()], counts[held]
        numbers = self._numbers.get(name)
        if numbers is None:
            return [], np.zeros(0, dtype=np.int64)
        values = numbers.values[mask[numbers.ids]]  # still ascending
        if not values.shape[0]:
            return np.zeros(0, dtype=np.float64), np.zeros(0, dtype=np.int64)
        starts = np.flatnonzero(np.concatenate(([True], values[1:] != values[:-1])))
        counts = np.diff(np.concatenate((starts, [values.shape[0]]))).astype(np.int64)
        return values[starts], counts


def _blob(strings: Sequence[str]) -> tuple[NDArray[np.uint8], NDArray[np.uint64]]:
    encoded = [s.encode("utf-8") for s in strings]
    offsets = np.zeros(len(encoded) + 1, dtype=np.uint64)
    if encoded:
        np.cumsum([len(e) for e in encoded], out=offsets[1:])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8).copy(), offsets


def _monotone(
    offsets: NDArray[Any], end: int, what: str, corrupt: Callable[[str], CorruptIndexError]
) -> None:
    if offsets.shape[0] == 0 or int(offsets[0]) != 0 or int(offsets[-1]) != end:
        raise corrupt(f"{what} does not run from 0 to {end}")
    if offsets.shape[0] > 1 and bool(np.any(offsets[1:] < offsets[:-1])):
        raise corrupt(f"{what} goes backwards")


def _strings(
    blob: NDArray[np.uint8],
    offsets: NDArray[np.uint64],
    what: str,
    corrupt: Callable[[str], CorruptIndexError],
) -> list[str]:
    _monotone(offsets, blob.shape[0], f"the offsets of the {what}", corrupt)
    raw = blob.tobytes()
    bounds = offsets.tolist()
    try:
        return [raw[a:b].decode("utf-8") for a, b in itertools.pairwise(bounds)]
    except UnicodeDecodeError:
        raise corrupt(f"one of the {what} is not valid UTF-8") from None


def first_type_only(fields: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``fields`` without the values whose type differs from the field's first one."""
    first: dict[str, str | None] = {}
    kept = []
    for mapping in fields:
        own = {}
        for name, value in mapping.items():
            kind = first.setdefault(name, field_kind(value))
            inexact = isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**53
            if field_kind(value) == kind and kind is not None and not inexact:
                own[name] = value
        kept.append(own)
    return kept


def check_field_types(document: Document, kinds: dict[str, str]) -> None:
    """Refuse a field value whose type differs from the field's; record new fields in ``kinds``.

    ``kinds`` (field name -> kind, :data:`FIELD_KINDS`) is the whole index's:
    a field's kind is fixed by the first document that has it. New fields are
    added to it in place as they are met.

    Raises:
        FieldTypeError: a value of another kind than its field's, an empty
            list for a scalar field, or an integer beyond 2**53 (it would
            compare inexactly once stored as float64).

    """
    for name, value in document.fields.items():
        if isinstance(value, (list, tuple)) and not value:
            # No value, so no type to fix; but a scalar field stays scalar for the whole index.
            fixed_kind = kinds.get(name)
            if fixed_kind is not None and fixed_kind not in LIST_KINDS:
                raise FieldTypeError(
                    f"document {document.key!r}: field {name!r} holds {fixed_kind} values in this "
                    "index; an empty list is a list (a field is a list field or a scalar one for the "
                    "whole index)"
                )
            continue
        kind = field_kind(value)
        if kind is None:  # Document validation refuses these first; kept as a second guard
            raise FieldTypeError(f"document {document.key!r}: field {name!r} holds a {type(value).__name__}")
        if kind == "number" and isinstance(value, int) and abs(value) > _EXACT_FLOAT:
            raise FieldTypeError(
                f"document {document.key!r}: field {name!r} = {value} is beyond 2**53 and would "
                "compare inexactly (store it as a string)"
            )
        fixed = kinds.setdefault(name, kind)
        if fixed != kind:
            raise FieldTypeError(
                f"document {document.key!r}: field {name!r} holds {fixed} values in this index; "
                f"{value!r} is a {kind} (a field's type is fixed by the first document that has it)"
            )
