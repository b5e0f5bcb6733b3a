"""A term with the span of text it came from, and folding text while keeping offsets.

The value types of tokenisation, below :mod:`weftsearch.analysis` and
:mod:`weftsearch.languages` (which both build on them); re-exported as
``weftsearch.analysis.Token``.
"""

from __future__ import annotations

import itertools
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

__all__ = ["Token", "TokenArrays", "folded_with_offsets", "offsets_are_identity"]


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
