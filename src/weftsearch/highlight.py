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

A text's tokens come as arrays (:class:`~weftsearch.tokens.TokenArrays`;
compiled for the ``english`` analyzer), query terms are matched against them
with numpy, the fragments' windows are computed in C where built (numpy
otherwise), and only the chosen snippets become strings: the same snippets
as a word-by-word highlighter gives (tests/test_highlight_oracle.py keeps
one as the reference).

This module is pure computation: :meth:`weftsearch.Index.search` (``highlight=``)
reads the stored texts and calls it lazily, when a hit is first read.
"""

from __future__ import annotations

import functools
import html
import operator
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from weftsearch.analysis import Analyzer, TokenizingAnalyzer
from weftsearch.errors import InvalidParameterError
from weftsearch.native.loader import load_extension
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


@dataclass(frozen=True, slots=True)
class _Runs:
    """The merged runs of matched characters, in order, and the query units matched in each.

    ``masks[i]`` has bit ``u`` set when unit ``u`` matched in run ``i``; runs
    do not overlap, so both ``starts`` and ``ends`` ascend.
    """

    starts: NDArray[np.int64]
    ends: NDArray[np.int64]
    masks: list[int]


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


def _is_tokenizing(analyzer: object) -> bool:
    """``isinstance(analyzer, TokenizingAnalyzer)``, without typing's per-call cost where it holds.

    A runtime protocol's check is that each member is there and no method is
    ``None``; that is checked directly, and only when it fails is the full
    ``isinstance`` asked (it also accepts registered classes).
    """
    if (
        hasattr(analyzer, "name")
        and getattr(analyzer, "analyze", None) is not None
        and getattr(analyzer, "tokens", None) is not None
    ):
        return True
    return isinstance(analyzer, TokenizingAnalyzer)


def _token_arrays(analyzer: TokenizingAnalyzer, text: str) -> TokenArrays:
    """``text``'s tokens as arrays: from the analyzer's ``token_arrays`` where it has one (compiled)."""
    token_arrays = getattr(analyzer, "token_arrays", None)
    if callable(token_arrays):
        arrays = token_arrays(text)
        if isinstance(arrays, TokenArrays):
            return arrays
    return TokenArrays.of_tokens(analyzer.tokens(text))


def _matches(arrays: TokenArrays, units: tuple[tuple[str, ...], ...]) -> _Runs | None:
    """Every occurrence of every unit in the tokens, merged where they overlap, in order.

    Terms are compared as numbers with numpy: the single terms in one pass
    (a table from term number to unit), each phrase by narrowing the
    positions of its first term with each next term. Only the merged
    runs' unit sets are Python objects (bit masks); ``None`` when nothing
    matched. O(tokens * phrases * phrase length).
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
        return None
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
    bits = [1 << index for index in indexes.tolist()]
    masks = [
        functools.reduce(operator.or_, bits[first:last])
        for first, last in zip(opens.tolist(), closes.tolist(), strict=True)
    ]
    return _Runs(starts[opens], reach[closes - 1], masks)


#: Every code point ``str.isspace()`` is true of (tests/test_highlight.py checks the list).
WHITESPACE = (
    *range(0x09, 0x0E), *range(0x1C, 0x21), 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
    0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
)  # fmt: skip
# Whether a code point is whitespace, for code points up to U+3000; the last entry (False)
# stands for every code point above.
_IS_SPACE = np.zeros(0x3002, dtype=bool)
_IS_SPACE[list(WHITESPACE)] = True


def _windows(text: str, runs: _Runs, size: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """For each run, a fragment of about ``size`` characters holding it (see :func:`_windows_numpy`).

    Compiled (``native/_analysis.c``, ``fragment_windows``: the rule per run,
    reading only the characters it looks at) where built, else with numpy.
    """
    native = _native
    if native is None:
        return _windows_numpy(text, runs, size)
    pairs = np.frombuffer(
        native.fragment_windows(text, runs.starts.tobytes(), runs.ends.tobytes(), size), dtype=np.int64
    ).reshape(-1, 2)
    return pairs[:, 0], pairs[:, 1]


def _windows_numpy(text: str, runs: _Runs, size: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """For each run, a fragment of about ``size`` characters holding it, cutting no word if it can.

    The rule, per run (the anchor): a quarter of the room the fragment leaves
    over goes before the anchor, and near the end of the text the room goes
    before it; then the start moves past a partial word (to after the first
    whitespace before the anchor, if any), the end back to the last plain space
    after the anchor (if any after its end), and whitespace at either edge is
    dropped, never past the anchor. All runs at once, with numpy, over a
    whitespace table of ``text``. O(len(text) + runs).
    """
    length = len(text)
    anchor_starts, anchor_ends = runs.starts, runs.ends
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    space = _IS_SPACE[np.minimum(codes, 0x3001)]
    at = np.arange(length + 1, dtype=np.int64)
    # For i in 0..length: the first whitespace at or after i (length if none), the first
    # non-whitespace at or after i, one past the last non-whitespace before i (0 if none); the
    # last plain space at or before i (-1 if none).
    spaced = np.empty(length + 1, dtype=bool)
    spaced[:length] = space
    spaced[length] = True
    next_space = np.minimum.accumulate(np.where(spaced, at, length)[::-1])[::-1]
    spaced[length] = False
    next_solid = np.minimum.accumulate(np.where(spaced, length, at)[::-1])[::-1]
    spaced[1:] = space
    spaced[0] = True
    after_solid = np.maximum.accumulate(np.where(spaced, 0, at))
    last_blank = np.maximum.accumulate(np.where(codes == 0x20, at[:-1], -1))

    starts = np.maximum(0, anchor_starts - np.maximum(0, size - (anchor_ends - anchor_starts)) // 4)
    ends = np.maximum(anchor_ends, np.minimum(length, starts + size))
    short = ends - starts < size
    starts = np.where(short, np.maximum(0, np.minimum(starts, ends - size)), starts)
    # Do not cut a word: past the first whitespace before the anchor...
    cut = (starts > 0) & ~space[np.maximum(starts - 1, 0)]
    found = next_space[starts]
    starts = np.where(cut & (found < anchor_starts), found + 1, starts)
    # ... and back to the last plain space after the anchor's end.
    cut = (ends < length) & ~space[np.minimum(ends, length - 1)]
    found = last_blank[np.maximum(ends - 1, 0)]
    ends = np.where(cut & (found > anchor_ends), found, ends)
    starts = np.minimum(next_solid[starts], anchor_starts)
    ends = np.maximum(after_solid[ends], anchor_ends)
    return starts, ends


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
    if not _is_tokenizing(analyzer):
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
    runs = _matches(_token_arrays(analyzer, analysed), tuple(wanted))
    if runs is None:
        reason = "no match in the analysed text" if truncated else "no match"
        return FieldHighlight(field_name, reason=reason, truncated=truncated)
    run_starts, run_ends = runs.starts.tolist(), runs.ends.tolist()
    if options.number_of_fragments == 0:
        spans = list(zip(run_starts, run_ends, strict=True))
        units_seen = functools.reduce(operator.or_, runs.masks).bit_count()
        marks = _mark(analysed, 0, len(analysed), spans, options)
        whole = Snippet(0, len(analysed), analysed, tuple(spans), marks, units_seen)
        return FieldHighlight(field_name, (whole,), truncated=truncated)
    starts, ends = _windows(analysed, runs, options.fragment_size)
    # Each distinct window once (the first run giving it), with the runs wholly inside it: from
    # the first that starts in it, those ending in it (runs are disjoint: their ends ascend).
    windows = sorted(set(zip(starts.tolist(), ends.tolist(), strict=True)))
    window_starts = np.array([start for start, _ in windows], dtype=np.int64)
    window_ends = np.array([end for _, end in windows], dtype=np.int64)
    firsts = np.searchsorted(runs.starts, window_starts, side="left")
    lasts = np.maximum(firsts, np.searchsorted(runs.ends, window_ends, side="right"))
    masks = runs.masks
    candidates = sorted(  # (-distinct, start, end, first, last): most units, then earliest
        (-functools.reduce(operator.or_, masks[first:last], 0).bit_count(), start, end, first, last)
        for (start, end), first, last in zip(windows, firsts.tolist(), lasts.tolist(), strict=True)
    )
    chosen: list[tuple[int, int, int, int, int]] = []
    for candidate in candidates:
        if len(chosen) == options.number_of_fragments:
            break
        _, start, end, _, _ = candidate
        if all(end <= other[1] or start >= other[2] for other in chosen):
            chosen.append(candidate)
    snippets = []
    for negative, start, end, first, last in chosen:
        spans = list(zip(run_starts[first:last], run_ends[first:last], strict=True))
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


def _windows_agree(module: ModuleType) -> bool:
    """The compiled windows against :func:`_windows_numpy` on a sample (the loader's self-check)."""
    if not hasattr(module, "fragment_windows"):
        return False  # built before it existed
    text = "Lorem  ipsum\u00a0dolor sit\u3000amet, consectetur adipiscing elit,\tsed do eiusmod tempor"
    spans = [(6, 11), (0, 5), (13, 18), (60, 63), (len(text) - 6, len(text))]
    runs = _Runs(
        np.array([start for start, _ in spans], dtype=np.int64),
        np.array([end for _, end in spans], dtype=np.int64),
        [1] * len(spans),
    )
    for size in (1, 7, 12, 30, 200):
        pairs = np.frombuffer(
            module.fragment_windows(text, runs.starts.tobytes(), runs.ends.tobytes(), size), dtype=np.int64
        )
        starts, ends = _windows_numpy(text, runs, size)
        if pairs.tolist() != np.stack((starts, ends), axis=1).ravel().tolist():
            return False
    return True


#: The compiled window rule (``weftsearch.native._analysis``), or ``None``: then numpy's.
_native: ModuleType | None = load_extension("_analysis", _windows_agree)


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
