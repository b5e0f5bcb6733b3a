"""`weft-search serve --workers 2` for real: two readers on one port, writes forwarded to the writer."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from tests.server.conftest import KEY, WRITE
from tests.server.serving import running_server
from weftsearch import Index


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="the writer listens on a Unix socket")
def test_two_workers_share_the_port_and_writes_reach_the_one_writer(index_path: Path) -> None:
    with (
        running_server(
            index_path, "--workers", "2", "--api-key-env", "WEFT_TEST_KEY", env={"WEFT_TEST_KEY": KEY}
        ) as base,
        httpx.Client(base_url=base, timeout=30) as client,
    ):
        assert client.post("/v1/documents", json={"documents": [{"key": "x"}]}).status_code == 401
        for i in range(10):  # spread over both readers by the kernel; each forwards to the writer
            doc = {"key": f"w{i}", "text": f"walrus number {i}"}
            assert client.post("/v1/documents", json={"documents": [doc]}, headers=WRITE).status_code == 200
        assert client.post("/v1/commit", headers=WRITE).status_code == 200
        for _ in range(6):  # whichever reader answers has adopted the commit
            hits = client.post("/v1/search", json={"text": "walrus", "spec": "bm25", "k": 20}).json()["hits"]
            assert sorted(h["key"] for h in hits) == sorted(f"w{i}" for i in range(10))
        created = client.post("/v1/profiles", json={"name": "p", "spec": "bm25"}, headers=WRITE)
        assert created.status_code == 201
        assert client.get("/v1/profiles/p").json()["version"] == 1
    with Index.open(index_path, readonly=True) as index:
        assert all(f"w{i}" in index for i in range(10))


def _samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """The samples of metric ``name`` in Prometheus text, as (labels, value)."""
    from prometheus_client.parser import text_string_to_metric_families

    return [
        (dict(sample.labels), float(sample.value))
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    ]


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="the writer listens on a Unix socket")
def test_metrics_report_every_worker_whichever_answers(index_path: Path) -> None:
    """With two readers, /metrics sums both: N searches count N, on every scrape, and two processes show.

    Before the multiprocess metrics each reader reported its own requests only, so a scrape
    counted the searches that one reader happened to receive, and weft_server_processes was 1.
    """
    searches = 24
    with running_server(index_path, "--workers", "2") as base:
        for i in range(searches):  # a new connection each: the kernel hands them to either reader
            with httpx.Client(base_url=base, timeout=30) as client:
                body = {"text": "graph ranking", "spec": "bm25", "k": 3 + i % 3}
                assert client.post("/v1/search", json=body).status_code == 200
        for _ in range(6):  # every scrape, whichever reader answers it, reports the whole server
            with httpx.Client(base_url=base, timeout=30) as client:
                text = client.get("/metrics").text
            counted = _samples(text, "weft_requests_total")
            search_counts = [v for labels, v in counted if labels["endpoint"] == "/v1/search"]
            assert sum(search_counts) == searches, counted
            assert all(
                labels["status"] == "200" for labels, _ in counted if labels["endpoint"] == "/v1/search"
            )
            latency = _samples(text, "weft_request_seconds_count")
            assert sum(v for labels, v in latency if labels["endpoint"] == "/v1/search") == searches
            assert _samples(text, "weft_server_processes") == [({}, 2.0)]
            assert [v for _, v in _samples(text, "weft_index_documents")] == [6.0]


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="the writer listens on a Unix socket")
@pytest.mark.parametrize("workers", ["1", "2"])
def test_an_answered_write_is_read_at_once_in_every_mode(index_path: Path, workers: str) -> None:
    """Read-your-writes with one process and with --workers 2: after an upsert's or a delete's answer,
    search, get and stats (whichever process answers) see it at the generation the answer names.

    Before, with --workers 2 an upserted document was a 404 and missing from searches until a
    commit, while the answer named a generation no reader saw.
    """
    with running_server(index_path, "--workers", workers) as base:
        for i in range(4):
            doc = {"key": f"w{i}", "text": f"walrus number {i}"}
            with httpx.Client(base_url=base, timeout=30) as writer:  # a new connection: either process
                written = writer.post("/v1/documents", json={"documents": [doc]})
            assert written.status_code == 200, written.text
            answer = written.json()
            assert answer["committed"] is (workers != "1")
            for _ in range(3):
                with httpx.Client(base_url=base, timeout=30) as reader:
                    got = reader.get(f"/v1/documents/w{i}")
                    assert got.status_code == 200, got.text
                    found = reader.post("/v1/search", json={"text": "walrus", "spec": "bm25", "k": 20}).json()
                    assert {h["key"] for h in found["hits"]} == {f"w{j}" for j in range(i + 1)}
                    assert found["generation"] == answer["generation"]
        with httpx.Client(base_url=base, timeout=30) as client:
            deleted = client.delete("/v1/documents/w0")
            assert deleted.status_code == 200 and deleted.json()["committed"] is (workers != "1")
        for _ in range(3):
            with httpx.Client(base_url=base, timeout=30) as reader:
                assert reader.get("/v1/documents/w0").status_code == 404
                found = reader.post("/v1/search", json={"text": "walrus", "spec": "bm25", "k": 20}).json()
                assert "w0" not in {h["key"] for h in found["hits"]}
                assert found["generation"] == deleted.json()["generation"]
