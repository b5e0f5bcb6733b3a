"""``store_text=False``: the text is analysed, not stored (docs/FORMAT.md, "Stored text").

Search, scores, keys, fields, links, times and vectors are exactly those of the same
documents indexed with their text; reading a document gives ``text == ""``; the option is
recorded in the manifest and kept by reopening, merging and the CLI; every consumer that
shows text (CLI search output and explain, the LangChain retriever) works without it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from weftsearch import RRF, BM25Scorer, Document, Index, Query, VectorScorer
from weftsearch.cli import main
from weftsearch.errors import InvalidParameterError
from weftsearch.storage import MANIFEST

TEXTS = [
    "graph search over citation links",
    "dense vector retrieval with embeddings",
    "graph neural networks for retrieval",
    "sparse lexical search bm25 baseline",
    "hybrid retrieval fuses lexical and dense signals",
]


def documents() -> list[Document]:
    rng = np.random.default_rng(7)
    return [
        Document(
            f"doc-{i}",
            text,
            vector=rng.standard_normal(4).astype(np.float32),
            links=(f"doc-{(i + 1) % len(TEXTS)}",),
            time=1.6e9 + i * 86_400.0,
            fields={"title": f"Title {i}", "n": i},
        )
        for i, text in enumerate(TEXTS)
    ]


def build(path: Path, store_text: bool, segments: int = 1) -> Index:
    docs = documents()
    index = Index.create(path, analyzer="english", store_text=store_text, index_id="ab" * 16)
    share = -(-len(docs) // segments)
    for start in range(0, len(docs), share):
        index.add_many(docs[start : start + share])
        index.commit()
    return index


def answers(index: Index) -> list[list[tuple[str, float, dict[str, object]]]]:
    out = []
    for text in ("graph retrieval", "dense lexical", "search"):
        query = Query(text, vector=np.ones(4, dtype=np.float32))
        results = index.search(query, 5, RRF(), BM25Scorer(), VectorScorer())
        out.append([(hit.key, hit.score, hit.to_dict()) for hit in results])
    return out


@pytest.mark.parametrize("segments", [1, 2])
def test_everything_but_the_text_is_unchanged(tmp_path: Path, segments: int) -> None:
    with (
        build(tmp_path / "with", True, segments) as stored,
        build(tmp_path / "without", False, segments) as bare,
    ):
        assert stored.store_text and not bare.store_text
        assert answers(bare) == answers(stored)
        for original in documents():
            got = bare.get(original.key)
            assert got.text == ""
            assert stored.get(original.key).text == original.text
            assert got.fields == original.fields and got.links == original.links
            assert got.timestamp == original.timestamp
            assert got.vector is not None and original.vector is not None
            assert np.array_equal(got.vector, original.vector)
        snapshot = bare.snapshot()
        assert all(snapshot.document(i).text == "" for i in range(len(TEXTS)))
        assert bare.scrub().ok


def test_recorded_in_the_manifest_and_kept_by_reopen_and_merge(tmp_path: Path) -> None:
    path = tmp_path / "index"
    build(path, False, segments=2).close()
    manifest = json.loads((path / MANIFEST).read_text())
    assert manifest["body"]["extra"]["store_text"] is False  # beside the field types ("fields")
    with Index.open(path) as index:
        assert not index.store_text
        index.add(Document("doc-new", "late graph text"))
        index.commit()
        index.merge(force=True)
        assert index.segment_count == 1
        assert index.get("doc-new").text == "" and index.get("doc-0").text == ""
        assert index.search("late", 3, RRF(), BM25Scorer())[0].key == "doc-new"
    with Index.open(path, readonly=True) as again:
        assert not again.store_text
    # The default writes no extra key: manifests of indexes that store text keep their bytes.
    build(tmp_path / "default", True).close()
    assert "store_text" not in json.loads((tmp_path / "default" / MANIFEST).read_text())["body"]["extra"]


def test_stored_text_costs_bytes(tmp_path: Path) -> None:
    with build(tmp_path / "with", True) as stored, build(tmp_path / "without", False) as bare:
        assert bare.stats().bytes_on_disk < stored.stats().bytes_on_disk


def test_store_text_must_be_a_bool(tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterError, match="store_text"):
        Index.create(tmp_path / "index", store_text="no")  # type: ignore[arg-type]


def test_cli_index_without_text_then_search_and_explain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(json.dumps({"_id": f"d{i}", "text": text}) + "\n" for i, text in enumerate(TEXTS)),
        encoding="utf-8",
    )
    path = tmp_path / "index"
    assert main(["index", str(corpus), "--index", str(path), "--no-store-text"]) == 0
    assert json.loads((path / MANIFEST).read_text())["body"]["extra"]["store_text"] is False
    capsys.readouterr()
    assert main(["search", "graph retrieval", "--index", str(path)]) == 0
    shown = capsys.readouterr().out
    assert "d2" in shown and "(text not stored)" in shown
    assert main(["search", "graph retrieval", "--index", str(path), "--explain"]) == 0
    assert "d2" in capsys.readouterr().out


def test_langchain_retriever_without_text(tmp_path: Path) -> None:
    pytest.importorskip("langchain_core")
    from weftsearch.integrations.langchain import WeftRetriever

    with build(tmp_path / "index", False) as index:
        found = WeftRetriever(index, k=2).invoke("graph retrieval")
        assert [d.id for d in found] and all(d.page_content == "" for d in found)
