"""The english analyzer's compiled inner loop (src/weftsearch/native/_analysis.c)."""

from collections.abc import Callable

def term_counts(
    folded: str,
    memo: dict[str, str | None],
    stopwords: frozenset[str],
    stem: Callable[[str], str],
    limit: int,
    /,
) -> tuple[dict[str, int], int]:
    """Terms of the words of ``folded`` (from ``memo``, else resolved and remembered), counted."""
