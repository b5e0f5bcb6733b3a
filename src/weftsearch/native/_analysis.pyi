"""The english analyzer's compiled inner loop (src/weftsearch/native/_analysis.c)."""

from collections.abc import Callable

class WordCache:
    """word -> term in C, consulted before the memo (bounded: emptied when full)."""

    def size(self) -> int:
        """The words it holds."""

def term_counts(
    folded: str,
    memo: dict[str, str | None],
    stopwords: frozenset[str],
    stem: Callable[[str], str],
    limit: int,
    cache: WordCache | None = None,
    /,
) -> tuple[dict[str, int], int]:
    """Terms of the words of ``folded`` (from ``cache``, ``memo``, else resolved and remembered), counted."""

def term_positions(
    folded: str,
    memo: dict[str, str | None],
    stopwords: frozenset[str],
    stem: Callable[[str], str],
    limit: int,
    cache: WordCache | None = None,
    /,
) -> tuple[dict[str, list[int]], int]:
    """Terms of the words of ``folded`` as ``term_counts`` finds them, each with its positions."""

def split_counts(text: str, limit: int, cache: WordCache | None = None, /) -> tuple[dict[str, int], int]:
    """``Counter(text.split())`` (first-seen order) and ``len(text.split())``, in one pass."""

def split_positions(
    text: str, limit: int, cache: WordCache | None = None, /
) -> tuple[dict[str, list[int]], int]:
    """Each token of ``text.split()`` (first-seen order) with its indexes, and the number of tokens."""

def token_spans(
    folded: str,
    memo: dict[str, str | None],
    stopwords: frozenset[str],
    stem: Callable[[str], str],
    limit: int,
    /,
) -> tuple[dict[str, int], bytes]:
    """Distinct terms of ``folded`` numbered, and each kept term's (number, start, end) as native int64s."""

def fragment_windows(text: str, starts: bytes, ends: bytes, size: int, /) -> bytes:
    """For each anchor (starts[k], ends[k]), its fragment's (start, end), as native int64 pairs."""
