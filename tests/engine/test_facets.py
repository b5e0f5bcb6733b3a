"""Facets (issue 30, item 3): exact value counts over what a query matches, checked against a
plain count over the live documents' fields, across segments, deletes and merges."""

from __future__ import annotations

import collections
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from weftsearch import RRF, BM25Scorer, Document, Index, Query
from weftsearch.engine.facets import MAX_FACET_K
from weftsearch.engine.filters import F
from weftsearch.errors import FilterTypeError, InvalidParameterError, UnknownFieldError

FIELDS = ["tags", "lang", "year", "open", "scores"]


def _corpus(n: int, seed: int) -> list[Document]:
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n):
        fields: dict[str, Any] = {}
        if rng.random() < 0.9:
            fields["tags"] = [f"t{int(t)}" for t in rng.integers(0, 8, int(rng.integers(0, 4)))]
        if rng.random() < 0.8:
            fields["lang"] = str(rng.choice(["en", "de", "fr", "é"]))
        if rng.random() < 0.8:
            fields["year"] = int(rng.integers(1995, 2002))
        if rng.random() < 0.7:
            fields["open"] = bool(rng.random() < 0.4)
        if rng.random() < 0.6:
            fields["scores"] = [float(s) / 2 for s in rng.integers(0, 6, int(rng.integers(1, 3)))]
        docs.append(Document(f"d{i:05d}", " ".join(["w"] * (1 + i % 4)) + f" x{i % 7}", fields=fields))
    return docs


def _plain(docs: Sequence[Document], fields: Sequence[str], k: int) -> dict[str, list[tuple[Any, int]]]:
    """The rule, one document at a time: each distinct value a document holds counts once."""
    out = {}
    for name in fields:
        counts: collections.Counter[Any] = collections.Counter()
        for doc in docs:
            value = doc.fields.get(name)
            held = value if isinstance(value, tuple) else () if value is None else (value,)
            counts.update(
                {(type(v) is bool, float(v) if not isinstance(v, str) else v): v for v in held}.values()
            )
        ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        out[name] = [(v, c) for v, c in ordered[:k]]
    return out


def _normalise(facets: dict[str, list[tuple[Any, int]]]) -> dict[str, list[tuple[Any, int]]]:
    return {
        name: [(v if isinstance(v, (str, bool)) else float(v), c) for v, c in pairs]
        for name, pairs in facets.items()
    }


FILTERS: dict[str, Callable[[Document], bool]] = {
    "": lambda d: True,
    "lang == 'en'": lambda d: d.fields.get("lang") == "en",
    "tags contains any ('t1', 't2')": lambda d: bool({"t1", "t2"} & set(d.fields.get("tags", ()))),  # type: ignore[arg-type]
    "year >= 1999 and not open == true": lambda d: (
        d.fields.get("year", 0) >= 1999  # type: ignore[operator]
        and d.fields.get("open") is not True
    ),
    "scores contains 2.5": lambda d: 2.5 in d.fields.get("scores", ()),  # type: ignore[operator]
    "lang == 'none'": lambda d: False,
}


@pytest.mark.parametrize("seed", [1, 2])
def test_facets_equal_a_plain_count_over_the_live_matching_documents(tmp_path: Path, seed: int) -> None:
    docs = _corpus(900, seed)
    rng = np.random.default_rng(seed)
    with Index.create(tmp_path / "idx") as index:
        for start in range(0, 900, 300):  # three segments
            index.add_many(docs[start : start + 300], progress=False)
            index.commit()
        gone = {f"d{int(i):05d}" for i in rng.choice(900, 120, replace=False)}
        index.delete_many(sorted(gone))
        replaced = Document("d00005", "w", fields={"tags": ["t1", "t1", "t9"], "lang": "en"})
        index.add(replaced)  # an upsert: the old version must no longer count
        index.commit()
        live = [d for d in docs if d.key not in gone and d.key != "d00005"] + [replaced]
        for merged in (False, True):
            if merged:
                index.merge(force=True)
                index.wait_for_merges()
            for text, test in FILTERS.items():
                matching = [d for d in live if test(d)]
                for k in (1, 3, 100):
                    found = index.facets(text or None, FIELDS, k)
                    assert _normalise(found) == _normalise(_plain(matching, FIELDS, k)), (text, k, merged)
            # search(..., facets=...) counts over the same documents as Index.facets.
            query = Query("w", filter="lang == 'en'")
            results = index.search(query, 3, RRF(), BM25Scorer(), facets=["tags", "year"], facet_k=4)
            assert len(results) == 3
            assert results.facets == index.facets(query, ["tags", "year"], 4)
            assert results.to_dict()["facets"]["tags"][0] == {
                "value": results.facets["tags"][0][0],
                "count": results.facets["tags"][0][1],
            }


def test_facets_over_the_top_hits_of_a_ranking() -> None:
    docs = _corpus(400, 7)
    index = Index("english")
    index.add_many(docs, progress=False)
    query = Query("x3 w", filter="exists(lang)")
    for top in (1, 10, 50):
        hits = index.search(query, top, RRF(), BM25Scorer())
        by_key = {d.key: d for d in docs}
        want = _plain([by_key[hit.key] for hit in hits], FIELDS, 20)
        found = index.facets(query, FIELDS, 20, top=top, fuser=RRF(), scorers=[BM25Scorer()])
        assert _normalise(found) == _normalise(want)
    with pytest.raises(InvalidParameterError, match="top hits"):
        index.facets(query, ["tags"], top=5)
    with pytest.raises(InvalidParameterError, match="top hits"):
        index.facets("lang == 'en'", ["tags"], top=5, fuser=RRF(), scorers=[BM25Scorer()])


def test_values_are_ordered_by_count_then_value_and_typed() -> None:
    index = Index("english")
    index.add_many(
        [
            Document("a", "w", fields={"tags": ["b", "a"], "n": 2, "flag": True}),
            Document("b", "w", fields={"tags": ["c", "b"], "n": 1.5, "flag": True}),
            Document("c", "w", fields={"tags": ["a"], "n": 2.0, "flag": False}),
            Document("d", "w", fields={"tags": ("c",)}),
        ]
    )
    facets = index.facets(None, ["tags", "n", "flag"], k=10)
    assert facets == {
        "tags": [("a", 2), ("b", 2), ("c", 2)],
        "n": [(2, 2), (1.5, 1)],
        "flag": [(True, 2), (False, 1)],
    }
    assert type(facets["n"][0][0]) is int and type(facets["flag"][0][0]) is bool
    assert index.facets(F("tags").contains("c"), ["tags"], k=1) == {"tags": [("c", 2)]}


def test_bad_facet_requests_are_refused_by_type(tmp_path: Path) -> None:
    index = Index("english", vector_dim=2)
    index.add(Document("a", "w", vector=np.ones(2, dtype=np.float32), fields={"tags": ["x"], "year": 1}))
    with pytest.raises(UnknownFieldError, match=r"'text'.*fields: tags, year.*not fields"):
        index.facets(None, ["text"])
    with pytest.raises(UnknownFieldError, match="'vector'"):
        index.facets(None, ["vector"])
    with pytest.raises(InvalidParameterError, match="@time cannot be a facet"):
        index.facets(None, ["@time"])
    with pytest.raises(InvalidParameterError, match="list of field names, got 'tags'"):
        index.facets(None, "tags")
    with pytest.raises(InvalidParameterError, match="at least one"):
        index.facets(None, [])
    with pytest.raises(InvalidParameterError, match="twice"):
        index.facets(None, ["tags", "tags"])
    for k in (0, -1, MAX_FACET_K + 1, True, 2.0):
        with pytest.raises(InvalidParameterError, match="facet k"):
            index.facets(None, ["tags"], k)  # type: ignore[arg-type]
    with pytest.raises(FilterTypeError):
        index.facets("year == 'x'", ["tags"])
    with pytest.raises(UnknownFieldError):  # refused before any scorer runs
        index.search("w", 1, RRF(), BM25Scorer(), facets=["nope"])
    with pytest.raises(InvalidParameterError, match="facet k"):
        index.search("w", 1, RRF(), BM25Scorer(), facets=["tags"], facet_k=0)


def test_facet_memory_is_bounded_by_the_field_index() -> None:
    """Counting allocates about a byte per document and 9 per (document, value), not per value object."""
    n = 60_000
    index = Index("english")
    index.add_many(
        [Document(f"d{i:06d}", "w", fields={"tags": [f"t{i % 50}", f"u{i % 7}"]}) for i in range(n)],
        progress=False,
    )
    index.facets(None, ["tags"])  # warm: the field index and the snapshot are built once
    tracemalloc.start()
    try:
        facets = index.facets(None, ["tags"], k=3)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert facets["tags"][0][1] == n // 7 + 1
    assert peak < 20 * 2 * n + (1 << 20), f"peak {peak:,} bytes for {n:,} documents"
