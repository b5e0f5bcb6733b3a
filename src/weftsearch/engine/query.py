"""The query value callers hand to the engine; scorers read the parts they use."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from weftsearch.documents import as_key_tuple, as_vector, check_string
from weftsearch.engine.filters import Filter, as_filter
from weftsearch.errors import InvalidQueryError
from weftsearch.querylang import BoolNode, Node, PhraseNode, PrefixNode, TermNode, parse
from weftsearch.times import TimeLike, as_timestamp

__all__ = ["Query"]


@dataclass(frozen=True, slots=True)
class Query:
    """What to search for; each scorer reads the parts it understands.

    Attributes:
        text: free text, analysed with the index's analyzer by text scorers.
        vector: a query embedding for vector scorers (same width as the index's).
        seeds: document keys to start graph scorers from, instead of (or before)
            a seed scorer's results. Keys not in the snapshot are ignored; a
            string no document key can be (NUL, a control character, ...: see
            :func:`~weftsearch.documents.check_key`) raises
            :class:`~weftsearch.errors.InvalidQueryError`, as does a text UTF-8
            cannot encode (a lone surrogate).
        time: "now" for recency scorers, in any form :attr:`Document.time`
            takes (``datetime``, ``date``, ISO-8601 string, POSIX seconds),
            stored as POSIX seconds (float); ``None`` lets the scorer choose
            (the built-in one uses the newest document time, so results reproduce).
        filter: which documents may be returned: a :class:`~weftsearch.engine.filters.Filter`
            (``F("year") >= 1990``) or its string form (``"year >= 1990"``), parsed
            here (a malformed one raises :class:`~weftsearch.errors.FilterSyntaxError`);
            ``None`` for no filter. Every built-in scorer applies it before its top k,
            so a search returns ``min(k, matching documents)`` results.
        tree: a parsed query (:mod:`weftsearch.querylang`: terms, phrases,
            prefixes and boolean clauses), which the BM25 scorer scores instead
            of ``text``; ``None`` (the default) scores ``text`` as a bag of
            words. :meth:`parse` fills it from query syntax and keeps the
            syntax in ``text`` (what other scorers, such as a server's
            embedder, see).

    """

    text: str = ""
    vector: NDArray[np.float32] | None = None
    seeds: tuple[str, ...] = ()
    time: TimeLike | None = None
    filter: Filter | str | None = None
    tree: Node | None = None

    @classmethod
    def parse(
        cls,
        text: str,
        *,
        vector: NDArray[np.float32] | None = None,
        seeds: tuple[str, ...] = (),
        time: TimeLike | None = None,
        filter: Filter | str | None = None,
    ) -> Query:
        """A query from query syntax: ``Query.parse('+sparse "dense retrieval"~2 -survey')``.

        The syntax and its meaning (Lucene's classic query parser):
        :mod:`weftsearch.querylang.parser`. ``text`` is kept as given and its
        tree is :attr:`tree`; the other arguments are as for :class:`Query`.

        Raises:
            QuerySyntaxError: ``text`` is malformed or over a limit; the
                message shows the position with a caret.

        """
        return cls(text=text, vector=vector, seeds=seeds, time=time, filter=filter, tree=parse(text))

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise InvalidQueryError(f"query text must be str, got {type(self.text).__name__}")
        check_string(self.text, "query text", InvalidQueryError)
        if self.vector is not None:
            object.__setattr__(self, "vector", as_vector(self.vector, "query vector"))
        object.__setattr__(self, "seeds", as_key_tuple(self.seeds, "query seeds", InvalidQueryError))
        if self.time is not None:
            object.__setattr__(self, "time", as_timestamp(self.time, "query time", InvalidQueryError))
        if self.filter is not None:
            object.__setattr__(self, "filter", as_filter(self.filter))
        if self.tree is not None and not isinstance(self.tree, (TermNode, PhraseNode, PrefixNode, BoolNode)):
            raise InvalidQueryError(
                f"query tree must be a weftsearch.querylang node, got {type(self.tree).__name__}"
            )

    @property
    def timestamp(self) -> float | None:
        """``time`` as POSIX seconds, or ``None``."""
        return None if self.time is None else as_timestamp(self.time, "query time", InvalidQueryError)
