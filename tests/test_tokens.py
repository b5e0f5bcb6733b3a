"""weftsearch.tokens: folding text while keeping each folded character's source span."""

from __future__ import annotations

from weftsearch.tokens import folded_with_offsets


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
