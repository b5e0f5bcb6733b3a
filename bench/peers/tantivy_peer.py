"""The bm25 arm's peer of ``weft-search bench load``: tantivy-py.

A disjunction of term queries on a whitespace-tokenized field of the analysed
texts (the same tokens weft-search indexes); each request builds the query,
searches the top ``k`` and reads their stored keys. Loaded by
:mod:`weftsearch.bench.peers` from this folder (``--peers-dir``); it needs the
``bench`` extra's ``tantivy``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from weftsearch.bench.workloads import Workload
from weftsearch.errors import MissingDependencyError


def _missing() -> MissingDependencyError:
    return MissingDependencyError(
        "the tantivy peer needs tantivy: pip install 'weft-search[bench]' (or leave the peers out: --no-peer)"
    )


def build(path: Path, keys: Sequence[str], texts: Sequence[str], vectors: NDArray[np.float32] | None) -> None:
    """A tantivy index at ``path``: ``key`` stored raw, ``body`` whitespace-tokenized with frequencies."""
    try:
        import tantivy
    except ImportError:
        raise _missing() from None
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("key", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("body", stored=False, tokenizer_name="whitespace", index_option="freq")
    path.mkdir(parents=True, exist_ok=True)
    index = tantivy.Index(builder.build(), path=str(path))
    writer = index.writer(heap_size=500_000_000, num_threads=1)
    for key, text in zip(keys, texts, strict=True):
        writer.add_document(tantivy.Document(key=key, body=text))
    writer.commit()
    writer.wait_merging_threads()


def open_search(path: str, workload: Workload, k: int, depth: int) -> Callable[[int], object]:
    """Open the tantivy index at ``path``; the search function of query number ``item``."""
    try:
        import tantivy
    except ImportError:
        raise _missing() from None
    index = tantivy.Index.open(path)
    index.reload()
    searcher = index.searcher()
    schema = index.schema
    texts = workload.texts

    def search(item: int) -> object:
        tokens = texts[item].split()
        terms = [tantivy.Query.term_query(schema, "body", t, index_option="freq") for t in tokens]
        if not terms:
            query = tantivy.Query.empty_query()
        elif len(terms) == 1:
            query = terms[0]
        else:
            query = tantivy.Query.boolean_query([(tantivy.Occur.Should, t) for t in terms])
        hits = searcher.search(query, k, count=False).hits
        return [searcher.doc(address)["key"][0] for _, address in hits]

    return search
