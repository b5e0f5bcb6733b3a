"""The sentences of README.md and docs/*.md that state a checkable fact, checked.

tests/test_docs.py runs every code example; this file checks what the prose around them
claims (a count, a rule, a size, a listing), each against the code or a real build, so a
sentence that stops being true fails here. Each test quotes the words it checks.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest

from tests.test_docs import BLOCKS, REPO, run_python
from weftsearch import RRF, BM25Scorer, Document, Index, Query, VectorScorer
from weftsearch.cli import main

README = REPO / "README.md"
DATASETS = REPO.parent / "shared" / "datasets"
NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def readme() -> str:
    return README.read_text(encoding="utf-8")


def paragraph(text: str, start: str) -> str:
    """The Markdown paragraph of ``text`` that begins with ``start`` (up to the next blank line)."""
    at = text.index(start)
    end = text.find("\n\n", at)
    return " ".join(text[at : end if end >= 0 else None].split())


# ---------------------------------------------------------------------- set-up: the C libraries


def setup_sources() -> list[str]:
    """The ``sources`` of every ``Extension`` in setup.py's ``ext_modules``, read from its syntax."""
    tree = ast.parse((REPO / "setup.py").read_text(encoding="utf-8"))
    sources: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Extension":
            for keyword in node.keywords:
                if keyword.arg == "sources":
                    sources += [ast.literal_eval(element) for element in keyword.value.elts]  # type: ignore[attr-defined]
    return sources


def test_the_readme_names_every_c_library_setup_py_builds() -> None:
    # README: "gcc builds three small C libraries at install time (setup.py): the vector scan
    # (`src/weftsearch/native/_scan.c`), ...": the count and the names are setup.py's.
    sentence = paragraph(readme(), "gcc builds ")
    count = re.match(r"gcc builds (\w+) small C librar", sentence)
    assert count is not None, sentence
    named = re.findall(r"`(src/weftsearch/[\w./]+\.c)`", sentence)
    sources = setup_sources()
    assert sources, "setup.py builds no Extension: the parser above is out of date"
    assert NUMBER_WORDS[count.group(1)] == len(sources) == len(set(named))
    assert sorted(set(named)) == sorted(sources)
    assert all((REPO / source).is_file() for source in sources)


# ---------------------------------------------------------------------- the first example


def test_propagation_in_the_first_example_changes_no_rank_and_adds_no_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # README: "Here it moves nothing: ... its ranks are BM25's ... no document BM25 did not find
    # enters its stream", and both searches give the same top 5 in the same order.
    assert "so `rsj` (citing `idf`, cited by `bm25`) moves above `bm25`" not in readme()
    assert "its ranks are BM25's" in paragraph(readme(), "The link signal here is score propagation")
    (block,) = [b for b in BLOCKS if b.path == README and "PropagationScorer(text)," in b.source]
    monkeypatch.chdir(tmp_path)
    run_python(block)
    hybrid, more = capsys.readouterr().out.strip().split("\n\n")
    order = [line.split()[1] for line in hybrid.splitlines()]
    assert [line.split()[1] for line in more.splitlines()] == order
    for line in more.splitlines():
        ranks = dict(re.findall(r"(bm25|vector|propagate|recency) (\S+)", line))
        assert ranks["propagate"] == ranks["bm25"], line  # same rank, and absent ("-") where BM25 is


# ---------------------------------------------------------------------- filters: how many hits come back


def filtered_index() -> Index:
    """Ten documents matching ``year >= 2000``, three of them with the query's term; all with vectors."""
    index = Index()
    index.add_many(
        Document(
            f"d{i}",
            "rank fusion" if i < 3 else f"other words {i}",
            vector=np.array([1.0, float(i)], dtype=np.float32),
            fields={"year": 2000 + i},
        )
        for i in range(10)
    )
    index.add(Document("old", "rank fusion", vector=np.array([1.0, 0.0]), fields={"year": 1990}))
    return index


def test_a_filtered_search_returns_k_hits_when_a_signal_has_evidence_for_k_matching_documents() -> None:
    # README: "a search returns `min(k, n)` hits, where n counts the matching documents at least
    # one of its signals has evidence for" (the vector signal: every document with a vector).
    index = filtered_index()
    query = Query("rank fusion", vector=np.array([1.0, 1.0], dtype=np.float32), filter="year >= 2000")
    for k in (1, 5, 10):
        results = index.search(query, k, RRF(), BM25Scorer(), VectorScorer())
        assert len(results) == k and "old" not in results.keys
    assert len(index.search(query, 50, RRF(), BM25Scorer(), VectorScorer())) == 10


def test_a_filtered_search_with_bm25_alone_returns_only_matching_documents_with_a_query_term() -> None:
    # README: "BM25 alone returns only documents holding a query term ... so fewer than `k` come back".
    index = filtered_index()
    query = Query("rank fusion", filter="year >= 2000")
    results = index.search(query, 5, RRF(), BM25Scorer())
    assert sorted(results.keys) == ["d0", "d1", "d2"]  # ten match the filter; three hold a term
    assert not results.cut_short
    text = paragraph(readme(), "Filters: `Query.filter`")
    assert "whenever `k` documents match" not in text and "BM25 alone returns only documents" in text


# ---------------------------------------------------------------------- index sizes on SciFact


def megabytes(path: Path) -> float:
    return sum(f.stat().st_size for f in path.iterdir() if f.is_file()) / 1e6


def scifact_documents() -> list[Document]:
    """SciFact's corpus as README's sizes are measured from Python: title and text as one text."""
    documents = []
    with (DATASETS / "scifact" / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            documents.append(
                Document(str(record["_id"]), f"{record.get('title', '')} {record.get('text', '')}")
            )
    return documents


#: The sizes README.md and docs/FORMAT.md quote, in MB (10^6 bytes), by how the index is built.
QUOTED_SIZES = {"python": 5.9, "python --no-store-text": 2.8, "cli": 6.6, "cli --no-store-text": 3.5}


def needs_scifact() -> None:
    if not (DATASETS / "scifact" / "corpus.jsonl").is_file():
        pytest.skip(f"SciFact is not at {DATASETS / 'scifact'}")


def test_the_quoted_scifact_index_sizes_are_in_both_documents() -> None:
    # README and docs/FORMAT.md: from Python 5.9 MB (2.8 MB without text); `weft-search index`,
    # which also keeps each title as a keyword field, 6.6 MB (3.5 MB without text).
    readme_text = paragraph(readme(), "Stored text is most of an index's size")
    format_text = (REPO / "docs" / "FORMAT.md").read_text(encoding="utf-8")
    for size in QUOTED_SIZES.values():
        assert f"{size} MB" in readme_text and f"{size} MB" in format_text, size


@pytest.mark.data
@pytest.mark.parametrize("store_text", [True, False])
def test_the_quoted_scifact_index_size_built_from_python(tmp_path: Path, store_text: bool) -> None:
    needs_scifact()
    with Index.create(tmp_path / "idx", store_text=store_text) as index:
        index.add_many(scifact_documents(), progress=False)
        index.commit()
    label = "python" if store_text else "python --no-store-text"
    assert round(megabytes(tmp_path / "idx"), 1) == QUOTED_SIZES[label]


@pytest.mark.data
@pytest.mark.slow
@pytest.mark.parametrize("flags", [[], ["--no-store-text"]])
def test_the_quoted_scifact_index_size_built_by_the_cli(
    tmp_path: Path, flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    needs_scifact()
    assert main(["index", str(DATASETS / "scifact"), "--index", str(tmp_path / "idx"), *flags]) == 0
    capsys.readouterr()
    assert round(megabytes(tmp_path / "idx"), 1) == QUOTED_SIZES[" ".join(["cli", *flags])]


# ---------------------------------------------------------------------- byte-identical builds


def build(path: Path, documents: list[Document], workers: int, index_id: str | None) -> dict[str, bytes]:
    with Index.create(path, index_id=index_id) as index:
        index.add_many(documents, workers=workers, progress=False)
        index.commit()
    return {file.name: file.read_bytes() for file in sorted(path.iterdir())}


def test_builds_are_byte_identical_whatever_the_worker_count_given_one_index_id(tmp_path: Path) -> None:
    # README: "two builds of the same documents give byte-identical files, whatever the worker
    # count, when they share an index id"; otherwise only the id and what covers it differ.
    assert "byte-identical" in paragraph(readme(), "`Index.create(path)` / `Index.open(path)` keep")
    documents = [
        Document(f"d{i:05d}", f"word{i % 97} alpha beta{i % 13}", fields={"year": i % 20})
        for i in range(2_100)
    ]  # 2,000 or more: add_many forks its workers
    fixed = "0123456789abcdef" * 2
    one = build(tmp_path / "one", documents, 1, fixed)
    two = build(tmp_path / "two", documents, 2, fixed)
    assert one == two
    three = build(tmp_path / "three", documents, 1, None)
    four = build(tmp_path / "four", documents, 2, None)
    assert three.keys() == four.keys() == one.keys()
    segment = "seg-000001.wseg"
    assert three[segment] != four[segment]
    # A section file differs in its stamp and the header CRC over it (bytes 28..63) only.
    assert three[segment][:28] == four[segment][:28] and three[segment][64:] == four[segment][64:]
    # The manifest: in the index id and the identity checksums (and its own CRC) only.
    manifests = [json.loads(files["MANIFEST"])["body"] for files in (three, four)]
    for body in manifests:
        body.pop("index_id")
        for entry in body["segments"]:
            entry.pop("checksum")
    assert manifests[0] == manifests[1]


# ---------------------------------------------------------------------- fusion rules


FUSION_TESTS = {
    "tests/fusion/test_score.py": (
        "test_zscore_absent_gets_the_streams_minimum_z",
        "test_minmax_constant_stream_gives_one_to_each_of_its_candidates",
        "test_minmax_absent_counts_as_the_streams_last",
        "test_zscore_constant_stream_contributes_zero_to_everyone",
        "test_a_zero_weight_removes_the_stream_entirely",
    ),
    "tests/fusion/test_weighted.py": ("test_a_zero_weight_removes_the_stream_entirely",),
}


def test_the_fusion_rules_in_architecture_md_name_the_tests_that_pin_them() -> None:
    # docs/ARCHITECTURE.md, "Fusers": the rules for an absent document, a constant stream and a
    # weight of 0, each with the test that exercises it; those tests must exist.
    rules = paragraph((REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8"), "**Fusion rules")
    for phrase in ("minimum z-score", "ranx gives 0", "weight 0"):
        assert phrase in rules, phrase
    for path, names in FUSION_TESTS.items():
        source = (REPO / path).read_text(encoding="utf-8")
        for name in names:
            assert f"`{name}`" in rules, name
            assert f"def {name}(" in source, f"{path} has no {name}"


# ---------------------------------------------------------------------- docs/FORMAT.md's directory listing


def listing_patterns() -> dict[str, re.Pattern[str]]:
    """Each entry of FORMAT.md's listing of an index directory, as a pattern over relative paths."""
    text = (REPO / "docs" / "FORMAT.md").read_text(encoding="utf-8")
    section = text[text.index("## The index directory") :]
    block = section[section.index("```\n") + 4 : section.index("\n```", section.index("```\n") + 4)]
    patterns: dict[str, re.Pattern[str]] = {}
    folder = ""
    for line in block.splitlines():
        entry = re.match(r"^( {2,})(\S+) {2,}\S", line)
        if entry is None:
            continue
        indent, name = len(entry.group(1)), entry.group(2)
        if indent == 2:
            folder = name if name.endswith("/") else ""
        elif folder:
            name = folder + name
        pattern = re.sub(r"\d+", r"\\d+", re.escape(name))  # a number in the listing is any number
        for placeholder, meaning in (("NAME", "[A-Za-z0-9_-]+"), ("PID", r"\d+"), ("XXXXXXXX", r"\w+")):
            pattern = pattern.replace(placeholder, meaning)
        patterns[name] = re.compile(pattern)
    return patterns


def kind(path: str, patterns: dict[str, re.Pattern[str]]) -> str | None:
    return next((name for name, pattern in patterns.items() if pattern.fullmatch(path)), None)


def test_format_md_lists_every_kind_of_file_an_index_directory_holds(tmp_path: Path) -> None:
    pytest.importorskip("fastapi", reason="the profile is made through the server's API")
    from fastapi.testclient import TestClient

    from weftsearch.server.app import create_app
    from weftsearch.storage.directory import _OWNED

    path = tmp_path / "idx"
    with Index.create(path) as index:
        index.add_many([Document("a", "alpha"), Document("b", "beta"), Document("c", "gamma")])
        index.commit()
        index.delete("b")
        index.commit()  # a tombstone file
    with TestClient(create_app(str(path), api_key="k")) as client:
        for _ in range(2):  # versions 1 and 2
            answer = client.post(
                "/v1/profiles", json={"name": "text-v1", "spec": "bm25@100"}, headers={"X-API-Key": "k"}
            )
            assert answer.status_code == 201, answer.text
    present = sorted(p.relative_to(path).as_posix() + ("/" if p.is_dir() else "") for p in path.rglob("*"))
    patterns = listing_patterns()
    assert {"profiles/", "MANIFEST", "write.lock"} <= set(patterns)
    unlisted = [name for name in present if kind(name, patterns) is None]
    assert not unlisted, f"docs/FORMAT.md's listing names no kind for {unlisted} (present: {present})"
    assert {kind(name, patterns) for name in present} >= {
        "MANIFEST", "write.lock", "seg-000001.wseg", "seg-000001.del-000004", "profiles/",
        "profiles/NAME.v000001.json",
    }  # fmt: skip
    # The names only a write under way leaves (what the sweep owns, and a profile's temporary).
    transient = ["seg-000007.wseg.tmp-4242", "seg-000007.del-000012.tmp-4242", "MANIFEST.tmp"]
    assert all(_OWNED.fullmatch(name) for name in transient)
    transient.append("profiles/.text-v1.v000003.json.k2_9xq1z.part")
    assert [name for name in transient if kind(name, patterns) is None] == []


def test_format_md_names_every_key_of_a_manifest_body(tmp_path: Path) -> None:
    # docs/FORMAT.md, "Manifest": "The body holds `format` ..., `extra` ... and `segments`".
    text = paragraph((REPO / "docs" / "FORMAT.md").read_text(encoding="utf-8"), "**Manifest.**")
    listed = text[text.index("The body holds") : text.index("`segments`:")] + "`segments`"
    listed = re.sub(r"\([^()]*\)", "", listed)  # what a key holds, in brackets, names no key
    with Index.create(tmp_path / "idx") as index:
        index.add(Document("a", "alpha"))
        index.commit()
    body = json.loads((tmp_path / "idx" / "MANIFEST").read_text(encoding="utf-8"))["body"]
    assert set(re.findall(r"`(\w+)`", listed)) == set(body)


def test_format_md_gives_the_block_table_its_four_rows() -> None:
    # docs/FORMAT.md: `post.blocks` is `<u4` x 4B and "must hold 4B values; 3B in version 2".
    from weftsearch.storage.postings import BLOCK_ROWS

    text = " ".join((REPO / "docs" / "FORMAT.md").read_text(encoding="utf-8").split())
    assert BLOCK_ROWS == 4
    assert f"`post.blocks` must hold {BLOCK_ROWS}B values; 3B in version 2" in text
    assert "must hold 3B values)" not in text


def test_architecture_md_names_every_subcommand_of_the_cli() -> None:
    # docs/ARCHITECTURE.md, "CLI": "`cli/index.py`: `index | add | delete | ...`; `cli/search.py`:
    # `search` ...; `recall` ... and `bench` ... bring their own parsers, which only `cli/` adds".
    from tests.test_docs import _subparsers
    from weftsearch.cli import build_parser

    text = paragraph((REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8"), "**CLI**")
    named = {word for quoted in re.findall(r"`([a-z |]+)`", text) for word in quoted.split() if word != "|"}
    commands = set(_subparsers(build_parser()))
    assert {"index", "search", "eval", "serve"} <= commands
    assert commands <= named, f"not named: {sorted(commands - named)}"
