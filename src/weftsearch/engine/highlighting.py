"""Highlights of a search's hits: the stored texts of a snapshot given to :mod:`weftsearch.highlight`.

Built by ``Index.search(..., highlight=...)``; each hit's highlights are
computed when the hit is first read (:attr:`Hit.highlights
<weftsearch.engine.search.Hit.highlights>`), from the snapshot searched.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from weftsearch.analysis import Analyzer, TokenizingAnalyzer
from weftsearch.documents import Document
from weftsearch.engine.query import Query
from weftsearch.engine.search import Highlighter
from weftsearch.engine.snapshot import Snapshot
from weftsearch.errors import InvalidParameterError
from weftsearch.highlight import DEFAULT_FIELD, FieldHighlight, HighlightOptions, highlight_text, query_units

__all__ = ["NOT_STORED", "NOT_STORED_FIELD", "snapshot_highlighter", "text_fields_of"]

#: The reason given for every field of an index created with ``store_text=False``.
NOT_STORED = "the text is not stored (the index was created with store_text=False)"
#: The reason given for a named text field whose schema says ``stored=False``.
NOT_STORED_FIELD = "the field's text is not stored (its TextField has stored=False)"


def text_fields_of(document: Document) -> Mapping[str, str]:
    """A document's text fields by name: ``text``, and the named ones where documents have them."""
    named: Mapping[str, str] = getattr(document, "text_fields", None) or {}
    return {DEFAULT_FIELD: document.text, **named}


def snapshot_highlighter(
    snapshot: Snapshot,
    query: Query,
    options: HighlightOptions,
    *,
    store_text: bool,
    analyzers: Mapping[str, Analyzer] | None = None,
    unstored: Collection[str] = (),
) -> Highlighter:
    """The function giving a hit's highlights from its key, reading ``snapshot``'s stored texts.

    Args:
        snapshot: the snapshot searched (the hits' documents are read from it).
        query: the query searched; its units per field come from
            :func:`~weftsearch.highlight.query_units` (its text, or its parsed tree).
        options: what to highlight and how.
        store_text: whether the index stores text; when not, every field says
            so (:data:`NOT_STORED`) instead of a snippet.
        analyzers: each highlightable text field's analyzer by name; ``None``
            means the default field only, with the snapshot's analyzer.
        unstored: named fields whose text the index does not keep: each says
            so (:data:`NOT_STORED_FIELD`) instead of a snippet.

    Raises:
        InvalidParameterError: ``options.fields`` names a field the index has
            not, or one whose analyzer has no ``tokens()`` (a custom analyzer).

    """
    fields = dict(analyzers) if analyzers is not None else {DEFAULT_FIELD: snapshot.analyzer}
    unknown = [name for name in options.fields if name not in fields]
    if unknown:
        raise InvalidParameterError(
            f"cannot highlight unknown text field {unknown[0]!r}; text fields: {', '.join(sorted(fields))}"
        )
    tokenizers: dict[str, TokenizingAnalyzer] = {}
    for name in options.fields:
        analyzer = fields[name]
        if not isinstance(analyzer, TokenizingAnalyzer):
            raise InvalidParameterError(
                f"cannot highlight text field {name!r}: its analyzer {analyzer.name!r} has no tokens(text) "
                "(see weftsearch.analysis.TokenizingAnalyzer)"
            )
        tokenizers[name] = analyzer
    units = {name: query_units(query, fields[name], name) for name in options.fields}

    def highlight(key: str) -> Mapping[str, FieldHighlight]:
        if not store_text:
            return {name: FieldHighlight(name, reason=NOT_STORED) for name in options.fields}
        document = snapshot.document_or_none(snapshot.id_of(key))
        if document is None:  # damaged since the search: reported, as Index.get does
            return {
                name: FieldHighlight(name, reason="the stored document is damaged") for name in options.fields
            }
        texts = text_fields_of(document)
        return {
            name: FieldHighlight(name, reason=NOT_STORED_FIELD)
            if name in unstored
            else highlight_text(texts.get(name, ""), units[name], tokenizers[name], options, name)
            for name in options.fields
        }

    return highlight
