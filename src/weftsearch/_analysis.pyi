"""The english analyzer's compiled inner loop (src/weftsearch/_analysis.c)."""

def term_counts(folded: str, memo: dict[str, str | None], /) -> tuple[dict[str, int], int] | list[str]:
    """Counts of the memo's terms for the words of ``folded``, or the words not in the memo."""
