"""``weft-search eval --grid FILE``: cells on development queries, a named rule's pick saved as a profile.

The saved profile carries one :class:`~weftsearch.ranking.profiles.ProfileProvenance` (data hashes,
split, grid file hash, every cell's score, the rule, the command, the code version), and
``weft-search search --profile NAME`` reproduces the picked cell's run file byte for byte.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.eval.test_user_folder import SPLITS, write_folder, write_vectors
from weftsearch.cli import main
from weftsearch.ranking import ProfileProvenance, ProfileStore

GRID = {
    "name": "hybrid",
    "template": "weighted(bm25, vector, weights=[{w}, {1-w}], k={k})@100",
    "axes": {"w": [0.2, 0.35, 0.5, 0.65, 0.8], "k": [5, 10, 20, 60]},
    "baseline": {"w": 0.5, "k": 60},
}


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    folder = write_folder(tmp_path / "folder", SPLITS)
    vectors = write_vectors(tmp_path / "vectors")
    index = tmp_path / "idx"
    assert main(["index", str(folder), "--index", str(index), "--vectors", str(vectors / "corpus.npy")]) == 0
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps(GRID), encoding="utf-8")
    return folder, vectors, index, grid


def _search_run(index: Path, folder: Path, vectors: Path, tag: str, out: Path) -> str:
    argv = [
        "search",
        "--index",
        str(index),
        "--queries",
        str(folder),
        "--qrels",
        str(folder / "qrels/dev.tsv"),
    ]
    argv += ["--query-vectors", str(vectors / "queries.npy"), "-k", "100", "--run-tag", tag]
    assert main([*argv, "--profile", "picked", "--run-out", str(out)]) == 0
    return out.read_text(encoding="utf-8")


def test_a_grids_pick_is_saved_with_provenance_and_search_reproduces_it(
    tmp_path: Path, setup: tuple[Path, Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, vectors, index, grid = setup
    report = tmp_path / "report"
    argv = ["eval", str(folder), "--vectors", str(vectors), "--split", "dev", "--grid", str(grid)]
    argv += ["--resamples", "20", "--no-plots", "--out", str(report)]
    argv += ["--save-profile", "picked", "--profile-index", str(index)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "rule nDCG@10,R@10,nearest:w,nearest:k" in printed

    record = json.loads((report / "report.json").read_text(encoding="utf-8"))
    outcome = record["extra"]["grid"]
    picked = outcome["selection"]["arm"]
    assert outcome["split"] == "dev" and outcome["selection"]["rule"] == "nDCG@10,R@10,nearest:w,nearest:k"
    assert len(outcome["cells"]) == 20 and {a["arm"]["name"] for a in record["arms"]} == {
        f"hybrid-g{i}" for i in range(20)
    }
    assert record["baseline"] == "hybrid-g11"  # the baseline cell (w=0.5, k=60)
    best = max(cell["means"]["nDCG@10"] for cell in outcome["cells"])
    chosen = next(cell for cell in outcome["cells"] if cell["arm"] == picked)
    assert chosen["means"]["nDCG@10"] == best

    profile = ProfileStore(index).get("picked")
    assert profile.spec == chosen["spec"] and profile.depth == 100
    provenance = profile.provenance_record()
    assert provenance.source == "weft-search eval --save-profile"
    assert provenance.command.startswith("weft-search eval ") and "--grid" in provenance.command
    assert provenance.code["weftsearch"] and "python" in provenance.code
    assert provenance.split == "dev" and provenance.removed_query_ids == {}
    assert provenance.arm == chosen["spec"] and provenance.scores["nDCG@10"] == best
    files = {f["path"]: f["sha256"] for f in provenance.testbed["files"]}
    assert files["corpus.jsonl"] == hashlib.sha256((folder / "corpus.jsonl").read_bytes()).hexdigest()
    assert "qrels/dev.tsv" in files
    assert provenance.grid["sha256"] == hashlib.sha256(grid.read_bytes()).hexdigest()
    assert provenance.grid["file"] == str(grid) and provenance.grid["template"] == GRID["template"]
    assert [c["means"] for c in provenance.cells] == [c["means"] for c in outcome["cells"]]
    assert provenance.selection["rule"] == "nDCG@10,R@10,nearest:w,nearest:k"
    assert provenance.selection["decided_by"] and provenance.selection["spec"] == chosen["spec"]
    # Every field of the typed record is stored (an empty one says so).
    assert set(profile.provenance) == set(ProfileProvenance.__dataclass_fields__)

    run = _search_run(index, folder, vectors, picked, tmp_path / "run.txt")
    assert run.strip() and run == (report / f"{picked}.trec").read_text(encoding="utf-8")
    capsys.readouterr()


def test_select_overrides_the_files_rule_and_is_recorded(
    tmp_path: Path, setup: tuple[Path, Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, vectors, index, grid = setup
    argv = ["eval", str(folder), "--vectors", str(vectors), "--split", "dev", "--grid", str(grid)]
    argv += ["--resamples", "5", "--select", "R@10,nearest:k,nearest:w"]
    argv += ["--save-profile", "picked", "--profile-index", str(index)]
    assert main(argv) == 0
    selection = ProfileStore(index).get("picked").provenance_record().selection
    assert selection["rule"] == "R@10,nearest:k,nearest:w"
    # Every cell has R@10 1.0 on this folder: k=60 (the baseline's) wins, then w=0.5.
    assert selection["arm"] == "hybrid-g11" and selection["decided_by"] == "nearest:w"
    capsys.readouterr()


def test_any_arm_can_be_saved_with_its_scores(
    tmp_path: Path, setup: tuple[Path, Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, vectors, index, _ = setup
    report = tmp_path / "report"
    argv = ["eval", str(folder), "--vectors", str(vectors), "--split", "dev", "--resamples", "5"]
    argv += ["--no-plots", "--out", str(report), "--arms", "text=bm25", "hybrid=rrf(bm25, vector, k=20)@120"]
    assert main([*argv, "--save-profile", "picked", "--profile-index", str(index)]) == 2
    assert "name one with --save-arm ARM" in capsys.readouterr().err
    assert main([*argv, "--save-profile", "picked", "--profile-index", str(index), "--save-arm", "nope"]) == 2
    assert "--save-arm 'nope' is not an arm of this run (arms: text, hybrid)" in capsys.readouterr().err
    assert (
        main([*argv, "--save-profile", "picked", "--profile-index", str(index), "--save-arm", "hybrid"]) == 0
    )
    profile = ProfileStore(index).get("picked")
    assert profile.spec == "rrf(bm25, vector, k=20)@120" and profile.depth == 120
    provenance = profile.provenance_record()
    assert provenance.arm == "rrf(bm25, vector, k=20)@120" and provenance.split == "dev"
    record = json.loads((report / "report.json").read_text(encoding="utf-8"))
    assert provenance.scores == next(a["means"] for a in record["arms"] if a["arm"]["name"] == "hybrid")
    assert provenance.grid == {} and provenance.cells == []
    capsys.readouterr()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--arms", "text=bm25"], "--arms cannot go with it"),
        (["--sweep", "bm25"], "--sweep cannot go with it"),
        (["--select", "nDCG@10,nearest:depth"], "'nearest:depth' names no axis"),
        (["--select", "nDCG@1O"], "'nDCG@1O' is neither a measure nor nearest:AXIS"),
    ],
)
def test_bad_grid_runs_exit_2_with_one_line(
    setup: tuple[Path, Path, Path, Path], extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, vectors, _, grid = setup
    argv = ["eval", str(folder), "--vectors", str(vectors), "--split", "dev", "--grid", str(grid)]
    assert main([*argv, *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_bad_grid_file_and_select_without_grid_exit_2(
    tmp_path: Path, setup: tuple[Path, Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, _, _, grid = setup
    grid.write_text(json.dumps({**GRID, "baseline": {"w": 0.45, "k": 60}}), encoding="utf-8")
    assert main(["eval", str(folder), "--split", "dev", "--grid", str(grid)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "baseline.w = 0.45 is not one of the axis's values" in err[0], err
    assert main(["eval", str(folder), "--select", "nDCG@10"]) == 2
    assert "--select chooses among a grid's cells: give --grid FILE" in capsys.readouterr().err


def test_without_split_a_grid_picks_on_the_development_split_or_is_refused(
    tmp_path: Path, setup: tuple[Path, Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, vectors, _, grid = setup
    only_test = write_folder(tmp_path / "only-test", {"test": SPLITS["dev"]})
    assert main(["eval", str(only_test), "--vectors", str(vectors), "--grid", str(grid)]) == 2
    assert "has no development split: name the split to pick on with --split NAME" in capsys.readouterr().err
    test, train = "q1\td1\t2\nq1\td2\t1\n", "q1\td1\t1\n" + SPLITS["train"]
    with_train = write_folder(tmp_path / "with-train", {"test": test, "train": train})
    out = tmp_path / "report"
    argv = ["eval", str(with_train), "--vectors", str(vectors), "--grid", str(grid), "--resamples", "5"]
    assert main([*argv, "--no-plots", "--out", str(out)]) == 0
    record = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert record["testbed"]["split"] == "train" and record["extra"]["grid"]["split"] == "train"
    # q1 is judged in both: a test query, it is removed from the development queries.
    assert record["extra"]["grid"]["removed_query_ids"] == {"q1": "q1"}
    assert record["extra"]["grid"]["queries"] == 2
    capsys.readouterr()


def test_a_grid_on_the_derived_dev_split_records_its_removed_ids(
    tmp_path: Path, setup: tuple[Path, Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--grid --split dev`` (train minus test duplicates): the pick's record names every removed id."""
    _, vectors, _, grid = setup
    test, train = "q1\td1\t2\nq1\td2\t1\n", "q1\td1\t1\n" + SPLITS["train"]
    folder = write_folder(tmp_path / "with-train", {"test": test, "train": train})
    out = tmp_path / "report"
    argv = ["eval", str(folder), "--vectors", str(vectors), "--grid", str(grid), "--resamples", "5"]
    assert main([*argv, "--split", "dev", "--no-plots", "--out", str(out)]) == 0
    record = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert record["extra"]["grid"]["split"] == "dev"
    assert record["extra"]["grid"]["removed_query_ids"] == {"q1": "q1"}
    capsys.readouterr()
