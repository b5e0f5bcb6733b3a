"""Highlighting: where a stored text matched a query, as bounded snippets with the matches marked.

A query is given as *units*: tuples of analysed terms, a plain term a 1-tuple
and a phrase the tuple of its consecutive terms (:func:`query_units` builds
them from query text, or from a parsed query tree). The stored text is
analysed with its field's analyzer (``tokens()``, see
:class:`~weftsearch.analysis.TokenizingAnalyzer`), so a unit matches exactly
where search would match it: ``running`` marks ``runs`` under the ``english``
analyzer. A phrase matches where its terms are consecutive terms of the text
(a stopword between them takes no position, as in search).

The work per text is bounded: at most :attr:`HighlightOptions.max_analyzed_chars`
characters (default :data:`MAX_ANALYZED_CHARS`, 100,000, as Elasticsearch's
``index.highlight.max_analyzed_offset`` bounds its highlighter) are analysed,
and matches past them are not marked (:attr:`FieldHighlight.truncated` says
so). Each snippet is at most about ``fragment_size`` characters (a fragment is
widened only to hold a whole phrase match), and at most
``number_of_fragments`` are returned, best first: most distinct units matched,
then earliest. Offsets are Python string (code point) offsets into the stored
text.

This module is pure computation: :meth:`weftsearch.Index.search` (``highlight=``)
reads the stored texts and calls it lazily, when a hit is first read.
"""

from __future__ import annotations

import bisect
import html
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from weftsearch.analysis import Analyzer, TokenizingAnalyzer
from weftsearch.errors import InvalidParameterError
from weftsearch.tokens import TokenArrays

__all__ = [
    "HighlightOptions",
    "Snippet",
    "FieldHighlight",
    "highlight_text",
    "query_units",
    "MAX_ANALYZED_CHARS",
    "MAX_FRAGMENT_SIZE",
    "MAX_FRAGMENTS",
    "DEFAULT_FIELD",
]

#: Characters of a stored text analysed for highlighting by default (the rest is not searched for matches).
MAX_ANALYZED_CHARS = 100_000
#: The largest ``fragment_size`` accepted.
MAX_FRAGMENT_SIZE = 10_000
#: The largest ``number_of_fragments`` accepted.
MAX_FRAGMENTS = 100
#: The default text field's name (``Document.text``).
DEFAULT_FIELD = "text"
#: The longest pre or post tag accepted.
_MAX_TAG = 100


def _positive_int(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidParameterError(f"{name} must be an int from {low} to {high}, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class HighlightOptions:
    """What to highlight and how (Elasticsearch's ``highlight`` request, in Python).

    Attributes:
        fields: the text fields to highlight, by name (``"text"`` is ``Document.text``).
        fragment_size: the length of a snippet in characters (1 to
            :data:`MAX_FRAGMENT_SIZE`); a snippet is widened only to hold a whole
            phrase match and narrowed to not cut words.
        number_of_fragments: the most snippets per field (0 to
            :data:`MAX_FRAGMENTS`); 0 returns the whole analysed text as one
            snippet, as Elasticsearch does.
        pre_tag: put before each match in :attr:`Snippet.marked`.
        post_tag: put after each match.
        escape_html: HTML-escape the text around and inside the marks (not the
            tags), as Elasticsearch's ``encoder: html``: then ``marked`` is safe
            to insert as HTML.
        max_analyzed_chars: the most characters of a text analysed (1 to
            10,000,000); see the module.

    """

    fields: tuple[str, ...] = (DEFAULT_FIELD,)
    fragment_size: int = 150
    number_of_fragments: int = 3
    pre_tag: str = "<em>"
    post_tag: str = "</em>"
    escape_html: bool = False
    max_analyzed_chars: int = MAX_ANALYZED_CHARS

    def __post_init__(self) -> None:
        fields = self.fields
        if isinstance(fields, str) or not isinstance(fields, Iterable):
            raise InvalidParameterError(f"highlight fields must be a sequence of field names, got {fields!r}")
        names = tuple(fields)
        if not names or not all(isinstance(name, str) and name for name in names):
            raise InvalidParameterError(f"highlight fields must be non-empty field names, got {fields!r}")
        object.__setattr__(self, "fields", tuple(dict.fromkeys(names)))
        _positive_int("fragment_size", self.fragment_size, 1, MAX_FRAGMENT_SIZE)
        _positive_int("number_of_fragments", self.number_of_fragments, 0, MAX_FRAGMENTS)
        _positive_int("max_analyzed_chars", self.max_analyzed_chars, 1, 10_000_000)
        for name in ("pre_tag", "post_tag"):
            tag = getattr(self, name)
            if not isinstance(tag, str) or len(tag) > _MAX_TAG:
                raise InvalidParameterError(
                    f"{name} must be a string of at most {_MAX_TAG} characters, got {tag!r}"
                )
        if not isinstance(self.escape_html, bool):
            raise InvalidParameterError(f"escape_html must be True or False, got {self.escape_html!r}")


@dataclass(frozen=True, slots=True)
class Snippet:
    """One fragment of a stored text with its matches.

    Attributes:
        start: where the fragment starts in the stored text (code point offset).
        end: where it ends (exclusive).
        text: the fragment as stored, unmarked (``stored[start:end]``): with
            :attr:`spans` a client can mark it itself (offsets minus ``start``).
        spans: the matches inside it, as ``(start, end)`` offsets in the stored
            text, in order and not overlapping (overlapping matches are merged).
        marked: the fragment with each match between the tags (and escaped
            when :attr:`HighlightOptions.escape_html`).
        matched: how many distinct query units (terms, phrases) it holds.

    """

    start: int
    end: int
    text: str
    spans: tuple[tuple[int, int], ...]
    marked: str
    matched: int

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of this snippet."""
        return {
            "marked": self.marked,
            "text": self.text,
            "start": self.start,
            "end": self.end,
            "spans": [list(span) for span in self.spans],
            "matched": self.matched,
        }


@dataclass(frozen=True, slots=True)
class FieldHighlight:
    """The snippets of one field of one hit, best first, or why there are none.

    Attributes:
        field: the field's name.
        snippets: best first (most distinct units matched, then earliest).
        reason: ``None`` when there are snippets; else why not (no stored
            text, no match in the analysed text, ...).
        truncated: the text was longer than ``max_analyzed_chars``: matches past
            that were not looked for.

    """

    field: str
    snippets: tuple[Snippet, ...] = ()
    reason: str | None = None
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of this field's highlight."""
        return {
            "snippets": [snippet.to_dict() for snippet in self.snippets],
            "reason": self.reason,
            "truncated": self.truncated,
        }


@dataclass(slots=True)
class _Match:
    """A merged run of matched characters and the query units matched in it."""

    start: int
    end: int
    units: set[int] = field(default_factory=set)


def query_units(
    query: object, analyzer: Analyzer, field_name: str = DEFAULT_FIELD
) -> tuple[tuple[str, ...], ...]:
    """The units a query highlights in ``field_name``: each analysed term a 1-tuple, each phrase a tuple.

    ``query`` is query text (its terms, analysed with ``analyzer``), or a
    parsed query tree node (design of issue 29: ``TermNode(text, field)``,
    ``PhraseNode(terms, field)``, ``BoolNode(must, should, must_not)``),
    or an object with such a ``tree`` (a parsed ``Query``) or with ``text``
    (a plain ``Query``). Clauses of another field and ``must_not`` clauses
    highlight nothing. Distinct units, in first-seen order.
    """
    found: dict[tuple[str, ...], None] = {}
    _collect(query, analyzer, field_name, found, depth=0)
    return tuple(found)


def _collect(
    node: object, analyzer: Analyzer, field_name: str, found: dict[tuple[str, ...], None], depth: int
) -> None:
    """Add the units of ``node`` to ``found`` (a tree deeper than 256 adds nothing more)."""
    if depth > 256 or node is None:
        return
    if isinstance(node, str):
        for term in analyzer.analyze(node):
            found.setdefault((term,), None)
        return
    tree = getattr(node, "tree", None)
    if tree is not None:
        _collect(tree, analyzer, field_name, found, depth + 1)
        return
    node_field = getattr(node, "field", None)
    if node_field is not None and node_field != field_name:
        return
    if hasattr(node, "must") and hasattr(node, "should"):
        for child in (*getattr(node, "must", ()), *getattr(node, "should", ())):
            _collect(child, analyzer, field_name, found, depth + 1)
        return
    words = getattr(node, "terms", None)
    if isinstance(words, tuple) and all(isinstance(word, str) for word in words):
        phrase = tuple(analyzer.analyze(" ".join(words)))
        if phrase:
            found.setdefault(phrase, None)
        return
    text = getattr(node, "text", None)
    if isinstance(text, str):
        _collect(text, analyzer, field_name, found, depth + 1)


def _token_arrays(analyzer: TokenizingAnalyzer, text: str) -> TokenArrays:
    """``text``'s tokens as arrays: from the analyzer's ``token_arrays`` where it has one (compiled)."""
    token_arrays = getattr(analyzer, "token_arrays", None)
    if callable(token_arrays):
        arrays = token_arrays(text)
        if isinstance(arrays, TokenArrays):
            return arrays
    return TokenArrays.of_tokens(analyzer.tokens(text))


def _matches(arrays: TokenArrays, units: tuple[tuple[str, ...], ...]) -> list[_Match]:
    """Every occurrence of every unit in the tokens, merged where they overlap, in order.

    Terms are compared as numbers with numpy: the single terms in one pass
    (a table from term number to unit), each phrase by narrowing the
    positions of its first term with each next term. Only the merged
    matches become Python objects. O(tokens * phrases * phrase length).
    """
    numbers, ids = arrays.numbers, arrays.ids
    count = len(ids)
    unit_of = np.full(len(numbers), -1, dtype=np.int64)
    found_positions: list[NDArray[np.int64]] = []
    found_lengths: list[int] = []
    found_units: list[NDArray[np.int64]] = []
    for index, unit in enumerate(units):
        wanted = [numbers.get(term) for term in unit]
        if not wanted or None in wanted or len(unit) > count:
            continue
        if len(unit) == 1:
            unit_of[wanted[0]] = index
            continue
        positions = np.flatnonzero(ids[: count - len(unit) + 1] == wanted[0])
        for offset, number in enumerate(wanted[1:], start=1):
            positions = positions[ids[positions + offset] == number]
        if positions.size:
            found_positions.append(positions)
            found_lengths.append(len(unit))
            found_units.append(np.full(positions.size, index, dtype=np.int64))
    if count and len(numbers):
        single_units = unit_of[ids]
        single = np.flatnonzero(single_units >= 0)
        if single.size:
            found_positions.append(single)
            found_lengths.append(1)
            found_units.append(single_units[single])
    if not found_positions:
        return []
    starts = np.concatenate([arrays.starts[positions] for positions in found_positions])
    ends = np.concatenate(
        [
            arrays.ends[positions + length - 1]
            for positions, length in zip(found_positions, found_lengths, strict=True)
        ]
    )
    indexes = np.concatenate(found_units)
    # Sorted as (start, end, unit) tuples would be; a match opens a new merged run when it starts
    # at or after the furthest end so far.
    order = np.lexsort((indexes, ends, starts))
    starts, ends, indexes = starts[order], ends[order], indexes[order]
    reach = np.maximum.accumulate(ends)
    opens = np.flatnonzero(np.concatenate(([True], starts[1:] >= reach[:-1])))
    closes = np.append(opens[1:], starts.size)
    run_starts = starts[opens].tolist()
    run_ends = reach[closes - 1].tolist()
    unit_list = indexes.tolist()
    return [
        _Match(start, end, set(unit_list[first:last]))
        for start, end, first, last in zip(run_starts, run_ends, opens.tolist(), closes.tolist(), strict=True)
    ]


def _window(text: str, matches: list[_Match], first: int, size: int) -> tuple[int, int]:
    """A fragment of about ``size`` characters holding ``matches[first]``, cutting no word if it can."""
    anchor = matches[first]
    length = anchor.end - anchor.start
    # A little context before the match (a quarter of what the fragment leaves over).
    start = max(0, anchor.start - max(0, size - length) // 4)
    end = max(anchor.end, min(len(text), start + size))
    if end - start < size:  # near the end of the text: give the room to the context before
        start = max(0, min(start, end - size))
    # Do not cut a word: move the start past a partial word, the end back before one,
    # never past the anchor.
    if start > 0 and not text[start - 1].isspace():
        space = _next_space(text, start, anchor.start)
        start = space if space is not None else start
    if end < len(text) and not text[end].isspace():
        space = text.rfind(" ", anchor.end, end)
        end = space if space > anchor.end else end
    while start < anchor.start and text[start].isspace():
        start += 1
    while end > anchor.end and text[end - 1].isspace():
        end -= 1
    return start, end


def _next_space(text: str, start: int, limit: int) -> int | None:
    """The offset after the first whitespace in ``text[start:limit]``, or ``None``."""
    for offset in range(start, limit):
        if text[offset].isspace():
            return offset + 1
    return None


def _mark(text: str, start: int, end: int, spans: list[tuple[int, int]], options: HighlightOptions) -> str:
    """``text[start:end]`` with each span between the tags (escaped when asked)."""
    escape = html.escape if options.escape_html else str
    out: list[str] = []
    cursor = start
    for span_start, span_end in spans:
        out.append(escape(text[cursor:span_start]))
        out.append(options.pre_tag + escape(text[span_start:span_end]) + options.post_tag)
        cursor = span_end
    out.append(escape(text[cursor:end]))
    return "".join(out)


def highlight_text(
    text: str,
    units: Iterable[tuple[str, ...]],
    analyzer: TokenizingAnalyzer,
    options: HighlightOptions | None = None,
    field_name: str = DEFAULT_FIELD,
) -> FieldHighlight:
    """The best snippets of ``text`` for the query ``units`` (see the module for the rules).

    Args:
        text: the stored text of one field of one document.
        units: tuples of analysed terms (a term a 1-tuple, a phrase its terms in order).
        analyzer: the field's analyzer; it must have ``tokens()``.
        options: sizes and tags; ``HighlightOptions()`` when ``None``.
        field_name: the name reported in the result.

    Raises:
        InvalidParameterError: ``analyzer`` has no ``tokens()``, or a unit is not a tuple of strings.

    O(min(len(text), max_analyzed_chars) + matches * fragment_size).

    """
    options = HighlightOptions() if options is None else options
    if not isinstance(analyzer, TokenizingAnalyzer):
        raise InvalidParameterError(
            f"analyzer {getattr(analyzer, 'name', analyzer)!r} has no tokens(text): it cannot highlight"
        )
    wanted: dict[tuple[str, ...], None] = {}
    for unit in units:
        if not isinstance(unit, tuple) or not all(isinstance(term, str) for term in unit):
            raise InvalidParameterError(f"a highlight unit is a tuple of terms, got {unit!r}")
        if unit:
            wanted.setdefault(unit, None)
    if not text:
        return FieldHighlight(field_name, reason="the field is empty")
    truncated = len(text) > options.max_analyzed_chars
    analysed = text[: options.max_analyzed_chars]
    if truncated and not text[options.max_analyzed_chars].isspace():
        # Stop before a word cut in two: its first part could match a term it is not.
        boundary = max(analysed.rfind(space) for space in " \t\n\r")
        if boundary > 0:
            analysed = analysed[:boundary]
    if not wanted:
        return FieldHighlight(field_name, reason="the query has no terms for this field", truncated=truncated)
    matches = _matches(_token_arrays(analyzer, analysed), tuple(wanted))
    if not matches:
        reason = "no match in the analysed text" if truncated else "no match"
        return FieldHighlight(field_name, reason=reason, truncated=truncated)
    if options.number_of_fragments == 0:
        spans = [(m.start, m.end) for m in matches]
        units_seen = set().union(*(m.units for m in matches))
        marks = _mark(analysed, 0, len(analysed), spans, options)
        whole = Snippet(0, len(analysed), analysed, tuple(spans), marks, len(units_seen))
        return FieldHighlight(field_name, (whole,), truncated=truncated)
    candidates: list[tuple[int, int, int, int, int]] = []  # (-distinct, start, end, first, last)
    starts = [m.start for m in matches]
    seen: set[tuple[int, int]] = set()
    for anchor in range(len(matches)):
        start, end = _window(analysed, matches, anchor, options.fragment_size)
        if (start, end) in seen:
            continue
        seen.add((start, end))
        # The matches wholly inside the window: a run from the first that starts in it.
        first = last = bisect.bisect_left(starts, start)
        while last < len(matches) and matches[last].end <= end:
            last += 1
        distinct = len(set().union(*(m.units for m in matches[first:last])))
        candidates.append((-distinct, start, end, first, last))
    candidates.sort()
    chosen: list[tuple[int, int, int, int, int]] = []
    for candidate in candidates:
        if len(chosen) == options.number_of_fragments:
            break
        _, start, end, _, _ = candidate
        if all(end <= other[1] or start >= other[2] for other in chosen):
            chosen.append(candidate)
    snippets = []
    for negative, start, end, first, last in chosen:
        spans = [(m.start, m.end) for m in matches[first:last]]
        snippets.append(
            Snippet(
                start,
                end,
                analysed[start:end],
                tuple(spans),
                _mark(analysed, start, end, spans, options),
                -negative,
            )
        )
    return FieldHighlight(field_name, tuple(snippets), truncated=truncated)


def options_of(highlight: bool | HighlightOptions | None) -> HighlightOptions | None:
    """``HighlightOptions`` for a search's ``highlight=`` argument (``None`` when not asked).

    Raises:
        InvalidParameterError: neither a bool, ``None`` nor :class:`HighlightOptions`.

    """
    if highlight is None or highlight is False:
        return None
    if highlight is True:
        return HighlightOptions()
    if isinstance(highlight, HighlightOptions):
        return highlight
    raise InvalidParameterError(f"highlight must be True, False or HighlightOptions, got {highlight!r}")
