"""``bm25f(...)`` in the spec language: it reads back what it prints, builds the BM25F scorer the
Python API builds (the same score bits), and every malformed field keyword is a typed error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from weftsearch import RRF, BM25Scorer, Document, Index, Schema, TextField
from weftsearch.cli import main
from weftsearch.errors import InvalidParameterError
from weftsearch.eval.gridfile import parse_grid_file
from weftsearch.ranking import build_arm
from weftsearch.ranking.profiles import ProfileStore
from weftsearch.ranking.specs import ArmBuilder, Expr, parse_arm

DOCS = [
    Document("a", "graph ranking of papers", text_fields={"title": "ranking"}),
    Document("b", "ranking ranking ranking with many more words here", text_fields={"title": "graphs"}),
    Document("c", "papers about graph", text_fields={"title": "graph ranking"}),
    Document("d", "nothing relevant", text_fields={"title": "papers"}),
]


def fielded_index(path: Path | None = None) -> Index:
    schema = Schema((TextField("title"),))
    index = Index("english", schema=schema) if path is None else Index.create(path, schema=schema)
    index.add_many(DOCS)
    return index


@pytest.mark.parametrize(
    "text",
    [
        "f=bm25f(title=2.0, text=1.0)",
        "f=bm25f(title=2, text=1, k1=0.9, b=0.4, b.title=0.3)@50",
        "f=bm25f(w.b=1.5, text=1, b.text=0)",
        "h=rrf(bm25, bm25f(title=3, text=1), k=60)@200",
        "g=rrf(bm25, graph(seed=bm25f(title=2, text=1)))",
    ],
)
def test_bm25f_specs_print_and_parse_back(text: str) -> None:
    spec = parse_arm(text)
    assert str(spec) == text
    assert parse_arm(str(spec)) == spec
    ArmBuilder().arm(spec)  # and build


def test_bm25f_builds_the_scorer_of_the_python_api() -> None:
    scorer = ArmBuilder().arm("f=bm25f(title=2, text=1, k1=0.9, b=0.4, b.title=0.3)").scorers[0]
    assert isinstance(scorer, BM25Scorer)
    assert (scorer.k1, scorer.b) == (0.9, 0.4)
    assert scorer.fields == {"title": 2.0, "text": 1.0}
    assert scorer.field_b == {"title": 0.3}
    explicit = ArmBuilder().arm("f=bm25f(w.k1=2, b=0.5)").scorers[0]
    assert isinstance(explicit, BM25Scorer)
    assert explicit.fields == {"k1": 2.0} and explicit.b == 0.5  # a field named k1, spelled w.k1


def test_bm25f_arm_scores_the_bits_of_bm25scorer() -> None:
    index = fielded_index()
    direct = index.search(
        "graph ranking papers",
        10,
        RRF(),
        BM25Scorer(fields={"title": 2.0, "text": 1.0}, field_b={"title": 0.3}),
    )
    arm = build_arm("bm25f(title=2, text=1, b.title=0.3)")
    via_spec = index.search("graph ranking papers", 10, arm.fuser, *arm.scorers)
    assert via_spec.keys == direct.keys and len(direct.keys) == 4
    assert np.array_equal(via_spec.score_array.view(np.uint64), direct.score_array.view(np.uint64))
    # The title weight matters: at weight 1 for both fields the order differs.
    flat = index.search("graph ranking papers", 10, RRF(), BM25Scorer(fields={"title": 1.0, "text": 1.0}))
    assert not np.array_equal(flat.score_array, direct.score_array)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x=bm25f", "at least one field"),
        ("x=bm25f()", "at least one field"),
        ("x=bm25f(k1=1, b=0.5)", "at least one field"),
        ("x=bm25f(b.title=0.5)", "at least one field"),
        ("x=bm25f(text=1, b.title=0.5)", "names 'title'"),
        ("x=bm25f(title=0)", "above 0"),
        ("x=bm25f(title=-1)", "above 0"),
        ("x=bm25f(title=true)", "must be a number"),
        ("x=bm25f(title=abc)", "must be a number"),
        ("x=bm25f(title=1, b.title=1.5)", r"\[0, 1\]"),
        ("x=bm25f(title=1, b=2)", r"\[0, 1\]"),
        ("x=bm25f(title=1, k1=-1)", ">= 0"),
        ("x=bm25f(title=1, w.title=2)", "given twice"),
        ("x=bm25f(title=1, x.title=2)", "neither"),
        ("x=bm25f(title=1, b.=2)", "neither"),
        ("x=bm25f(title=1, b.a.b=2)", "neither"),
        ("x=bm25f(title-x=1)", "neither"),
        ("x=bm25f(bm25)", "positional"),
    ],
)
def test_bad_bm25f_specs_are_typed_errors(text: str, message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        ArmBuilder().arm(text)


def test_an_unknown_field_is_refused_at_the_search_naming_it() -> None:
    arm = build_arm("bm25f(subject=2, text=1)")
    with pytest.raises(InvalidParameterError, match="'subject' is not a text field"):
        fielded_index().search("graph", 10, arm.fuser, *arm.scorers)


def test_grid_templates_vary_field_weights(tmp_path: Path) -> None:
    grid = parse_grid_file(
        {
            "template": "bm25f(title={w}, text=1, b.title={b})@100",
            "axes": {"w": [1, 2.5], "b": [0.3, 0.75]},
            "baseline": {"w": 1, "b": 0.75},
        },
        source="grid.json",
    )
    specs = [cell.spec for cell in grid.cells]
    assert specs[1] == "bm25f(title=1, text=1, b.title=0.75)@100"
    for cell in grid.cells:
        ArmBuilder().arm(f"{cell.name}={cell.spec}")


def test_cli_rank_takes_bm25f(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index = fielded_index(tmp_path / "i")
    index.commit()
    index.close()
    argv = ["search", "graph ranking", "--index", str(tmp_path / "i"), "-k", "2", "--json"]
    assert main([*argv, "--rank", "bm25f(title=5, text=1)"]) == 0
    out = capsys.readouterr().out
    assert main([*argv, "--rank", "bm25f(subject=5)"]) == 2
    assert "'subject' is not a text field" in capsys.readouterr().err
    assert '"c"' in out


def test_expr_of_bm25f_is_an_ordinary_expr() -> None:
    assert parse_arm("f=bm25f(title=2)").expr == Expr("bm25f", (), (("title", 2),))


def test_a_profile_stores_a_bm25f_spec_and_searches_with_it(tmp_path: Path) -> None:
    index = fielded_index(tmp_path / "i")
    index.commit()
    store = ProfileStore(tmp_path / "i")
    spec = "bm25f(title=5, text=1, b.title=0.3)@50"
    store.create("fielded", spec)
    profile = store.get("fielded")
    assert profile.spec == spec and profile.depth == 50
    arm = profile.arm()
    direct = BM25Scorer(fields={"title": 5.0, "text": 1.0}, field_b={"title": 0.3})
    got = index.search("graph ranking", 10, arm.fuser, *arm.scorers)
    want = index.search("graph ranking", 10, RRF(), direct)
    assert got.keys == want.keys
    assert np.array_equal(got.score_array.view(np.uint64), want.score_array.view(np.uint64))
    with pytest.raises(InvalidParameterError, match="at least one field"):
        store.create("broken", "bm25f(k1=1)")
    index.close()
