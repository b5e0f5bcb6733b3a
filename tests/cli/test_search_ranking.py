"""One ranking language: ``search --rank SPEC`` and ``--profile NAME`` run what ``eval`` measured.

The run file ``weft-search search --rank SPEC --run-out FILE`` writes is, byte for byte, the
``<arm>.trec`` that ``weft-search eval --arms ARM=SPEC`` writes for the same folder, vectors and
k; a profile saved by the ProfileStore (as ``eval --save-profile`` and the server save them) runs
the same. The old flags are sugar compiling to a spec; the server, eval and the CLI build every
ranking through one function.
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

import pytest

from tests.eval.test_user_folder import SPLITS, write_folder, write_vectors
from weftsearch.cli import main
from weftsearch.cli.search import sugar_spec
from weftsearch.ranking import ProfileStore

ROOT = Path(__file__).resolve().parents[2]
SPEC = "rrf(bm25, vector, k=60)@100"


def _eval_run(tmp_path: Path, folder: Path, vectors: Path, spec: str) -> str:
    out = tmp_path / "report"
    argv = ["eval", str(folder), "--vectors", str(vectors), "--split", "dev", "--resamples", "20"]
    argv += ["--no-plots", "--out", str(out), "--arms", f"hybrid={spec}"]
    assert main(argv) == 0
    return (out / "hybrid.trec").read_text(encoding="utf-8")


def _search_run(index: Path, folder: Path, vectors: Path, *ranking: str, out: Path) -> str:
    argv = [
        "search",
        "--index",
        str(index),
        "--queries",
        str(folder),
        "--qrels",
        str(folder / "qrels/dev.tsv"),
    ]
    argv += ["--query-vectors", str(vectors / "queries.npy"), "-k", "100", "--run-tag", "hybrid"]
    assert main([*argv, *ranking, "--run-out", str(out)]) == 0
    return out.read_text(encoding="utf-8")


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    folder = write_folder(tmp_path / "folder", SPLITS)
    vectors = write_vectors(tmp_path / "vectors")
    index = tmp_path / "idx"
    assert main(["index", str(folder), "--index", str(index), "--vectors", str(vectors / "corpus.npy")]) == 0
    return folder, vectors, index


def test_search_rank_writes_evals_run_file(
    tmp_path: Path, setup: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, vectors, index = setup
    expected = _eval_run(tmp_path, folder, vectors, SPEC)
    assert expected.strip()
    assert _search_run(index, folder, vectors, "--rank", SPEC, out=tmp_path / "run.txt") == expected
    capsys.readouterr()


def test_search_profile_writes_evals_run_file(
    tmp_path: Path, setup: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, vectors, index = setup
    expected = _eval_run(tmp_path, folder, vectors, SPEC)
    ProfileStore(index).create("hybrid", "rrf(bm25, vector, k=60)", depth=100)
    assert _search_run(index, folder, vectors, "--profile", "hybrid", out=tmp_path / "run.txt") == expected
    capsys.readouterr()


def test_the_old_flags_compile_to_the_same_run(
    tmp_path: Path, setup: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, vectors, index = setup
    sugar = ["--signals", "text,vector", "--fusion", "rrf", "--rrf-k", "60", "--depth", "100"]
    assert _search_run(index, folder, vectors, *sugar, out=tmp_path / "a.txt") == _search_run(
        index, folder, vectors, "--rank", SPEC, out=tmp_path / "b.txt"
    )
    capsys.readouterr()


def _args(**given: object) -> argparse.Namespace:
    defaults: dict[str, object] = {
        "fusion": "rrf",
        "rrf_k": 60.0,
        "norm": "minmax",
        "half_life": 365.0,
        "k1": 1.2,
        "b": 0.75,
        "seed_n": 5,
        "graph_depth": 3,
        "keep_seeds": False,
        "nprobe": 20,
        "exact_vectors": False,
        "depth": None,
    }
    return argparse.Namespace(**{**defaults, **given})


@pytest.mark.parametrize(
    ("names", "given", "weights", "spec"),
    [
        (["text"], {}, None, "bm25"),
        (["text", "vector"], {}, None, "rrf(bm25, vector, k=60.0)"),
        (
            ["text", "vector"],
            {"fusion": "weighted"},
            [2.0, 1.0],
            "weighted(bm25, vector, weights=[2.0, 1.0], k=60.0)",
        ),
        (
            ["text", "recency"],
            {"fusion": "score", "norm": "zscore"},
            None,
            "score(bm25, recency(half_life=365.0), norm=zscore)",
        ),
        (
            ["graph"],
            {"k1": 0.9, "keep_seeds": True},
            None,
            "graph(seed=bm25(k1=0.9, b=0.75), max_depth=3, seed_n=5, keep_seeds=true)",
        ),
        (
            ["pagerank", "vector"],
            {"exact_vectors": True, "depth": 50},
            None,
            "rrf(pagerank(seed=bm25, seed_n=5), vector(exact=true), k=60.0)@50",
        ),
    ],
)
def test_sugar_compiles_to_spec_text(
    names: list[str], given: dict[str, object], weights: list[float] | None, spec: str
) -> None:
    assert sugar_spec(_args(**given), names, weights) == spec


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rank", "bm25", "--profile", "p"], "give --rank SPEC or --profile NAME, not both"),
        (["--rank", "bm25", "--signals", "text"], "--signals is sugar for a --rank spec"),
        (["--profile", "p", "--fusion", "score", "--k1", "1"], "--fusion, --k1 are sugar for a --rank spec"),
        (["--rank", "rrf(bm25, nope)"], "unknown scorer 'nope'"),
        (["--rank", "rrf(bm25, vector)"], "--rank: the ranking 'rrf(bm25, vector)' has a vector scorer"),
        (["--rank", "bm25@10", "--depth", "20"], "depth 20 differs from the spec's @10"),
        (["--rank", "learned(bm25, vector)"], "learned(...) is chosen on development queries"),
        (["--profile", "missing"], "missing"),
        (["--profile", "../etc"], "a profile name is 1-64 letters"),
    ],
)
def test_bad_rankings_exit_2_with_one_line(
    setup: tuple[Path, Path, Path], argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, _, index = setup
    capsys.readouterr()
    assert main(["search", "gene", "--index", str(index), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("weft-search: error: ") and message in err[0], err


def test_the_profile_filter_applies_unless_filter_is_given(
    setup: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, _, index = setup
    ProfileStore(index).create("voted", "bm25", depth=10, filter="exists(votes)")
    capsys.readouterr()

    def keys(*extra: str) -> list[str]:
        assert main(["search", "sea rain birds", "--index", str(index), "--json", *extra]) == 0
        return [hit["key"] for hit in json.loads(capsys.readouterr().out)["hits"]]

    everything = keys("--rank", "bm25")
    assert "d6" in everything and "d4" in everything  # neither has votes
    voted = keys("--profile", "voted")
    assert voted and not {"d4", "d5", "d6"} & set(voted)
    unvoted = keys("--profile", "voted", "--filter", "not exists(votes)")
    assert "d6" in unvoted and set(unvoted) <= {"d4", "d5", "d6"}


def _calls_of(path: Path, name: str) -> int:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sum(
        1
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (getattr(node.func, "id", None) == name or getattr(node.func, "attr", None) == name)
    )


def test_server_eval_and_cli_build_rankings_with_one_parser() -> None:
    """``build_arm``/``parse_arm``/``ArmBuilder`` of weftsearch.ranking are the only ranking parser:
    the server and the CLI call build_arm, eval parses arm specs with parse_arm, and no other
    module of the package defines a spec parser of its own."""
    src = ROOT / "src" / "weftsearch"
    assert sum(_calls_of(path, "build_arm") for path in (src / "server").rglob("*.py")) >= 1
    assert _calls_of(src / "cli" / "search.py", "build_arm") >= 1
    assert _calls_of(src / "cli" / "eval.py", "parse_arm") >= 1
    assert _calls_of(src / "ranking" / "profiles.py", "parse_arm") >= 1
    defined = [
        path.relative_to(src).as_posix()
        for path in src.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef)
        and node.name in ("parse_arm", "build_arm", "make_scorer", "make_cli_fuser")
    ]
    assert sorted(defined) == ["ranking/profiles.py", "ranking/specs.py"]


@pytest.mark.parametrize(("spec", "depth"), [("bm25@10", None), ("bm25", 10)])
def test_a_profile_ranking_is_shown_with_its_depth_once(
    setup: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str], spec: str, depth: int | None
) -> None:
    """``eval --save-profile`` saves ``EXPR@DEPTH``: the header said ``bm25@10@10`` before."""
    _, _, index = setup
    ProfileStore(index).create("saved", spec, depth=depth)
    capsys.readouterr()
    assert main(["search", "sea rain birds", "--index", str(index), "--profile", "saved"]) == 0
    out = capsys.readouterr().out
    assert "profile saved v1: bm25@10" in out and "@10@10" not in out
