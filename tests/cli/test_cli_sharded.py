"""``weft-search stats|search|scrub`` on a sharded index's directory (issue 26, item 16).

They used to say "MANIFEST is missing"; they now recognise ``SHARDS`` and read the sharded
index: the same answers as :class:`ShardedIndex` itself, or one clear line (exit 2) for what a
sharded index cannot do.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from weftsearch import RRF, BM25Scorer, Document, Index
from weftsearch.cli import main
from weftsearch.distributed import RECORD, ShardedIndex

WORDS = ["apple", "banana", "cherry", "damson"]


@pytest.fixture
def sharded(tmp_path: Path) -> Path:
    root = tmp_path / "s"
    with ShardedIndex.create(root, 3) as index:
        index.add_many(
            [
                Document(
                    key=f"d{n:02d}",
                    text=f"{WORDS[n % 4]} {WORDS[(n * 3) % 4]} pie",
                    fields={"title": f"T{n}"},
                )
                for n in range(30)
            ],
            progress=False,
        )
        index.delete_many(["d00"])
        index.commit()
    return root


def test_stats_sums_the_shards_and_names_their_segments(
    sharded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["stats", str(sharded), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    with ShardedIndex.open(sharded, readonly=True) as index:
        per_shard = index.shard_stats()
        assert stats["generation"] == index.cut
    assert stats["documents"] == sum(s.documents for s in per_shard.values()) == 29
    assert sorted(segment["name"].split("/")[0] for segment in stats["segments"]) == sorted(per_shard)
    assert main(["stats", str(sharded)]) == 0
    assert "shard-0002/seg-" in capsys.readouterr().out


def test_search_answers_as_the_sharded_index_does(
    sharded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ShardedIndex.open(sharded, readonly=True) as index:
        expected = index.search("apple pie", 5, RRF(), BM25Scorer())
    assert main(["search", "--index", str(sharded), "apple pie", "-k", "5", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [hit["key"] for hit in got["hits"]] == expected.keys
    assert [hit["score"] for hit in got["hits"]] == expected.scores.tolist()
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"_id": "q1", "text": "apple pie"}\n')
    assert main(["search", "--index", str(sharded), "--queries", str(queries), "-k", "5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[2] for line in lines] == expected.keys


def test_search_threads_on_a_sharded_index_is_one_line_exit_2(
    sharded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"_id": "q1", "text": "apple"}\n')
    assert main(["search", "--index", str(sharded), "--queries", str(queries), "--threads", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--threads is for a single index" in err and str(sharded) in err


def test_explain_terms_on_a_sharded_index_answers_as_one_index(
    sharded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--explain-terms`` on shards: the JSON (hits and their trees) and the text one index prints."""
    single = tmp_path / "one"
    with ShardedIndex.open(sharded, readonly=True) as index, Index.create(single) as one:
        documents = [index.get(f"d{n:02d}") for n in range(1, 30)]
        one.add_many(documents, progress=False)
        one.commit()
    for extra in ([], ["--syntax", "lucene"], ["--signals", "text,text", "-k", "7"]):
        query = "apple OR cherry^2 -damson" if extra[:1] == ["--syntax"] else "apple pie"
        answers = []
        for where in (single, sharded):
            argv = ["search", query, "--index", str(where), "--explain-terms", *extra]
            assert main([*argv, "--json"]) == 0
            payload = json.loads(capsys.readouterr().out)
            assert main(argv) == 0
            # From the first tree, up to the cursor (sealed with each index's own id).
            printed = capsys.readouterr().out.split("why ", 1)[1].split("next page:")[0]
            answers.append((payload["hits"], printed))
        assert answers[1] == answers[0]
        hits = answers[1][0]
        assert hits and all(hit["explanation"]["value"] == hit["score"] for hit in hits)
        assert "idf, computed as" in answers[1][1]
        assert ("fused by" in answers[1][1]) == ("--signals" in extra)


def test_scrub_checks_the_record_every_shard_and_its_place(
    sharded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["scrub", str(sharded)]) == 0
    assert "ok" in capsys.readouterr().err
    shutil.copytree(sharded / "shard-0001", sharded / "shard-0009")
    assert main(["scrub", str(sharded)]) == 1
    assert "shard-0009: a shard directory SHARDS does not list" in capsys.readouterr().out
    shutil.rmtree(sharded / "shard-0009")
    (sharded / "shard-0000").rename(sharded / "tmp")
    (sharded / "shard-0001").rename(sharded / "shard-0000")
    (sharded / "tmp").rename(sharded / "shard-0001")
    assert main(["scrub", str(sharded)]) == 1
    out = capsys.readouterr().out
    assert "shard-0000: is shard-0001" in out and "shard-0001: is shard-0000" in out
    record = sharded / RECORD
    record.write_bytes(record.read_bytes().replace(b'"shards": 3', b'"shards": 2'))
    assert main(["scrub", str(sharded)]) == 1
    assert "SHARDS: checksum mismatch" in capsys.readouterr().out


def test_search_and_stats_on_a_damaged_sharded_index_are_one_line_exit_2(
    sharded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(sharded / "shard-0001", sharded / "shard-0003")
    for argv in (["stats", str(sharded)], ["search", "--index", str(sharded), "apple"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "shard-0003" in err and "MANIFEST" not in err
