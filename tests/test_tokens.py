"""weftsearch.tokens: folding text while keeping each folded character's source span."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from weftsearch.tokens import folded_offset_arrays, folded_with_offsets


def test_offsets_of_a_segment_wise_fold() -> None:
    # NFKC-like folds: a ligature expands, a decomposed accent stays with its letter.
    folded, starts, ends = folded_with_offsets("\ufb01e\u0301", lambda s: s.replace("\ufb01", "fi"))
    assert folded == "fie\u0301" and starts == [0, 0, 1, 1] and ends == [1, 1, 3, 3]


def test_per_character_folds_check_lengths_only() -> None:
    # str.lower gives the final sigma in context and the medial one alone: only lengths matter.
    folded, starts, ends = folded_with_offsets("\u03a3\u0391\u03a3", str.lower, per_character=True)
    assert folded == "\u03c3\u03b1\u03c2" and starts == [0, 1, 2] and ends == [1, 2, 3]


def test_offsets_fall_back_to_the_whole_text_when_segments_disagree() -> None:
    # A fold that is not segment-wise (it looks at the whole text) cannot be split up:
    # every character is attributed to the whole text instead of a wrong span.
    text = "abe\u0301"  # not NFKC-normalised: folded segment by segment, which this fold refuses
    folded, starts, ends = folded_with_offsets(text, lambda s: s.upper() if len(s) > 2 else s)
    assert folded == "ABE\u0301" and starts == [0] * 4 and ends == [4] * 4


def test_identity_offsets_when_nothing_changes_length() -> None:
    text = "Caf\u00e9 \u03a3"  # NFKC-normalised; case folding keeps every length
    folded, starts, ends = folded_with_offsets(text, lambda s: s.casefold())
    assert folded == "caf\u00e9 \u03c3" and starts == [0, 1, 2, 3, 4, 5] and ends == [1, 2, 3, 4, 5, 6]


# What NFKC changes or composes (ligatures, full-width, superscripts, micro sign, Hangul jamo,
# combining marks, also at the very start), case folding lengthens (sharp s), ASCII around it.
_AWKWARD = (
    "ab c.'\ufb01\uff21\u00b2\u00b5\u0301\u0308\u0327\u1100\u1161\u11a8"
    "\u00df\u0130\u03a3\u00e9\u4e2d\U0001f600"
)


def _nfkc_casefold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


@settings(max_examples=400, deadline=None)
@given(text=st.one_of(st.text(alphabet=_AWKWARD, max_size=60), st.text(max_size=40)))
def test_offset_arrays_are_the_offsets(text: str) -> None:
    for fold in (_nfkc_casefold, lambda s: unicodedata.normalize("NFKC", s)):
        folded, starts, ends = folded_with_offsets(text, fold)
        fast_starts, fast_ends = folded_offset_arrays(text, folded, fold)
        assert fast_starts.tolist() == starts and fast_ends.tolist() == ends


def test_offset_arrays_of_a_fold_that_is_not_one_to_one_on_ascii() -> None:
    def doubling(text: str) -> str:
        return unicodedata.normalize("NFKC", text).replace("a", "aa")

    text = "a\ufb01 ba"
    folded, starts, ends = folded_with_offsets(text, doubling)
    fast_starts, fast_ends = folded_offset_arrays(text, folded, doubling)
    assert fast_starts.tolist() == starts and fast_ends.tolist() == ends
    assert starts == [0, 0, 1, 1, 2, 3, 4, 4]


def test_offset_arrays_fall_back_to_the_whole_text_as_the_lists_do() -> None:
    def whole(text: str) -> str:
        return text.upper() if len(text) > 2 else text

    text = "abe\u0301"
    folded, starts, ends = folded_with_offsets(text, whole)
    fast_starts, fast_ends = folded_offset_arrays(text, folded, whole)
    assert fast_starts.tolist() == starts == [0] * 4 and fast_ends.tolist() == ends == [4] * 4
