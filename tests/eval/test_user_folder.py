"""``weft-search eval`` on a folder of one's own: BEIR layout, vectors, links, times, fields, plugins, splits.

Everything is built in ``tmp_path``: a six-document BEIR folder whose
``corpus.jsonl`` gives links, times and fields (the keys ``weft-search index``
reads), vectors for every document and for two of the three queries, and a
plugin module that registers a scorer of its own. Nobody pins this data: the
outputs say so, and never call it unpublishable.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from weftsearch.cli import main
from weftsearch.cli.eval import resolve_dataset, run_experiment
from weftsearch.errors import CorpusFormatError, InvalidParameterError, PairingError, PluginError
from weftsearch.eval import build_testbed, load_beir
from weftsearch.eval.datasets import sha256_bytes
from weftsearch.ranking import specs

DOCUMENTS: list[dict[str, Any]] = [
    {
        "_id": "d1",
        "title": "Gene X",
        "text": "gene x causes disease y",
        "links": ["d2", "d3"],
        "time": "2020-01-01",
        "fields": {"votes": 3},
    },
    {
        "_id": "d2",
        "title": "Gene Z",
        "text": "gene z and disease y",
        "links": ["d1"],
        "time": "2021-06-01",
        "fields": {"votes": 1},
    },
    {
        "_id": "d3",
        "text": "sea birds follow fishing boats",
        "time": 1_600_000_000,
        "metadata": {"votes": 7, "nested": {"dropped": True}},
    },
    {"_id": "d4", "title": "Weather", "text": "rain and wind over the sea", "links": ["d5"]},
    {"_id": "d5", "text": "disease spreads among sea birds", "links": ["d4"], "time": "2022-03-01"},
    {"_id": "d6", "text": "fishing boats at sea in the rain"},
]
QUERIES = [("q1", "what causes disease y"), ("q2", "birds at sea"), ("q3", "rain over the sea")]
VECTORS = {
    "d1": [1.0, 0.0, 0.0],
    "d2": [0.9, 0.1, 0.0],
    "d3": [0.0, 1.0, 0.0],
    "d4": [0.0, 0.0, 1.0],
    "d5": [0.1, 0.9, 0.0],
    "d6": [0.0, 0.3, 0.9],
}
QUERY_VECTORS = {"q1": [1.0, 0.1, 0.0], "q3": [0.0, 0.1, 1.0]}  # q2 has none

PLUGIN = '''
import numpy as np
from weftsearch.engine.stream import Stream
from weftsearch.eval import register_scorer


class Votes:
    """Ranks documents by their "votes" field (a field from corpus.jsonl)."""

    name = "votes"

    def score(self, snapshot, query, k):
        ids = np.arange(snapshot.n_docs, dtype=np.int64)
        votes = np.array([float(f.get("votes", 0)) for f in snapshot.fields_of(ids)])
        keep = np.flatnonzero(votes > 0)
        order = keep[np.argsort(-votes[keep], kind="stable")][:k]
        return Stream(ids[order], votes[order])


register_scorer("votes", lambda builder, expr: Votes(), replace=True)
'''


def write_folder(folder: Path, splits: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCUMENTS), encoding="utf-8")
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES), encoding="utf-8"
    )
    (folder / "qrels").mkdir(exist_ok=True)
    for name, text in splits.items():
        (folder / "qrels" / f"{name}.tsv").write_text(text, encoding="utf-8")
    return folder


def write_vectors(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for part, rows in (("corpus", VECTORS), ("queries", QUERY_VECTORS)):
        np.save(folder / f"{part}.npy", np.array(list(rows.values()), dtype=np.float32))
        (folder / f"{part}_ids.txt").write_text("".join(f"{key}\n" for key in rows), encoding="utf-8")
    return folder


SPLITS = {
    "dev": "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t1\nq2\td3\t1\nq3\td4\t1\n",
    "train": "q2\td5\t1\nq3\td6\t1\n",
}


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A plugin module on sys.path; the scorer table is restored afterwards."""
    name = f"weft_test_plugin_{abs(hash(str(tmp_path)))}"
    (tmp_path / f"{name}.py").write_text(PLUGIN, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(specs, "SCORER_FACTORIES", dict(specs.SCORER_FACTORIES))
    yield name
    sys.modules.pop(name, None)


def test_eval_on_a_users_folder_end_to_end(
    tmp_path: Path, plugin: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_folder(tmp_path / "my-folder", SPLITS)
    vectors = write_vectors(tmp_path / "my-vectors")
    out = tmp_path / "report"
    arms = [
        "text=bm25",
        "vector=vector(exact=true)",
        "graph=rrf(bm25, graph(seed=bm25))",
        "recency=rrf(bm25, recency(half_life=365))",
        "votes=rrf(bm25, votes)",
    ]
    argv = ["eval", str(folder), "--vectors", str(vectors), "--split", "dev", "--plugin", plugin]
    argv += ["--resamples", "50", "--no-plots", "--out", str(out), "--arms", *arms]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    # Private data: no public pin, said so; never UNPUBLISHABLE.
    assert printed.startswith("UNPINNED: no public pin exists") and "UNPUBLISHABLE" not in printed
    assert "my-folder (split dev), 3 queries" in printed
    # q2 has no query vector: the vector arm runs on two of three, and says so beside the arm.
    assert "inputs of vector: vector: 2/3 queries have a query vector" in printed
    record = json.loads((out / "report.json").read_text(encoding="utf-8"))
    testbed = record["testbed"]
    assert testbed["provenance"] == "unpinned" and testbed["publishable"] is True
    assert record["unpublishable"] is None and record["unpinned"].startswith("UNPINNED")
    assert testbed["split"] == "dev" and testbed["queries"] == 3
    assert [f["path"] for f in testbed["files"]] == [
        "corpus.jsonl",
        "queries.jsonl",
        "qrels/dev.tsv",
        "qrels/train.tsv",
    ]
    corpus_sha = sha256_bytes((folder / "corpus.jsonl").read_bytes())
    assert testbed["files"][0]["sha256"] == corpus_sha and testbed["files"][0]["expected_sha256"] is None
    assert testbed["vectors"]["documents_with_vector"] == 6 and testbed["vectors"]["queries_with_vector"] == 2
    coverage = {entry["arm"]["name"]: entry["coverage"] for entry in record["arms"]}
    assert coverage["vector"] == [
        {"signal": "vector", "covered": 2, "queries": 3, "missing": ["a query vector"]}
    ]
    # Links, times and the plugin's field-reading scorer all had their inputs.
    for arm in ("graph", "recency", "votes"):
        assert all(c["covered"] == 3 for c in coverage[arm]), arm
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert "- vector: vector: 2/3 queries have a query vector" in markdown
    assert "UNPUBLISHABLE" not in markdown
    for arm in ("text", "vector", "graph", "recency", "votes"):
        lines = (out / f"{arm}.trec").read_text(encoding="utf-8").splitlines()
        assert lines and {line.split()[-1] for line in lines} == {arm}
    # The one-scorer arm wrote BM25's own scores, not normalised ones.
    assert record["arms"][0]["arm"]["fuser"]["name"] == "none"


def test_the_python_api_attaches_vectors_links_and_times(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "mine", SPLITS)
    vectors = write_vectors(tmp_path / "vectors")
    collection = load_beir(
        folder, name="mine", split="dev", vectors=vectors, links={"d6": ["d3"]}, times={"d6": "2023-01-01"}
    )
    assert collection.provenance == "unpinned" and collection.publishable
    assert collection.qrels == collection.splits["dev"]
    by_key = {d.key: d for d in collection.documents}
    assert by_key["d1"].links == ("d2", "d3") and by_key["d6"].links == ("d3",)
    assert by_key["d3"].fields == {"votes": 7}  # scalar metadata kept, nested dropped
    assert by_key["d1"].fields == {"votes": 3, "title": "Gene X"}
    assert by_key["d6"].time is not None and by_key["d4"].time is None
    testbed = build_testbed(collection)  # the collection's own vectors are attached
    assert testbed.vectors is collection.vectors and testbed.vectors is not None
    assert testbed.vectors.partial and testbed.vectors.query_ids == ("q1", "q3")
    assert testbed.queries["q2"].vector is None and testbed.queries["q1"].vector is not None
    assert testbed.index.get("d6").vector is not None
    with pytest.raises(InvalidParameterError, match="links name 1 documents not in the corpus"):
        load_beir(folder, split="dev", links={"nope": ["d1"]})


def test_splits_are_chosen_and_an_unknown_one_lists_the_others(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "mine", SPLITS)
    with pytest.raises(InvalidParameterError, match="splits dev, train and none named 'test'"):
        load_beir(folder)
    with pytest.raises(InvalidParameterError, match=r"no split 'test2' .*\(splits: dev, train\)"):
        load_beir(folder, split="test2")
    assert main(["eval", str(folder), "--split", "nope", "--resamples", "10"]) == 2
    only = write_folder(tmp_path / "only", {"judged": SPLITS["dev"]})
    assert load_beir(only).qrels == load_beir(only, split="judged").splits["judged"]


def test_plugin_errors_are_typed_and_name_the_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = write_folder(tmp_path / "mine", SPLITS)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError, match=r"--plugin 'no_such_weft_plugin'.*ModuleNotFoundError"):
        run_experiment(folder, None, split="dev", plugins=["no_such_weft_plugin"], resamples=10)
    (tmp_path / "weft_broken_plugin.py").write_text("raise RuntimeError('boom')\n", encoding="utf-8")
    with pytest.raises(PluginError, match=r"--plugin 'weft_broken_plugin'.*RuntimeError: boom"):
        run_experiment(folder, None, split="dev", plugins=["weft_broken_plugin"], resamples=10)
    sys.modules.pop("weft_broken_plugin", None)


def test_a_known_name_means_the_pinned_collection_and_a_path_means_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_folder(tmp_path / "cacm", SPLITS)
    monkeypatch.chdir(tmp_path)
    assert resolve_dataset("cacm") == ("cacm", None)
    assert resolve_dataset("./cacm") == ("cacm", Path("./cacm"))
    with pytest.raises(InvalidParameterError, match="neither a known collection"):
        resolve_dataset("absent-folder")


def test_vectors_written_by_embed_are_checked_against_the_texts(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "mine", SPLITS)
    vectors = write_vectors(tmp_path / "vectors")
    texts = {d["_id"]: (f"{d['title']} {d['text']}" if d.get("title") else d["text"]) for d in DOCUMENTS}
    for part, rows, source in (("corpus", VECTORS, texts), ("queries", QUERY_VECTORS, dict(QUERIES))):
        entry = {
            "name": part,
            "model": {"name": "my-model"},
            "npy": f"{part}.npy",
            "ids_file": f"{part}_ids.txt",
            "count": len(rows),
            "npy_sha256": sha256_bytes((vectors / f"{part}.npy").read_bytes()),
            "ids_sha256": sha256_bytes((vectors / f"{part}_ids.txt").read_bytes()),
            "input_texts_sha256": sha256_bytes("\n".join(source[key] for key in rows).encode("utf-8")),
        }
        (vectors / f"{part}.json").write_text(json.dumps(entry), encoding="utf-8")
    loaded = load_beir(folder, split="dev", vectors=vectors)
    assert loaded.vectors is not None and loaded.vectors.model == "my-model"
    # Query vectors of other texts belong to other queries: refused.
    entry = json.loads((vectors / "queries.json").read_text(encoding="utf-8"))
    entry["input_texts_sha256"] = "0" * 64
    (vectors / "queries.json").write_text(json.dumps(entry), encoding="utf-8")
    with pytest.raises(PairingError, match="the queries were embedded from texts"):
        load_beir(folder, split="dev", vectors=vectors)


def test_documents_without_a_vector_row_are_indexed_without_one(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "mine", SPLITS)
    vectors = write_vectors(tmp_path / "vectors")
    rows = {key: row for key, row in VECTORS.items() if key != "d6"}
    np.save(vectors / "corpus.npy", np.array(list(rows.values()), dtype=np.float32))
    (vectors / "corpus_ids.txt").write_text("".join(f"{key}\n" for key in rows), encoding="utf-8")
    testbed = build_testbed(load_beir(folder, split="dev", vectors=vectors))
    assert testbed.index.get("d6").vector is None and testbed.index.get("d5").vector is not None
    assert testbed.record()["vectors"]["documents_with_vector"] == 5
    # A row for a document that is not in the corpus is an error, not silently dropped.
    (vectors / "corpus_ids.txt").write_text("".join(f"{key}\n" for key in [*list(rows)[:-1], "zz"]))
    with pytest.raises(CorpusFormatError, match=r"1 rows for no documents of beir \(first: 'zz'\)"):
        load_beir(folder, split="dev", vectors=vectors)


def test_eval_embed_embeds_documents_and_queries_with_the_named_embedder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--embed NAME`` (a ``--plugin`` registers it): every query gets a vector, the report names it."""
    folder = write_folder(tmp_path / "my-folder", SPLITS)
    out = tmp_path / "report"
    argv = ["eval", str(folder), "--split", "dev", "--plugin", "tests.fake_embedder", "--embed", "fake-16"]
    argv += ["--resamples", "20", "--no-plots", "--out", str(out), "--arms", "text=bm25", "vector=vector"]
    assert main(argv) == 0, capsys.readouterr().err
    record = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert record["testbed"]["embedder"]["name"] == "fake-16"
    assert record["testbed"]["embedder"]["dim"] == 16
    coverage = {entry["arm"]["name"]: entry["coverage"] for entry in record["arms"]}
    assert all(c["covered"] == 3 for c in coverage["vector"])  # all three queries embedded


def test_eval_embed_refuses_stored_vectors_and_unknown_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_folder(tmp_path / "my-folder", SPLITS)
    vectors = write_vectors(tmp_path / "my-vectors")
    base = ["eval", str(folder), "--split", "dev", "--resamples", "10", "--no-plots"]
    assert (
        main([*base, "--plugin", "tests.fake_embedder", "--embed", "fake-16", "--vectors", str(vectors)]) == 2
    )
    assert "give it or --vectors" in capsys.readouterr().err
    assert main([*base, "--embed", "no-such-embedder"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown embedder 'no-such-embedder'" in err and len(err.splitlines()) == 1
    with pytest.raises(InvalidParameterError, match="not both"):
        run_experiment(folder, None, split="dev", embed="fake-16", vectors=str(vectors), resamples=10)


def test_eval_syntax_lucene_reads_the_query_file_as_the_query_language(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--syntax lucene``: a query file of boolean queries ranks as the engine ranks them parsed."""
    folder = write_folder(tmp_path / "my-folder", SPLITS)
    (folder / "queries.jsonl").write_text(
        "".join(
            json.dumps({"_id": q, "text": t}) + "\n"
            for q, t in [("q1", "+disease -z"), ("q2", '"sea birds"'), ("q3", "rain^3 OR sea")]
        ),
        encoding="utf-8",
    )
    out = tmp_path / "report"
    argv = ["eval", str(folder), "--split", "dev", "--resamples", "10", "--no-plots", "--arms", "text=bm25"]
    assert main([*argv, "--syntax", "lucene", "--out", str(out)]) == 0, capsys.readouterr().err
    record = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert record["testbed"]["query_syntax"] == "lucene"
    run: dict[str, list[str]] = {}
    for line in (out / "text.trec").read_text(encoding="utf-8").splitlines():
        qid, _, key, *_ = line.split()
        run.setdefault(qid, []).append(key)
    assert "d2" not in run["q1"] and set(run["q1"]) == {"d1", "d5"}  # +disease -z: d2 holds "z"
    # Plain text keeps its meaning: "-z" is one more word, and d2 matches "disease".
    plain = tmp_path / "plain"
    assert main([*argv, "--out", str(plain)]) == 0
    assert "query_syntax" not in json.loads((plain / "report.json").read_text(encoding="utf-8"))["testbed"]
    (folder / "queries.jsonl").write_text(
        "".join(
            json.dumps({"_id": q, "text": t}) + "\n" for q, t in [("q1", '"open'), ("q2", "a"), ("q3", "b")]
        ),
        encoding="utf-8",
    )
    assert main([*argv, "--syntax", "lucene", "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert "query 'q1'" in err and "position" in err
