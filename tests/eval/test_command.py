"""``weft-search eval`` and ``weft-search datasets`` end to end, through ``cli.main``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from weftsearch.cli import main
from weftsearch.eval.command import PRESET_ARMS, run_experiment

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
def test_datasets_verify(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["datasets", "verify", "cacm", "--data", str(DATA)]) == 0
    printed = capsys.readouterr().out
    assert "cacm.all" in printed and "3204 documents" in printed


def test_every_preset_arm_parses() -> None:
    from weftsearch.eval.specs import ArmBuilder

    builder = ArmBuilder()
    for dataset, specs in PRESET_ARMS.items():
        arms = [builder.arm(spec) for spec in specs]
        assert len({arm.name for arm in arms}) == len(arms), dataset
