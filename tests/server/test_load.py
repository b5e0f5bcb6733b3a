"""A loopback load test of ``POST /v1/search``: the load ladder's HTTP target against a real server.

Bounded in requests (a fixed Poisson schedule) and time (start-up and drain bounds); no
assertion on any timing: every scheduled request must complete, with a 2xx, through one
reader and through two (``--workers 2``). The figures for docs/BENCHMARKS.md come from
``weft-search bench load --target http://... --http-api weft`` (the command is written there).
"""

from __future__ import annotations

import io
import json
import socket
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.server.conftest import TEXTS, vector
from tests.server.serving import running_server
from weftsearch.bench.driver import poisson_schedule, run_rung
from weftsearch.bench.targets import HttpTarget
from weftsearch.bench.workloads import Workload

#: The schedule: about RATE * SECONDS requests (the seed fixes the count).
RATE, SECONDS, SEED = 40.0, 2.0, 20261203


@pytest.mark.parametrize("workers", [1, 2])
def test_every_request_of_a_load_rung_completes_without_error(index_path: Path, workers: int) -> None:
    """The hybrid arm (text and vector, RRF at depth 100); the bm25 body is checked below."""
    hybrid = True
    if workers > 1 and not hasattr(socket, "AF_UNIX"):
        pytest.skip("the writer of --workers N listens on a Unix socket")
    texts = tuple(TEXTS.values())
    workload = Workload(texts, np.stack([vector(i) for i in range(len(texts))]))
    schedule = poisson_schedule(RATE, SECONDS, SEED, len(workload))
    assert 40 <= len(schedule) <= 160  # bounded
    with running_server(index_path, "--workers", str(workers)) as base:
        # A cap above the request count: nothing can be shed, so every request must be answered.
        target = HttpTarget(base, workload, k=5, hybrid=hybrid, api="weft", cap=len(schedule) + 1)
        assert target.body(0)["spec"] == ("rrf(bm25, vector, k=60)@100" if hybrid else "bm25@100")
        target.start()
        try:
            result = run_rung(
                target, schedule, cap=len(schedule) + 1, progress=io.StringIO(), drain_seconds=120.0
            )
        finally:
            target.close()
    assert (result.scheduled, result.completed, result.errors, result.shed, result.unfinished) == (
        len(schedule),
        len(schedule),
        0,
        0,
        0,
    )


def test_the_weft_body_is_what_the_server_validates(open_client: object) -> None:
    """The load generator's weft body passes the server's request model (a body it refused would
    count as errors in the load test above, but name nothing)."""
    from fastapi.testclient import TestClient

    assert isinstance(open_client, TestClient)
    workload = Workload(("graph ranking",), np.stack([vector(0)]))
    for hybrid in (False, True):
        body = HttpTarget("http://unused", workload, k=3, hybrid=hybrid, api="weft").body(0)
        response = open_client.post("/v1/search", json=body)
        assert response.status_code == 200, response.text
        assert response.json()["query_vector"]["source"] == ("request" if hybrid else "none")


def test_the_command_starts_and_stops_a_served_target_itself(tmp_path: Path) -> None:
    """``--target serve:2``: the ladder's own server, on loopback, gone when the command ends."""
    from weftsearch import cli as weft_cli

    out = tmp_path / "load.json"
    status = weft_cli.main(
        ["bench", "load", "--synthetic", "300", "--queries", "20", "--arms", "bm25,hybrid",
         "--target", "serve:2", "--rungs", "0.5", "--headline", "0.5", "--rung-seconds", "0.5",
         "--min-requests", "1", "--sequential-seconds", "0.5", "--repetitions", "1", "--no-calibrate",
         "--json", str(out), "--workdir", str(tmp_path)]
    )  # fmt: skip
    assert status == 0
    ladders = json.loads(out.read_text())["ladders"]
    assert [(ladder["target"], ladder["arm"]) for ladder in ladders] == [
        ("serve:2", "bm25"),
        ("serve:2", "hybrid"),
    ]
    for ladder in ladders:
        for rung in ladder["rungs"]:
            assert rung["errors"] == 0 and rung["completed"] > 0
            assert rung["peak_rss_mb"] > 0  # the server's own processes were measured
    leftover = subprocess.run(["pgrep", "-f", f"serve --index {tmp_path}"], capture_output=True, text=True)
    assert leftover.stdout == "", "the served target's processes outlived the command"


def test_a_served_target_needs_at_least_one_worker() -> None:
    from weftsearch.bench.targets import ServeTarget
    from weftsearch.errors import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="at least one worker"):
        ServeTarget("x", 0, Workload(("a",)))
