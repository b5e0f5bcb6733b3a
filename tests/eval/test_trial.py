"""Trials (``weft-search trial``): a pinned plan run through a live server, every response validated,
the report's numbers those of ``weft-search eval``'s code on the same runs (issue 28, items 3 and 4)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.eval.trialdata import QRELS, QUERIES, SPECS, make_trial_data
from weftsearch import Index, Query
from weftsearch.cli import main
from weftsearch.errors import PlanChangedError, ReportExistsError, TrialValidationError
from weftsearch.eval.harness import arm_result
from weftsearch.eval.runs import StreamCache, run_arm
from weftsearch.eval.stats import paired_bootstrap
from weftsearch.eval.trial import Method, load_plan, parse_method, run_trial, write_plan
from weftsearch.ranking.profiles import build_arm
from weftsearch.server.launch import ServerProcess

httpx = pytest.importorskip("httpx", reason="a trial needs the 'server' extra")
pytest.importorskip("uvicorn", reason="a real server needs the 'server' extra")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_trial_data(tmp_path_factory.mktemp("trial"))


@pytest.fixture(scope="module")
def server(data: Path) -> Iterator[ServerProcess]:
    with ServerProcess(["--index", str(data / "idx"), "--readonly"]) as process:
        yield process


def _plan(data: Path, tmp: Path, **options: Any) -> Path:
    path = tmp / "plan.json"
    write_plan(
        path,
        methods=[parse_method("lex:1"), parse_method("hyb:1")],
        queries=data / "queries.jsonl",
        qrels=data / "qrels.tsv",
        query_vectors=data / "qv.npy",
        seed=3,
        concurrency=2,
        k=10,
        resamples=2000,
        **options,
    )
    return path


def test_a_trial_against_a_live_server_reports_everything(
    data: Path, server: ServerProcess, tmp_path: Path
) -> None:
    plan = _plan(data, tmp_path)
    report = run_trial(plan, server.base_url, tmp_path / "report.json")
    assert report["valid"] and report["violations"] == []
    assert json.loads((tmp_path / "report.json").read_text()) == report
    assert "lex:1" in (tmp_path / "report.md").read_text()
    assert report["plan"]["sha256"] == load_plan(plan).sha256
    assert report["judgments_complete"] is False and report["measures"] == ["nDCG@10", "R@10"]
    assert len(report["requests"]) == 2 * len(QUERIES) and len(report["warmup"]) == 2
    assert all(r["latency_ms"] > 0 and r["status"] == 200 for r in report["requests"])
    assert len({r["latency_ms"] for r in report["requests"]}) > 1  # each request's own time
    order = [(r["query"], r["method"]) for r in report["requests"]]
    assert sorted(order) == sorted((q, m) for q in QUERIES for m in ("lex:1", "hyb:1"))
    assert order != sorted(order, key=lambda p: (p[1], p[0]))  # interleaved, not method by method
    hit = report["rankings"]["hyb:1"]["q1"][0]
    assert {s["signal"] for s in hit["signals"]} == {"bm25", "vector"}
    assert all({"rank", "score", "contribution"} <= set(s) for s in hit["signals"])
    pair = report["pairwise"][0]
    assert pair["wins"] + pair["losses"] + pair["ties"] == len(QUERIES)
    assert len(pair["a_loses"]) == pair["losses"] and len(pair["b_loses"]) == pair["wins"]
    process = report["server_process"]
    assert (
        process["pid"] == server.pid and process["rss_bytes_peak_sampled"] > 0 and process["cpu_seconds"] >= 0
    )
    assert {i["measure"] for i in report["intervals"]} == {"nDCG@10", "R@10"}


def test_the_intervals_are_eval_s_on_the_same_runs(data: Path, server: ServerProcess, tmp_path: Path) -> None:
    """The engine's own runs of the two specs, evaluated and bootstrapped as ``weft-search eval``
    (:func:`harness.compare`) does, give the trial's numbers exactly."""
    report = run_trial(_plan(data, tmp_path), server.base_url, tmp_path / "report.json")
    vectors = np.load(data / "qv.npy")
    queries = {q: Query(text=t, vector=vectors[i]) for i, (q, t) in enumerate(QUERIES.items())}
    with Index.open(data / "idx", readonly=True) as index:
        cache = StreamCache(index.snapshot())
        results = {
            name: arm_result(
                run_arm(cache, build_arm(SPECS[name], name=name), queries, 10), QRELS, ["nDCG@10", "R@10"]
            )
            for name in SPECS
        }
    for name in SPECS:
        ranking = report["rankings"][f"{name}:1"]
        assert {q: [h["key"] for h in hits] for q, hits in ranking.items()} == {
            q: list(results[name].run.keys[q]) for q in QUERIES
        }
        assert report["per_query"][f"{name}:1"]["nDCG@10"] == results[name].evaluation.per_query("nDCG@10")
    for interval in report["intervals"]:
        measure = interval["measure"]
        expected = paired_bootstrap(
            results["hyb"].evaluation.per_query(measure),
            results["lex"].evaluation.per_query(measure),
            resamples=2000,
            seed=3,
        )
        assert (interval["mean_difference"], interval["low"], interval["high"], interval["p_value"]) == (
            expected.mean_difference,
            expected.low,
            expected.high,
            expected.p_value,
        )


@pytest.mark.reference
def test_the_measures_agree_with_pytrec_eval(data: Path, server: ServerProcess, tmp_path: Path) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    report = run_trial(_plan(data, tmp_path), server.base_url, tmp_path / "report.json")
    for name, ranking in report["rankings"].items():
        run = {q: {h["key"]: float(h["score"]) for h in hits} for q, hits in ranking.items()}
        oracle = pytrec_eval.RelevanceEvaluator(QRELS, {"ndcg_cut.10", "recall.10"}).evaluate(run)
        for q in QUERIES:
            assert report["per_query"][name]["nDCG@10"][q] == pytest.approx(
                oracle[q]["ndcg_cut_10"], abs=1e-12
            )
            assert report["per_query"][name]["R@10"][q] == pytest.approx(oracle[q]["recall_10"], abs=1e-12)


def test_a_plan_is_pinned(data: Path, tmp_path: Path, server: ServerProcess) -> None:
    plan = _plan(data, tmp_path)
    with pytest.raises(ReportExistsError, match=r"plan\.json"):
        _plan(data, tmp_path)
    changed = tmp_path / "qrels.tsv"
    changed.write_bytes((data / "qrels.tsv").read_bytes())
    other = tmp_path / "other.json"
    write_plan(
        other,
        methods=[Method("a", spec="bm25"), Method("b", spec="vector")],
        queries=data / "queries.jsonl",
        qrels=changed,
    )
    changed.write_bytes(changed.read_bytes() + b"q1\td9\t1\n")
    with pytest.raises(PlanChangedError, match=r"qrels\.tsv changed"):
        run_trial(other, server.base_url, tmp_path / "r1.json")
    (tmp_path / "r2.json").write_text("{}")
    with pytest.raises(ReportExistsError, match=r"r2\.json"):
        run_trial(plan, server.base_url, tmp_path / "r2.json")
    assert (tmp_path / "r2.json").read_text() == "{}"


@pytest.mark.parametrize("text", ["lex", "lex:0", "lex:x", "=bm25", "bad name:1"])
def test_bad_methods_are_refused(text: str) -> None:
    from weftsearch.errors import InvalidParameterError

    with pytest.raises(InvalidParameterError, match=r"lex|bm25|bad"):
        parse_method(text)


# ---------------------------------------------------------------------------- forged responses


def _answer(request: Any, generation: int = 5) -> dict[str, Any]:
    body = json.loads(request.content)
    name, version = body["profile"]["name"], body["profile"]["version"]
    return {
        "generation": generation,
        "ranking": {"profile": name, "version": version, "spec": "bm25"},
        "fuser": "rrf",
        "signals": ["bm25"],
        "depth": 20,
        "cut_short": [],
        "query_vector": {"source": "request", "model": None, "vectors": None, "dims": 8},
        "hits": [
            {"key": "d1", "rank": 1, "score": 1.0, "fields": {}},
            {"key": "d2", "rank": 2, "score": 0.5, "fields": {}},
        ],
    }


def _forge(change: Callable[[dict[str, Any], dict[str, Any], int], Any]) -> Any:
    calls = {"n": 0}

    def handler(request: Any) -> Any:
        if request.url.path == "/health":
            return httpx.Response(200, json={"status": "ok"})
        calls["n"] += 1
        body = _answer(request)
        forged = change(body, json.loads(request.content), calls["n"])
        return forged if isinstance(forged, httpx.Response) else httpx.Response(200, json=body)

    return httpx.MockTransport(handler)


def _version(body: dict[str, Any], sent: dict[str, Any], n: int) -> None:
    if sent["profile"]["name"] == "hyb":
        body["ranking"]["version"] = 2


def _duplicate(body: dict[str, Any], sent: dict[str, Any], n: int) -> None:
    if n == 4:
        body["hits"][1]["key"] = "d1"


def _missing(body: dict[str, Any], sent: dict[str, Any], n: int) -> Any:
    return httpx.Response(503, json={"error": {"type": "ShardUnavailableError"}}) if n == 5 else None


def _generation(body: dict[str, Any], sent: dict[str, Any], n: int) -> None:
    if n > 6:
        body["generation"] = 6


def _model(body: dict[str, Any], sent: dict[str, Any], n: int) -> None:
    body["query_vector"]["model"] = "another-model"


@pytest.mark.parametrize(
    ("change", "kind"),
    [
        (_version, "profile"),
        (_duplicate, "duplicate"),
        (_missing, "unanswered"),
        (_generation, "generation"),
        (_model, "vector_model"),
    ],
)
def test_each_violation_fails_the_run_and_is_reported(
    data: Path, tmp_path: Path, change: Callable[..., Any], kind: str
) -> None:
    plan = _plan(data, tmp_path, vector_model="m")
    if kind != "vector_model":
        plan.unlink()
        plan = _plan(data, tmp_path)
    report = tmp_path / "report.json"
    with pytest.raises(TrialValidationError, match=kind) as caught:
        run_trial(plan, "http://127.0.0.1:9", report, transport=_forge(change))
    assert kind in {v["kind"] for v in caught.value.violations}
    written = json.loads(report.read_text())
    assert written["valid"] is False and written["violations"] == caught.value.violations
    if kind == "unanswered":
        assert "coverage" in {v["kind"] for v in written["violations"]}


def test_a_clean_forged_run_passes(data: Path, tmp_path: Path) -> None:
    report = run_trial(
        _plan(data, tmp_path),
        "http://127.0.0.1:9",
        tmp_path / "r.json",
        transport=_forge(lambda b, s, n: None),
    )
    assert report["valid"] and report["server_process"]["source"] is None


# ---------------------------------------------------------------------------- client cycle


def test_cycle_with_client_embedding_checks_the_vectors(
    data: Path, server: ServerProcess, tmp_path: Path
) -> None:
    """One serial client; the 'offline model' here is a stand-in returning the frozen rows, one bit off
    for one query, so the check must count 5 bit-equal rows and one within tolerance."""
    rows = dict(zip(QUERIES.values(), np.load(data / "qv.npy"), strict=True))

    def encoder(texts: Sequence[str]) -> np.ndarray:
        out = np.stack([rows[t].copy() for t in texts])
        if list(texts) == [QUERIES["q2"]] or len(texts) > 1:
            out[0, 0] = np.nextafter(out[0, 0], np.float32(10))
        return out

    report = run_trial(
        _plan(data, tmp_path),
        server.base_url,
        tmp_path / "r.json",
        cycle=True,
        embed="client",
        encoder=encoder,
    )
    assert report["concurrency"] == 1 and report["mode"] == "cycle, embedded by the client"
    check = report["vector_check"]
    assert check["bit_equal"] == len(QUERIES) - 1 and check["within_tolerance"] == len(QUERIES)
    assert 0 < check["max_abs_difference"] < 1e-6


def test_the_command_line_writes_plan_and_report(
    data: Path, server: ServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan, report = tmp_path / "p.json", tmp_path / "r.json"
    assert (
        main(
            [
                "trial",
                "plan",
                "--out",
                str(plan),
                "--method",
                "lex:1",
                "--method",
                "hyb:1",
                "--queries",
                str(data / "queries.jsonl"),
                "--qrels",
                str(data / "qrels.tsv"),
                "--query-vectors",
                str(data / "qv.npy"),
                "--resamples",
                "500",
            ]
        )
        == 0
    )
    assert main(["trial", "run", str(plan), "--server", server.base_url, "--report", str(report)]) == 0
    assert json.loads(report.read_text())["valid"]
    assert main(["trial", "run", str(plan), "--server", server.base_url, "--report", str(report)]) == 2
    assert "already exists" in capsys.readouterr().err
    # A profile version the server does not hold: every request answered 404, exit 1.
    bad = tmp_path / "bad.json"
    assert (
        main(
            [
                "trial",
                "plan",
                "--out",
                str(bad),
                "--method",
                "lex:1",
                "--method",
                "hyb:7",
                "--queries",
                str(data / "queries.jsonl"),
                "--qrels",
                str(data / "qrels.tsv"),
            ]
        )
        == 0
    )
    assert (
        main(["trial", "run", str(bad), "--server", server.base_url, "--report", str(tmp_path / "b.json")])
        == 1
    )
    assert "HTTP 404" in capsys.readouterr().err


def _named_two_ways(body: dict[str, Any], sent: dict[str, Any], n: int) -> None:
    body["query_vector"] = {"source": "server", "model": "org/Model-X", "vectors": "model-x-int8", "dims": 8}


@pytest.mark.parametrize(
    ("expected", "valid"), [("model-x-int8", True), ("ORG/model-x", True), ("other", False)]
)
def test_the_vector_model_may_be_named_by_the_model_or_its_vector_set(
    data: Path, tmp_path: Path, expected: str, valid: bool
) -> None:
    """A server embedding the text reports the model's name with its vector set's beside it; a plan
    naming either (case aside, as the server accepts them) is satisfied, another name is not."""
    plan = _plan(data, tmp_path, vector_model=expected)
    forged = _forge(_named_two_ways)
    if valid:
        assert run_trial(plan, "http://127.0.0.1:9", tmp_path / "r.json", transport=forged)["valid"]
    else:
        with pytest.raises(TrialValidationError, match="expected query vectors of 'other'"):
            run_trial(plan, "http://127.0.0.1:9", tmp_path / "r.json", transport=forged)
