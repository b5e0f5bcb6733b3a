"""``weft-search eval`` and ``weft-search datasets`` end to end, through ``cli.main``.

``datasets fetch`` runs against a local HTTP server (the ``server`` fixture in
conftest.py), with the compiled pins replaced by pins of small files, or, with
the shared data, the real CACM files served from a local mirror.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from tests.eval.test_harness import make_collection
from weftsearch.cli import main
from weftsearch.cli.eval import PRESET_ARMS, STREAM_WEIGHTS, _sweep, run_experiment
from weftsearch.errors import InvalidParameterError
from weftsearch.eval import pins as pins_module
from weftsearch.eval.datasets import CollectionPins, FilePin
from weftsearch.eval.harness import build_testbed
from weftsearch.eval.metrics import evaluate
from weftsearch.eval.runs import StreamCache, run_arm
from weftsearch.fusion import WeightedRRF
from weftsearch.ranking.arm import Arm
from weftsearch.ranking.specs import ArmBuilder

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "datasets"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"the shared datasets are not at {DATA}")


@needs_data
@pytest.mark.data
def test_eval_cacm_prints_the_table_and_writes_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report"
    status = main(
        [
            "eval",
            "cacm",
            "--data",
            str(DATA),
            "--arms",
            "text=bm25",
            "graph=rrf(bm25, graph(seed=bm25))",
            "--resamples",
            "500",
            "--seed",
            "7",
            "--out",
            str(out),
            "--no-plots",
        ]
    )
    printed = capsys.readouterr().out
    assert status == 0
    assert "text" in printed and "graph" in printed and "nDCG@10" in printed
    record = json.loads((out / "report.json").read_text())
    assert record["bootstrap"]["seed"] == 7 and record["bootstrap"]["resamples"] == 500
    assert record["testbed"]["collection"] == "cacm" and record["testbed"]["publishable"] is True
    assert {f["path"] for f in record["testbed"]["files"]} >= {"cacm.all", "qrels.text", "query.text"}
    assert (out / "text.trec").is_file() and (out / "graph.trec").is_file()
    assert "weft-search eval cacm" in (out / "report.md").read_text()
    # The printed and written numbers are the library's numbers.
    again = run_experiment(
        "cacm", DATA, arms=["text=bm25", "graph=rrf(bm25, graph(seed=bm25))"], resamples=500, seed=7
    )
    means = {entry["arm"]["name"]: entry["means"] for entry in record["arms"]}
    assert means["graph"]["nDCG@10"] == again.comparison.mean("graph", "nDCG@10")


@needs_data
@pytest.mark.data
def test_learned_arm_needs_a_development_split(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["eval", "cisi", "--data", str(DATA), "--arms", "text=bm25", "l=learned(bm25, graph)"])
    assert status == 2
    assert "no development split" in capsys.readouterr().err


@needs_data
@pytest.mark.data
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--arms", "text=bm25", "text=bm25(k1=2)"], "two arms are named"),
        (["--arms", "x=nosuch"], "unknown scorer"),
        (["--arms", "x=bm25("], "cannot read arm"),
        # Issue 26 item 4: a RecursionError traceback; a huge number an untyped ValueError.
        (["--arms", "x=" + "rrf(" * 500 + "bm25" + ")" * 500], "nests more than 32 deep"),
        (["--arms", "x=rrf(bm25, k=1" + "0" * 5000 + ")"], "an integer of 5,001 digits"),
        (["--baseline", "nosuch"], "baseline"),
        (["--sweep", "rrf:nosuch"], "no arm"),
        (["--sweep", "spiral"], "unknown sweep"),
        (["--measures", "nDCG@0"], "measure"),
        (["--link-set", "nosuch"], "no link set"),
        (["--vectors", "nosuch"], "no vectors"),
    ],
)
def test_bad_eval_arguments_are_one_line_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["eval", "cacm", "--data", str(DATA), "--resamples", "10", *argv])
    err = capsys.readouterr().err
    assert status == 2
    assert message in err and "Traceback" not in err and err.count("\n") == 1


def test_eval_of_a_missing_folder_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["eval", "cacm", "--data", str(tmp_path / "absent")])
    assert status == 2
    assert "absent" in capsys.readouterr().err


def test_tampered_data_is_refused_unless_any_snapshot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if not DATA.is_dir():
        pytest.skip(f"the shared datasets are not at {DATA}")
    copy = tmp_path / "cisi"
    copy.mkdir()
    for path in (DATA / "cisi").iterdir():
        if path.is_file():
            (copy / path.name).write_bytes(path.read_bytes())
    qry = copy / "CISI.QRY"
    qry.write_bytes(qry.read_bytes().replace(b"information", b"informatiom", 1))
    assert main(["eval", "cisi", "--data", str(tmp_path), "--arms", "text=bm25", "--resamples", "10"]) == 2
    assert "--any-snapshot" in capsys.readouterr().err
    assert (
        main(
            [
                "eval",
                "cisi",
                "--data",
                str(tmp_path),
                "--arms",
                "text=bm25",
                "--resamples",
                "10",
                "--any-snapshot",
            ]
        )
        == 0
    )
    assert "UNPUBLISHABLE" in capsys.readouterr().out


@needs_data
@pytest.mark.data
def test_query_vectors_of_other_texts_are_refused_even_with_any_snapshot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A changed query file waives under --any-snapshot; its frozen query vectors never do."""
    copy = tmp_path / "cisi"
    shutil.copytree(DATA / "cisi", copy)
    qry = copy / "CISI.QRY"
    qry.write_bytes(qry.read_bytes().replace(b"information", b"informatiom", 1))
    argv = ["eval", "cisi", "--data", str(tmp_path), "--arms", "text=bm25", "--resamples", "10"]
    assert main([*argv, "--any-snapshot"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("weft-search: error: ") and err.count("\n") == 1
    assert "queries were embedded from texts" in err and "belong to other queries" in err
    assert "weft-search embed --collection cisi" in err and "--vectors none" in err
    # Without the vectors, the changed query file is waived and every number marked.
    out = tmp_path / "report"
    assert main([*argv, "--any-snapshot", "--vectors", "none", "--out", str(out), "--no-plots"]) == 0
    assert capsys.readouterr().out.startswith("UNPUBLISHABLE: ")
    assert {line.split()[-1] for line in (out / "text.trec").read_text().splitlines()} == {
        "UNPUBLISHABLE-text"
    }
    assert json.loads((out / "report.json").read_text())["unpublishable"].startswith("UNPUBLISHABLE: ")


@needs_data
@pytest.mark.data
def test_datasets_verify(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["datasets", "verify", "cacm", "--data", str(DATA)]) == 0
    printed = capsys.readouterr().out
    assert "cacm.all" in printed and "3204 documents" in printed


def test_every_preset_arm_parses() -> None:
    from weftsearch.ranking.specs import ArmBuilder

    builder = ArmBuilder()
    for dataset, specs in PRESET_ARMS.items():
        arms = [builder.arm(spec) for spec in specs]
        assert len({arm.name for arm in arms}) == len(arms), dataset


# ---------------------------------------------------------------------------- --sweep weights:ARM


def test_weight_sweep_shape_and_weight_zero_on_a_synthetic_testbed() -> None:
    """``weights:ARM`` sweeps each non-first stream's weight; at weight 0 only the other stream counts."""
    testbed = build_testbed(make_collection())
    builder = ArmBuilder(default_depth=30)
    specs = (
        "text=bm25",
        "hybrid=rrf(bm25, recency(half_life=7200))",
        "three=rrf(bm25, graph(seed=bm25), recency(half_life=7200))",
    )
    arms = {arm.name: arm for arm in (builder.arm(spec) for spec in specs)}
    cache = StreamCache(testbed.snapshot)
    # k as the table keeps it (here the arms' depth, 30): the point at weight 1 is the arm's row.
    sweep_k = 30
    [result] = _sweep(
        "weights:hybrid", testbed, arms, "text", builder, seed=3, resamples=200, cache=cache, k=sweep_k
    )
    assert result.name == "hybrid: weight of stream 2 (recency), others 1"
    assert result.measure == "nDCG@10" and result.reference == "text"
    assert result.grid == {"weight": STREAM_WEIGHTS} == {"weight": (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)}
    assert [p.params for p in result.points] == [{"weight": w} for w in STREAM_WEIGHTS]
    assert [p.arm for p in result.points] == [f"hybrid-w2-{w:g}" for w in STREAM_WEIGHTS]
    assert all(p.difference is not None and p.difference.resamples == 200 for p in result.points)
    assert len({p.mean for p in result.points}) > 2  # the weight changes the ranking

    def ndcg(arm: Arm) -> float:
        return evaluate(testbed.qrels, run_arm(cache, arm, testbed.queries, sweep_k).run, "nDCG@10").mean(
            "nDCG@10"
        )

    # Weight 0: the figure of the single other stream (BM25 alone) through the same fusion, exactly.
    # One stream alone passes through unfused (docs/ARCHITECTURE.md), so BM25 "through RRF" is
    # BM25 beside a zero-weighted stream: a weight-0 stream adds no candidate and no score.
    bm25 = arms["hybrid"].scorers[0]
    alone = ndcg(Arm("bm25-alone", (bm25, bm25), WeightedRRF([1.0, 0.0]), depth=30))
    assert result.points[0].mean == alone
    # ... which is not the tie-keeping text arm's figure here: RRF turns BM25's tied scores into
    # distinct ranks (key order), while `text` keeps the ties for trec_eval's tie-break.
    text = ndcg(arms["text"])
    assert result.points[0].difference is not None
    assert result.points[0].difference.mean_difference == pytest.approx(alone - text, abs=1e-12)
    # Weight 1 is the arm itself.
    assert result.points[3].mean == ndcg(arms["hybrid"])
    # Three streams: one sweep per non-first stream, each over the same six weights.
    sweeps = _sweep("weights:three", testbed, arms, "text", builder, seed=3, resamples=50, cache=cache, k=30)
    assert [s.name for s in sweeps] == [
        "three: weight of stream 2 (graph), others 1",
        "three: weight of stream 3 (recency), others 1",
    ]
    assert [len(s.points) for s in sweeps] == [6, 6]
    with pytest.raises(InvalidParameterError, match="one stream"):
        _sweep("weights:text", testbed, arms, "text", builder, seed=3, resamples=50, cache=cache, k=30)


@needs_data
@pytest.mark.data
def test_weight_sweep_on_cacm_through_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["eval", "cacm", "--data", str(DATA), "--resamples", "200", "--vectors", "none", "--arms"]
    # bm25-rrf: BM25 through RRF. One stream alone passes through unfused (docs/ARCHITECTURE.md),
    # so it is fused beside a zero-weighted copy, which adds no candidate and no score.
    arms = [
        "text=bm25",
        "hybrid=rrf(bm25, recency(half_life=1825))",
        "bm25-rrf=weighted(bm25, bm25, weights=[1, 0])",
    ]
    assert main([*argv, *arms, "--sweep", "weights:hybrid"]) == 0
    printed = capsys.readouterr().out
    lines = printed.splitlines()
    head = lines.index("sweep hybrid: weight of stream 2 (recency), others 1 (nDCG@10; difference vs text):")
    rows = lines[head + 1 : head + 7]
    assert [row.split()[0] for row in rows] == [f"weight={w:g}" for w in (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)]
    assert all(
        re.fullmatch(r"\s+weight=\S+\s+\d\.\d{4}\s+[+-]\d\.\d{4} \[[+-]\d\.\d{4}, [+-]\d\.\d{4}\]", r)
        for r in rows
    )
    assert lines[head + 7].startswith("  best: {'weight': ")
    # Weight 0 prints the figure of BM25 alone through RRF (the arm bm25-rrf). (Weight 1 need not
    # print the hybrid arm's figure: sweeps run at k = 10, and this arm's fused ties straddle rank 10.)
    table = {line.split()[0]: line.split() for line in lines[:head] if line.split()}
    assert rows[0].split()[1] == table["bm25-rrf"][1]


# ---------------------------------------------------------------------------- datasets fetch

UPSTREAM = "https://upstream.invalid/owner/repo/0123abcd"
MIRRORED = {"cacm.all": b".I 1\n.T\nAlpha\n" * 40, "qrels.text": b"01 0001 0 0\n" * 9}


def mirror_pins(monkeypatch: pytest.MonkeyPatch, files: dict[str, bytes]) -> None:
    """Make ``cacm``'s compiled pins (what the CLI fetches) name ``files`` at UPSTREAM."""
    pins = tuple(
        FilePin(path, len(data), hashlib.sha256(data).hexdigest(), f"{UPSTREAM}/{path}")
        for path, data in files.items()
    )
    monkeypatch.setattr(pins_module, "PINS", {"cacm": CollectionPins("cacm", pins)})


def serve(root: Path, files: dict[str, bytes]) -> None:
    for path, data in files.items():
        target = root / "owner" / "repo" / "0123abcd" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def files_under(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path -> bytes), temporary files included."""
    if not folder.exists():
        return {}
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_datasets_fetch_downloads_and_verifies(
    server: tuple[Path, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root, base = server
    mirror_pins(monkeypatch, MIRRORED)
    serve(root, MIRRORED)
    out = tmp_path / "data"
    assert main(["datasets", "fetch", "cacm", "--to", str(out), "--base-url", base]) == 0
    assert capsys.readouterr().out == f"cacm: 2 files verified in {out / 'cacm'} (2 downloaded)\n"
    assert files_under(out) == {f"cacm/{path}": data for path, data in MIRRORED.items()}
    # Present and verified: nothing is downloaded again.
    assert main(["datasets", "fetch", "cacm", "--to", str(out), "--base-url", base]) == 0
    assert capsys.readouterr().out.endswith("(0 downloaded)\n")


@pytest.mark.parametrize(
    ("served", "message"),
    [
        # Same size, one byte changed: caught by the SHA-256 while streaming.
        (
            MIRRORED["qrels.text"].replace(b"01", b"02", 1),
            r"cacm/qrels\.text: expected 108 bytes with SHA-256 {pinned}, "
            r"got 108 bytes with SHA-256 {actual}; refused",
        ),
        # Another size: refused from the Content-Length, before a byte is written.
        (
            MIRRORED["qrels.text"] + b"01 0002 0 0\n",
            r"cacm/qrels\.text: expected 108 bytes with SHA-256 {pinned}, "
            r"the server offers 120 bytes; refused",
        ),
    ],
)
def test_datasets_fetch_refuses_a_hash_mismatch_and_leaves_no_partial_file(
    server: tuple[Path, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    served: bytes,
    message: str,
) -> None:
    root, base = server
    mirror_pins(monkeypatch, MIRRORED)
    serve(root, {**MIRRORED, "qrels.text": served})
    out = tmp_path / "data"
    assert main(["datasets", "fetch", "cacm", "--to", str(out), "--base-url", base]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    pinned = hashlib.sha256(MIRRORED["qrels.text"]).hexdigest()
    actual = hashlib.sha256(served).hexdigest()
    expected = "weft-search: error: " + message.format(pinned=pinned, actual=actual) + "\n"
    assert re.fullmatch(expected, captured.err), captured.err
    # The file before the bad one arrived whole and verified; of the bad one, nothing (no temporary).
    assert files_under(out) == {"cacm/cacm.all": MIRRORED["cacm.all"]}


def test_datasets_fetch_of_an_unknown_name_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "data"
    assert main(["datasets", "fetch", "nosuch", "--to", str(out)]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'nosuch'" in err
    assert "'scifact', 'cacm', 'cisi', 'cranfield'" in err
    assert not out.exists()


@needs_data
@pytest.mark.data
def test_datasets_fetch_cacm_from_a_local_mirror_then_verify(
    server: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The compiled CACM pins and URLs, served from a mirror laid out like raw.githubusercontent.com."""
    root, base = server
    for pin in pins_module.PINS["cacm"].files:
        assert pin.url is not None
        target = root / pin.url.split("://", 1)[1].split("/", 1)[1]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((DATA / "cacm" / pin.path).read_bytes())
    out = tmp_path / "data"
    assert main(["datasets", "fetch", "cacm", "--to", str(out), "--base-url", base]) == 0
    assert capsys.readouterr().out == f"cacm: 6 files verified in {out / 'cacm'} (6 downloaded)\n"
    assert main(["datasets", "verify", "cacm", "--data", str(out)]) == 0
    assert "3204 documents, 64 queries, 796 relevant pairs" in capsys.readouterr().out


@needs_data
@pytest.mark.data
def test_a_vector_arm_without_vectors_is_refused_naming_the_arm(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["eval", "cranfield", "--data", str(DATA), "--vectors", "none", "--resamples", "10"]
    assert main([*argv, "--arms", "text=bm25", "vector=vector(exact=true)"]) == 2
    error = capsys.readouterr().err
    assert "arm 'vector': scorer 'vector' has no input for any of the 225 queries" in error
    assert "missing: vectors in the index" in error


# ---------------------------------------------------------------------- the dev split (issue 28)

DEV_CORPUS = [
    ("d1", "gene x causes disease y"),
    ("d2", "sea birds follow fishing boats"),
    ("d3", "rain and wind over the sea"),
    ("d4", "fishing boats at sea in the rain"),
]
DEV_QUERIES = [
    ("q1", "What causes disease Y?"),
    ("q2", "birds at sea"),
    ("q3", "what CAUSES  disease y?"),  # a train query duplicating test's q1
    ("q4", "rain over the sea"),
    ("q5", "fishing boats"),
]


def write_dev_folder(folder: Path, splits: dict[str, str]) -> Path:
    """A BEIR folder whose train split holds a case-insensitive duplicate of a test query (q3 of q1)."""
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": key, "text": text}) + "\n" for key, text in DEV_CORPUS), encoding="utf-8"
    )
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": qid, "text": text}) + "\n" for qid, text in DEV_QUERIES), encoding="utf-8"
    )
    for name, text in splits.items():
        (folder / "qrels" / f"{name}.tsv").write_text(text, encoding="utf-8")
    return folder


DEV_SPLITS = {
    "test": "q1\td1\t1\nq2\td2\t1\n",
    "train": "q3\td1\t1\nq4\td3\t1\nq5\td4\t1\n",
}


@pytest.mark.parametrize(
    "flags",
    [["--split", "dev"], ["--dev-from", "train", "--dedupe-against", "test"], ["--dev-from", "train"]],
)
def test_eval_on_the_derived_dev_split_records_its_provenance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    folder = write_dev_folder(tmp_path / "mine", DEV_SPLITS)
    out = tmp_path / "report"
    assert main(["eval", str(folder), *flags, "--resamples", "10", "--out", str(out), "--no-plots"]) == 0
    printed = capsys.readouterr().out
    assert "mine (split dev), 2 queries" in printed
    line = (
        "split dev: derived from train, deduplicated against test (equal after NFKC, casefold and "
        "whitespace collapse); 2 queries kept, removed: q3 (twin of q1)"
    )
    assert line in printed
    assert line in (out / "report.md").read_text()
    testbed = json.loads((out / "report.json").read_text())["testbed"]
    assert testbed["split"] == "dev" and testbed["queries"] == 2
    assert testbed["split_derivation"] == {
        "name": "dev",
        "derived_from": "train",
        "deduplicated_against": "test",
        "queries": 2,
        "removed": [{"id": "q3", "twin": "q1"}],
        "rule": "equal after NFKC, casefold and whitespace collapse",
    }
    # Evaluated on the dev queries: q4 and q5, with train's judgements.
    assert {line.split()[0] for line in (out / "text.trec").read_text().splitlines()} == {"q4", "q5"}


def test_the_dev_split_can_be_made_from_any_pair_of_splits(tmp_path: Path) -> None:
    folder = write_dev_folder(tmp_path / "mine", DEV_SPLITS)
    # The test queries minus those a train query duplicates: q2 only.
    experiment = run_experiment(folder, None, dev_from="test", dedupe_against="train", resamples=10)
    testbed = experiment.comparison.testbed
    assert testbed["split"] == "dev" and testbed["queries"] == 1
    assert testbed["split_derivation"]["removed"] == [{"id": "q1", "twin": "q3"}]
    # Without a derived split the report records none.
    plain = run_experiment(folder, None, split="train", resamples=10)
    assert plain.comparison.testbed["queries"] == 3 and "split_derivation" not in plain.comparison.testbed


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--dev-from", "nope"], "mine has no split 'nope' (splits: test, train)"),
        (["--dedupe-against", "nope"], "no split 'nope' in"),  # the loader names it first
        (["--dev-from", "test", "--dedupe-against", "test"], "against its own source 'test'"),
        (["--split", "test", "--dev-from", "train"], "--split is 'test': give --split dev or neither"),
        (["--split", "dev", "--arms", "l=learned(bm25, bm25)"], "no development split to learn fusion on"),
    ],
)
def test_dev_split_refusals_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    folder = write_dev_folder(tmp_path / "mine", DEV_SPLITS)
    assert main(["eval", str(folder), *flags, "--resamples", "10"]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "Traceback" not in captured.err
    if "nope" in flags:  # an unknown split: the message lists the folder's splits
        assert "(splits: test, train)" in captured.err


def test_a_folders_own_dev_split_is_used_and_not_rederived(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_dev_folder(tmp_path / "mine", {**DEV_SPLITS, "dev": "q5\td4\t1\n"})
    experiment = run_experiment(folder, None, split="dev", resamples=10)
    assert experiment.comparison.testbed["queries"] == 1
    assert "split_derivation" not in experiment.comparison.testbed
    assert main(["eval", str(folder), "--dev-from", "train", "--resamples", "10"]) == 2
    assert "has a 'dev' split of its own" in capsys.readouterr().err


@needs_data
@pytest.mark.data
def test_scifact_dev_split_is_807_queries(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """SciFact's dev: the 809 judged train queries minus 871 and 1291, duplicates of test's 870 and 1292."""
    out = tmp_path / "report"
    status = main(
        [
            *("eval", "scifact", "--data", str(DATA), "--split", "dev", "--arms", "text=bm25"),
            *("--resamples", "10", "--out", str(out), "--no-plots"),
        ]
    )
    assert status == 0
    assert "scifact (split dev), 807 queries" in capsys.readouterr().out
    testbed = json.loads((out / "report.json").read_text())["testbed"]
    assert testbed["queries"] == 807 and testbed["publishable"] is True
    derivation = testbed["split_derivation"]
    assert (derivation["derived_from"], derivation["deduplicated_against"]) == ("train", "test")
    assert derivation["removed"] == [{"id": "871", "twin": "870"}, {"id": "1291", "twin": "1292"}]
    ran = {line.split()[0] for line in (out / "text.trec").read_text().splitlines()}
    assert len(ran) == 807 and not ran & {"871", "1291", "870", "1292"}
