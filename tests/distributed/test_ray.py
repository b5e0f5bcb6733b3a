"""ShardedIndex on Ray actors: loopback only, exact, and the failure model.

One local Ray cluster serves the whole session (``cluster`` in conftest.py:
starting one costs seconds) and is always shut down at the end. Skipped where the ``ray`` extra is absent.
"""

from __future__ import annotations

import json
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'weft-search[ray]')")

from ray import cloudpickle  # noqa: E402

from tests.distributed.corpus import scifact_documents, scifact_queries  # noqa: E402
from tests.distributed.test_sharded import assert_same  # noqa: E402
from weftsearch import RRF, BM25Scorer, Document, Index, Query, Snapshot, Stream, VectorScorer  # noqa: E402
from weftsearch.distributed import ShardedIndex  # noqa: E402
from weftsearch.distributed.ray_shard import ray_shards  # noqa: E402
from weftsearch.engine.protocols import Scorer  # noqa: E402
from weftsearch.errors import ShardUnavailableError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# The slow scorer below is defined here: send it to the actors by value (they cannot import tests/).
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as handle:
                found += [int(child) for child in handle.read().split()]
    except OSError:
        pass
    return found


def _process_tree(root: int) -> list[int]:
    tree = [root]
    for pid in tree:
        tree += [child for child in _children(pid) if child not in tree]
    return tree


def _listening_sockets() -> dict[int, tuple[str, int]]:
    """Socket inode -> (address, port) of every listening TCP socket, from /proc/net/tcp{,6}."""
    found = {}
    for name, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        with open(f"/proc/net/{name}", encoding="ascii") as handle:
            next(handle)
            for line in handle:
                fields = line.split()
                if fields[3] != "0A":  # TCP_LISTEN
                    continue
                address, port = fields[1].split(":")
                words = [int(address[i : i + 8], 16) for i in range(0, len(address), 8)]
                raw = b"".join(struct.pack("<I", word) for word in words)
                found[int(fields[9])] = (socket.inet_ntop(family, raw), int(port, 16))
    return found


def _sockets_of(pids: list[int]) -> list[tuple[int, str, tuple[str, int]]]:
    listening = _listening_sockets()
    rows = []
    for pid in pids:
        try:
            name = Path(f"/proc/{pid}/comm").read_text(encoding="utf-8").strip()
            descriptors = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for descriptor in descriptors:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{descriptor}")
            except OSError:
                continue
            if target.startswith("socket:[") and int(target[8:-1]) in listening:
                rows.append((pid, name, listening[int(target[8:-1])]))
    return rows


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads sockets from Linux's /proc")
def test_every_listening_socket_of_the_cluster_is_on_loopback(cluster: str, tmp_path: Path) -> None:
    assert cluster.startswith("127.0.0.1:")
    sharded = ShardedIndex.create(tmp_path / "s", 2, factory=ray_shards())  # actors listen too
    sharded.close()
    rows = _sockets_of(_process_tree(os.getpid()))
    names = {name for _, name, _ in rows}
    assert {"gcs_server", "raylet"} <= names, rows  # the check sees Ray's own servers
    outside = [row for row in rows if row[2][0] not in ("127.0.0.1", "::ffff:127.0.0.1")]
    assert outside == []


@pytest.fixture(scope="module")
def small(cluster: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Index, ShardedIndex]]:
    root = tmp_path_factory.mktemp("ray")
    documents = scifact_documents(300)
    single = Index.create(root / "single", vector_dim=384)
    single.add_many(documents)
    single.commit()
    sharded = ShardedIndex.create(root / "s", 2, vector_dim=384, factory=ray_shards(max_restarts=2))
    sharded.add_many(documents, progress=False)
    sharded.commit()
    yield single, sharded
    sharded.close()
    single.close()


def test_ray_shards_equal_the_single_index(small: tuple[Index, ShardedIndex]) -> None:
    single, sharded = small
    queries = scifact_queries(15)
    for scorers in ([BM25Scorer()], [BM25Scorer(), VectorScorer(nprobe=None)]):
        assert_same(
            single.search_many(queries, 10, RRF(), *scorers),
            sharded.search_many(queries, 10, RRF(), *scorers),
        )


def test_ray_shards_score_named_fields_highlight_and_refuse_as_one_index(
    cluster: str, tmp_path: Path
) -> None:
    """Per-field statistics, prefix expansions, highlights and explanations go through the actors."""
    from tests.distributed.test_sharded_fields import REFUSAL_DOCS, REFUSAL_SCHEMA
    from weftsearch.errors import InvalidQueryError, UnknownKeyError, UnknownTextFieldError

    single = Index.create(tmp_path / "one", schema=REFUSAL_SCHEMA)
    single.add_many(REFUSAL_DOCS, progress=False)
    single.commit()
    sharded = ShardedIndex.create(
        tmp_path / "s", 3, schema=REFUSAL_SCHEMA, factory=ray_shards(max_restarts=0)
    )
    try:
        assert sharded.schema == REFUSAL_SCHEMA
        sharded.add_many(REFUSAL_DOCS, progress=False)
        sharded.commit()
        bm25f = BM25Scorer(fields={"text": 1.0, "title": 2.0}, field_b={"title": 0.4})
        for text, scorer in [("title:zebra w1*", BM25Scorer()), ("zebra alpha w2x", bm25f)]:
            query = Query.parse(text)
            expected = single.search(query, 10, RRF(), scorer, highlight=True)
            got = sharded.search(query, 10, RRF(), scorer, highlight=True)
            assert_same([expected], [got])
            assert [hit.to_dict()["highlights"] for hit in got] == [
                hit.to_dict()["highlights"] for hit in expected
            ]
            # Explained through the actors: each breakdown on the key's shard, the collection's statistics.
            keys = [document.key for document in REFUSAL_DOCS]
            for scorers in ([scorer], [BM25Scorer(), bm25f]):
                want = single.explain_many(query, keys, RRF(), *scorers, depth=3)
                have = sharded.explain_many(query, keys, RRF(), *scorers, depth=3)
                assert [tree.to_dict() for tree in have] == [tree.to_dict() for tree in want]
        with pytest.raises(UnknownKeyError, match="'absent'"):
            sharded.explain("zebra", "absent", RRF(), BM25Scorer())
        for text, error in [("w*", InvalidQueryError), ("body:x", UnknownTextFieldError)]:
            with pytest.raises(error):
                sharded.search(Query.parse(text), 10, RRF(), BM25Scorer())
    finally:
        sharded.close()
        single.close()


class SlowScorer:
    """BM25 that first waits, so a test can kill a shard while a search runs on it."""

    name = "slow"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        time.sleep(self.seconds)
        return BM25Scorer().score(snapshot, query, k)


def _kill_during_search(sharded: ShardedIndex, shard: int, query: Query) -> object:
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["result"] = sharded.search(query, 10, RRF(), SlowScorer(1.5))
        except Exception as error:
            outcome["result"] = error

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.7)  # the search is in its second phase, sleeping in the shard's scorer
    ray.kill(sharded._group.actors[shard], no_restart=False)  # type: ignore[attr-defined]
    thread.join(timeout=120)
    assert not thread.is_alive()
    return outcome["result"]


def test_a_shard_killed_mid_query_is_retried_on_its_restarted_actor(
    small: tuple[Index, ShardedIndex],
) -> None:
    single, sharded = small
    query = scifact_queries(1)[0]
    actor = sharded._group.actors[0]  # type: ignore[attr-defined]
    before = ray.get(actor.identity.remote())
    result = _kill_during_search(sharded, 0, query)
    assert ray.get(actor.identity.remote()) != before  # it was killed and restarted
    assert not isinstance(result, Exception), result
    assert_same([single.search(query, 10, RRF(), SlowScorer(0.0))], [result])  # type: ignore[list-item]
    # The restarted actor reopened its last commit and serves the cut again.
    assert_same(
        [single.search(query, 10, RRF(), BM25Scorer())], [sharded.search(query, 10, RRF(), BM25Scorer())]
    )


def test_writes_to_a_restarted_shard_are_refused_naming_it(cluster: str, tmp_path: Path) -> None:
    sharded = ShardedIndex.create(tmp_path / "s", 2, factory=ray_shards(max_restarts=1))
    sharded.add_many([Document(key=f"d{i}", text="apple") for i in range(10)])
    sharded.commit()
    actor = sharded._group.actors[1]  # type: ignore[attr-defined]
    ray.kill(actor, no_restart=False)
    assert len(sharded.search("apple", 20, RRF(), BM25Scorer())) == 10  # reads: the committed cut
    with pytest.raises(ShardUnavailableError, match=r"shard-0001.*restarted") as caught:
        sharded.add_many([Document(key=f"e{i}", text="apple") for i in range(10)])
    assert caught.value.shards == ("shard-0001",)
    sharded.close()


def test_a_shard_that_cannot_restart_fails_the_search_naming_it_or_is_listed_when_asked(
    cluster: str, tmp_path: Path
) -> None:
    sharded = ShardedIndex.create(tmp_path / "s", 2, factory=ray_shards(max_restarts=0))
    documents = [Document(key=f"d{i}", text="apple pie") for i in range(12)]
    sharded.add_many(documents)
    sharded.commit()
    result = _kill_during_search(sharded, 1, Query(text="apple"))
    assert isinstance(result, ShardUnavailableError)
    assert result.shards == ("shard-0001",)
    assert "shard-0001" in str(result) and "node" in str(result)
    with pytest.raises(ShardUnavailableError, match="shard-0001"):
        sharded.search("apple", 20, RRF(), BM25Scorer())
    partial = sharded.search("apple", 20, RRF(), BM25Scorer(), allow_partial=True)
    assert partial.partial and partial.missing_shards == ("shard-0001",)
    on_zero = {doc.key for doc in documents if sharded.shard_of(doc.key) == "shard-0000"}
    assert set(partial.keys) == on_zero
    sharded.close()


NODE_SCRIPT = r"""
import json, sys, tempfile
import os
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
from ray._private import ray_constants
ray_constants.ENABLE_RAY_CLUSTER = False
import ray
from ray.cluster_utils import Cluster
from weftsearch import Document, RRF, BM25Scorer
from weftsearch.distributed import ShardedIndex
from weftsearch.distributed.ray_shard import ray_shards
from weftsearch.errors import ShardUnavailableError
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
worker = cluster.add_node(num_cpus=1)
ray.init(address=cluster.address, logging_level="warning", log_to_driver=False)
cluster.wait_for_nodes()
head_id, worker_id = cluster.head_node.node_id, worker.node_id
root = tempfile.mkdtemp()
factory = ray_shards(max_restarts=0, timeout=20, nodes=[head_id, worker_id])
sharded = ShardedIndex.create(root + "/s", 2, factory=factory)
sharded.add_many([Document(key=f"d{i}", text="apple") for i in range(10)])
sharded.commit()
before = len(sharded.search("apple", 20, RRF(), BM25Scorer()))
cluster.remove_node(worker)
try:
    sharded.search("apple", 20, RRF(), BM25Scorer())
    outcome = {"error": None}
except ShardUnavailableError as error:
    outcome = {"error": str(error), "shards": list(error.shards)}
outcome.update(before=before, worker=worker_id, head=head_id)
print("RESULT " + json.dumps(outcome))
ray.shutdown()
cluster.shutdown()
"""


def test_a_removed_node_is_reported_by_name(cluster: str) -> None:
    """A separate process runs its own two-node ``ray.cluster_utils.Cluster`` (this module's
    cluster stays up); the shard placed on the removed node is named, with the node."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", NODE_SCRIPT], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, done.stdout[-2000:] + done.stderr[-4000:]
    outcome = json.loads(lines[0][len("RESULT ") :])
    assert outcome["before"] == 10
    assert outcome["shards"] == ["shard-0001"]
    assert "shard-0001" in outcome["error"] and outcome["worker"][:12] in outcome["error"]


DATA = ROOT.parent / "shared" / "datasets"


@pytest.mark.skipif(not (DATA / "cacm").is_dir(), reason=f"CACM is not at {DATA / 'cacm'}")
def test_eval_on_the_cluster_equals_a_local_run(cluster: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """CACM (3,204 documents with links and dates): text, graph and recency arms, spread over two workers."""
    from weftsearch.cli.eval import run_experiment
    from weftsearch.distributed import cluster_eval

    filled: list[int] = []
    real = cluster_eval.fill_streams_on_ray

    def spy(*args: object, **kwargs: object) -> int:
        filled.append(real(*args, **kwargs))  # type: ignore[arg-type]
        return filled[-1]

    monkeypatch.setattr(cluster_eval, "fill_streams_on_ray", spy)

    arms = ["text=bm25", "graph=rrf(bm25, graph(seed=bm25))", "recency=rrf(bm25, recency(half_life=1825))"]
    options = {"arms": arms, "resamples": 50, "k": 20, "measures": ["nDCG@10"]}
    local = run_experiment("cacm", DATA, **options)  # type: ignore[arg-type]
    remote = run_experiment("cacm", DATA, ray=cluster, **options)  # type: ignore[arg-type]
    assert list(remote.comparison.arms) == list(local.comparison.arms)
    queries = len(local.comparison.arms["text"].run.qids)
    assert filled == [queries * 3]  # bm25 (one object, shared by the arms), graph, recency: from the cluster
    for name, result in local.comparison.arms.items():
        other = remote.comparison.arms[name].run
        assert other.qids == result.run.qids
        assert other.keys == result.run.keys
        for qid in result.run.qids:
            assert other.scores[qid].tobytes() == result.run.scores[qid].tobytes()
        assert remote.comparison.mean(name, "nDCG@10") == local.comparison.mean(name, "nDCG@10")


def test_the_ray_example_of_docs_scaling_runs(cluster: str, tmp_path: Path) -> None:
    """docs/SCALING.md's Ray block (marked no-run for the docs runner, which has no Ray) runs
    here, in a fresh process (it starts and stops its own cluster)."""
    text = (ROOT / "docs" / "SCALING.md").read_text(encoding="utf-8")
    marker = (
        "<!-- no-run: starts a Ray cluster (the ray extra); tests/distributed/test_ray.py runs this block -->"
    )
    block = text.split(marker, 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, "-c", block],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "10 True"


@pytest.mark.skipif(not (DATA / "cacm").is_dir(), reason=f"CACM is not at {DATA / 'cacm'}")
def test_the_eval_command_takes_ray_and_prints_a_local_runs_table(
    cluster: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from weftsearch.cli import main

    argv = ["eval", "cacm", "--data", str(DATA), "--arms", "text=bm25", "--resamples", "20", "--k", "10"]
    assert main(argv) == 0
    local = capsys.readouterr().out
    assert main([*argv, "--ray", cluster]) == 0
    remote = capsys.readouterr().out
    # The table (everything but the timing line, "cacm: 1 arms in 0.4 s") is the same.
    timing = re.compile(r"arms in [\d.]+ s$")
    assert "nDCG@10" in local
    assert [line for line in remote.splitlines() if not timing.search(line)] == [
        line for line in local.splitlines() if not timing.search(line)
    ]


@pytest.mark.skipif(not (DATA / "cacm").is_dir(), reason=f"CACM is not at {DATA / 'cacm'}")
def test_graph_arms_on_ray_shards_equal_the_single_index(cluster: str, tmp_path: Path) -> None:
    """The link table comes from the actors (plain arrays), the walk runs at the coordinator."""
    import dataclasses

    from tests.distributed.test_sharded_graph import cacm
    from weftsearch import GraphScorer, PageRankScorer

    documents, queries = cacm()
    queries = queries[:6]
    single = Index()
    single.add_many(documents, progress=False)
    sharded = ShardedIndex.create(tmp_path / "s", 2, factory=ray_shards(max_restarts=1))
    try:
        sharded.add_many(documents, progress=False)
        sharded.commit()
        times = sorted(document.time for document in documents if document.time is not None)
        filtered = [dataclasses.replace(q, filter=f"@time >= {times[len(times) // 2]}") for q in queries]
        seeded = [dataclasses.replace(q, seeds=(documents[7 * i].key,)) for i, q in enumerate(queries)]
        arms: list[list[Scorer]] = [
            [BM25Scorer(), GraphScorer(BM25Scorer())],
            [BM25Scorer(), PageRankScorer(BM25Scorer(), restart="score")],
        ]
        for scorers in arms:
            for batch in (queries, filtered, seeded):
                assert_same(
                    single.search_many(batch, 10, RRF(), *scorers),
                    sharded.search_many(batch, 10, RRF(), *scorers),
                )
        deleted = [document.key for document in documents[::11]]
        single.delete_many(deleted)
        sharded.delete_many(deleted)
        sharded.merge(force=True)
        for scorers in arms:
            assert_same(
                single.search_many(queries, 10, RRF(), *scorers),
                sharded.search_many(queries, 10, RRF(), *scorers),
            )
    finally:
        sharded.close()
        single.close()
