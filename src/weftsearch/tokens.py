"""A term with the span of text it came from, and folding text while keeping offsets.

The value types of tokenisation, below :mod:`weftsearch.analysis` and
:mod:`weftsearch.languages` (which both build on them); re-exported as
``weftsearch.analysis.Token``.
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

__all__ = ["Token", "TokenArrays", "folded_offset_arrays", "folded_with_offsets", "offsets_are_identity"]


class Token(NamedTuple):
    """One term of a text with where it came from.

    A term's *position* is its index in the analyzer's output (what
    ``analyze`` returns): a dropped word (a stopword) takes no position, so
    phrases match across it. ``start``/``end`` are the Python string (code
    point) offsets of the word the term came from in the text as given
    (before any normalisation), so ``text[start:end]`` is what a highlighter
    marks.
    """

    term: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class TokenArrays:
    """A text's tokens as arrays: what :class:`Token` s say, without an object per word.

    Token ``i`` is ``Token(term of ids[i], starts[i], ends[i])``, where the
    term numbered ``n`` is the ``n``-th key of :attr:`numbers` (terms numbered
    in first-seen order). Highlighting matches query terms against
    :attr:`ids` with numpy rather than comparing strings word by word.

    Attributes:
        numbers: each distinct term of the text -> its number (0, 1, ... in first-seen order).
        ids: each token's term number (int64), in text order.
        starts: each token's start offset in the text as given (int64).
        ends: each token's end offset (exclusive, int64).

    """

    numbers: dict[str, int]
    ids: NDArray[np.int64]
    starts: NDArray[np.int64]
    ends: NDArray[np.int64]

    @classmethod
    def of_tokens(cls, tokens: Sequence[Token]) -> TokenArrays:
        """The arrays of ``tokens`` (the path of an analyzer with only ``tokens()``). O(len(tokens))."""
        numbers: dict[str, int] = {}
        ids = [numbers.setdefault(token.term, len(numbers)) for token in tokens]
        return cls(
            numbers,
            np.array(ids, dtype=np.int64),
            np.array([token.start for token in tokens], dtype=np.int64),
            np.array([token.end for token in tokens], dtype=np.int64),
        )

    def tokens(self) -> list[Token]:
        """The tokens these arrays hold, as :class:`Token` s (for tests and debugging)."""
        terms = list(self.numbers)
        spans = zip(self.ids.tolist(), self.starts.tolist(), self.ends.tolist(), strict=True)
        return [Token(terms[number], start, end) for number, start, end in spans]


# Hangul conjoining jamo that compose with the character before them under NFKC
# (a vowel after a leading consonant, a trailing consonant after a syllable):
# combining class 0, yet not the start of a normalisation segment.
_JAMO_V_T = range(0x1161, 0x11C3)


def _segments(text: str) -> list[int]:
    """Start offsets of ``text``'s normalisation segments (a starter and the marks that follow it).

    NFKC composes and reorders only within such a segment, so normalising
    each one alone gives (almost always) the normalised whole; :func:`folded_with_offsets`
    checks that it does.
    """
    return [
        i
        for i, char in enumerate(text)
        if i == 0 or (not unicodedata.combining(char) and ord(char) not in _JAMO_V_T)
    ]


def offsets_are_identity(text: str, folded: str, *, per_character: bool = False) -> bool:
    """Whether :func:`folded_with_offsets` maps folded character ``j`` to ``text[j:j + 1]`` (see there)."""
    return len(folded) == len(text) and (per_character or unicodedata.is_normalized("NFKC", text))


def folded_with_offsets(
    text: str, fold: Callable[[str], str], *, per_character: bool = False
) -> tuple[str, list[int], list[int]]:
    """``fold(text)`` with, for each of its characters, the source span it came from.

    ``fold`` maps text to the form an analyzer tokenises: NFKC followed by a
    per-character map (case folding), or, with ``per_character``, a
    per-character map alone (lower-casing). Returns ``(folded, starts, ends)``: folded
    character ``j`` came from ``text[starts[j]:ends[j]]``, the normalisation
    segment (or, for a one-to-one fold, the character) that produced it. When
    folding segment by segment does not give ``fold(text)`` (pathological
    sequences of marks), every character is attributed to the whole text:
    offsets then still hold the word, only less tightly. ``per_character``:
    ``fold`` maps each character alone to as many characters as it does in
    context (``str.lower``, whose only context is the final sigma's form), so
    each character is its own segment and only the lengths are checked.
    O(len(text)).
    """
    folded = fold(text)
    if offsets_are_identity(text, folded, per_character=per_character):
        # Nothing for NFKC to change, and a per-character map that kept the length mapped
        # each character to one (none maps to nothing): offsets are the identity.
        offsets = list(range(len(text)))
        return folded, offsets, list(range(1, len(text) + 1))
    bounds = list(range(len(text))) if per_character else _segments(text)
    bounds.append(len(text))
    starts: list[int] = []
    ends: list[int] = []
    pieces: list[str] = []
    for start, end in itertools.pairwise(bounds):
        piece = fold(text[start:end])
        pieces.append(piece)
        starts.extend([start] * len(piece))
        ends.extend([end] * len(piece))
    if len(starts) != len(folded) or (not per_character and "".join(pieces) != folded):
        return folded, [0] * len(folded), [len(text)] * len(folded)
    return folded, starts, ends


_NON_ASCII_RUN = re.compile(r"[^\x00-\x7f]+")


@functools.lru_cache(maxsize=16)
def _ascii_one_to_one(fold: Callable[[str], str]) -> bool:
    """Whether ``fold`` maps each ASCII character to one character, the same alone as in a run."""
    alone = [fold(chr(code)) for code in range(128)]
    return all(len(piece) == 1 for piece in alone) and fold("".join(map(chr, range(128)))) == "".join(alone)


def folded_offset_arrays(
    text: str, folded: str, fold: Callable[[str], str]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The ``starts`` and ``ends`` of :func:`folded_with_offsets` (not ``per_character``), as arrays.

    ``folded`` is ``fold(text)``. The same offsets, found faster: a run of
    ASCII characters (each its own normalisation segment, but for the last,
    which may take the marks after it) is folded in one call and its offsets
    made with ``numpy.arange``, when ``fold`` maps each ASCII character to one
    character; only the segments around other characters are folded one by
    one. O(len(text)).
    """
    length = len(text)
    if offsets_are_identity(text, folded):
        return np.arange(length, dtype=np.int64), np.arange(1, length + 1, dtype=np.int64)
    if not _ascii_one_to_one(fold):
        _, slow_starts, slow_ends = folded_with_offsets(text, fold)
        return np.asarray(slow_starts, dtype=np.int64), np.asarray(slow_ends, dtype=np.int64)
    parts_starts: list[NDArray[np.int64]] = []
    parts_ends: list[NDArray[np.int64]] = []
    pieces: list[str] = []
    pending_starts: list[int] = []
    pending_ends: list[int] = []

    def flush() -> None:
        if pending_starts:
            parts_starts.append(np.asarray(pending_starts, dtype=np.int64))
            parts_ends.append(np.asarray(pending_ends, dtype=np.int64))
            pending_starts.clear()
            pending_ends.clear()

    def ascii_run(start: int, end: int) -> None:
        if end > start:
            flush()
            pieces.append(fold(text[start:end]))
            parts_starts.append(np.arange(start, end, dtype=np.int64))
            parts_ends.append(np.arange(start + 1, end + 1, dtype=np.int64))

    def segment(start: int, end: int) -> None:
        piece = fold(text[start:end])
        pieces.append(piece)
        pending_starts.extend([start] * len(piece))
        pending_ends.extend([end] * len(piece))

    position = 0
    for run in _NON_ASCII_RUN.finditer(text):
        first, last = run.span()
        # The ASCII character before the run starts a segment that may take the run's marks.
        begin = first - 1 if first > 0 else 0
        ascii_run(position, begin)
        for index in range(first, last):
            char = text[index]
            if index > 0 and (unicodedata.combining(char) or ord(char) in _JAMO_V_T):
                continue
            if index > begin:
                segment(begin, index)
            begin = index
        segment(begin, last)
        position = last
    ascii_run(position, length)
    flush()
    if parts_starts:
        starts, ends = np.concatenate(parts_starts), np.concatenate(parts_ends)
    else:
        starts = ends = np.zeros(0, dtype=np.int64)
    if len(starts) != len(folded) or "".join(pieces) != folded:
        return np.zeros(len(folded), dtype=np.int64), np.full(len(folded), length, dtype=np.int64)
    return starts, ends
