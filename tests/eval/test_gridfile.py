"""Declared grid files (template x axes, baseline cell) and the named selection rule that picks a cell."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from weftsearch.errors import InvalidParameterError
from weftsearch.eval.gridfile import (
    MAX_CELLS,
    SelectionRule,
    default_rule,
    load_grid,
    parse_grid_file,
    select,
)

#: The SciFact guide's 20 combinations: lexical weight w (semantic 1 - w) x RRF k, 100 candidates a channel.
GUIDE: dict[str, Any] = {
    "name": "hybrid",
    "template": "weighted(bm25, vector(exact=true), weights=[{w}, {1-w}], k={k})@100",
    "axes": {"w": [0.2, 0.35, 0.5, 0.65, 0.8], "k": [5, 10, 20, 60]},
    "baseline": {"w": 0.5, "k": 60},
}


def test_a_grid_expands_its_template_over_the_axes_in_order() -> None:
    grid = parse_grid_file(GUIDE, source="guide.json")
    assert len(grid.cells) == 20
    assert [cell.name for cell in grid.cells[:3]] == ["hybrid-g0", "hybrid-g1", "hybrid-g2"]
    # The last axis varies fastest; {1-w} is written to 12 significant digits (1 - 0.8 is 0.2).
    assert [dict(cell.params) for cell in grid.cells[:5]] == [
        {"w": 0.2, "k": 5},
        {"w": 0.2, "k": 10},
        {"w": 0.2, "k": 20},
        {"w": 0.2, "k": 60},
        {"w": 0.35, "k": 5},
    ]
    assert grid.cells[0].spec == "weighted(bm25, vector(exact=true), weights=[0.2, 0.8], k=5)@100"
    assert grid.cells[-1].spec == "weighted(bm25, vector(exact=true), weights=[0.8, 0.2], k=60)@100"
    assert all(cell.arm.depth == 100 and cell.arm.expr.name == "weighted" for cell in grid.cells)
    weights = [cell.arm.expr.kwargs[0][1] for cell in grid.cells]
    assert all(isinstance(w, list) and math.isclose(sum(w), 1.0) for w in weights)  # type: ignore[arg-type]
    assert grid.baseline_cell.name == "hybrid-g11" and dict(grid.baseline_cell.params) == {"w": 0.5, "k": 60}
    # Default rule: nDCG@10, then judged recall, then nearest the baseline's weights, then its k.
    assert str(grid.rule) == "nDCG@10,R@10,nearest:w,nearest:k"
    assert grid.record()["axes"] == {"w": [0.2, 0.35, 0.5, 0.65, 0.8], "k": [5, 10, 20, 60]}


def test_json_and_toml_files_give_the_same_grid_and_their_hash(tmp_path: Path) -> None:
    as_json = tmp_path / "grid.json"
    as_json.write_text(json.dumps({**GUIDE, "select": "nDCG@10,nearest:k"}), encoding="utf-8")
    as_toml = tmp_path / "grid.toml"
    as_toml.write_text(
        'name = "hybrid"\n'
        'template = "weighted(bm25, vector(exact=true), weights=[{w}, {1-w}], k={k})@100"\n'
        'select = "nDCG@10,nearest:k"\n'
        "[axes]\nw = [0.2, 0.35, 0.5, 0.65, 0.8]\nk = [5, 10, 20, 60]\n"
        "[baseline]\nw = 0.5\nk = 60\n",
        encoding="utf-8",
    )
    a, b = load_grid(as_json), load_grid(as_toml)
    assert [c.spec for c in a.cells] == [c.spec for c in b.cells]
    assert str(a.rule) == str(b.rule) == "nDCG@10,nearest:k"
    assert len(a.sha256) == 64 and a.sha256 != b.sha256 and a.source == str(as_json)


def _with(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps(GUIDE))
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data


BAD: list[tuple[dict[str, Any] | list[Any], str]] = [
    ([1, 2], "expected an object/table"),
    (_with(grid={"w": [1]}), "unknown entry 'grid'"),
    (_with(template=None), "template must be a non-empty spec"),
    (_with(template=7), "template must be a non-empty spec"),
    (_with(name="a b"), "name 'a b'"),
    (_with(axes=None), "axes must map each axis name"),
    (_with(axes={}), "axes must map each axis name"),
    (_with(axes={"w": [], "k": [5]}), "axes.w must be a non-empty list"),
    (_with(axes={"w": 0.5, "k": [5]}), "axes.w must be a non-empty list"),
    (_with(axes={"w": [0.2, 0.2], "k": [5]}), "axes.w: the value 0.2 is given twice"),
    (_with(axes={"w": [0.2, {"x": 1}], "k": [5]}), "axes.w: the value {'x': 1} is not a number"),
    (_with(axes={"w": [0.2, "a b"], "k": [5]}), "axes.w: the value 'a b' is neither a number nor a name"),
    (_with(axes={"w": [0.2], "k": [5], "q": [1]}), "axes.q appears nowhere in the template"),
    (_with(axes={"w": [0.2], "1k": [5]}), "axis name '1k' must be an identifier"),
    (_with(template="weighted(bm25, vector, weights=[{w}, {1-w}], k={kk})"), "'{kk}' names no axis"),
    (_with(template="weighted(bm25, vector, weights=[{w}, {w+1}], k={k})"), "'{w+1}' must be {AXIS}"),
    (_with(template="weighted(bm25, vector, weights=[{w}, {1-w}], k={k}"), "the cell w=0.2, k=5 gives"),
    (_with(template="rrf(bm25, vector, k={k}) {w}}"), "unmatched brace"),
    (_with(template="rrf(bm25, vector, k={k}) where x ~~ {w}"), "the cell w=0.2, k=5 gives"),
    (_with(template="learned(bm25, vector(nprobe={w}), k={k})"), "a cell must be a concrete ranking"),
    (
        _with(template="rrf(bm25, vector, k={1-k})@{w}", axes={"w": [10], "k": ["big"]}, baseline=None),
        "placeholder '{1-k}' subtracts the non-number 'big'",
    ),
    (_with(baseline={"w": 0.5}), "baseline gives no value for axis 'k'"),
    (_with(baseline={"w": 0.5, "k": 60, "x": 1}), "baseline.x names no axis"),
    (_with(baseline={"w": 0.45, "k": 60}), "baseline.w = 0.45 is not one of the axis's values"),
    (_with(baseline={"w": 0.5, "k": True}), "baseline.k = True is not one of the axis's values"),
    (_with(baseline=[0.5, 60]), "baseline must give a value for each axis"),
    (_with(select="nDCG@10,R@1O"), "'R@1O' is neither a measure nor nearest:AXIS"),
    (_with(select="nDCG@10,,R@10"), "an empty key"),
    (_with(select="nDCG@10,nDCG@10"), "key 'nDCG@10' given twice"),
    (_with(select="nDCG@10,nearest:"), "must be nearest:AXIS"),
    (_with(select="nDCG@10,nearest:depth"), "'nearest:depth' names no axis"),
    (_with(select="nDCG@10,nearest:w", baseline=None), "'nearest:w' needs a baseline"),
    (
        _with(
            template="score(bm25, vector, norm={n}, weights=[{w}, {1-w}])",
            axes={"w": [0.2], "n": ["minmax", "zscore"]},
            baseline={"w": 0.2, "n": "minmax"},
            select="nearest:n",
        ),
        "axis 'n' of guide.json is not numeric",
    ),
    (_with(select=5), "expected keys like"),
    (
        _with(axes={"w": list(range(MAX_CELLS)), "k": [1, 2]}, baseline=None),
        f"{2 * MAX_CELLS:,} cells, more than",
    ),
]


@pytest.mark.parametrize(("data", "message"), BAD)
def test_bad_grid_files_are_refused_naming_the_entry(data: Any, message: str) -> None:
    with pytest.raises(InvalidParameterError) as caught:
        parse_grid_file(data, source="guide.json")
    assert message in str(caught.value) and "guide.json" in str(caught.value), str(caught.value)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("grid.json", b'{"template": "bm25", ', "not valid JSON"),
        ("grid.json", b'{"name": "a", "name": "b"}', "key 'name' given twice"),
        ("grid.json", b"\xff\xfe", "not UTF-8 text"),
        ("grid.toml", b"template = ", "not valid TOML"),
    ],
)
def test_unreadable_grid_files_are_refused_naming_the_file(
    tmp_path: Path, name: str, content: bytes, message: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(InvalidParameterError, match="grid file") as caught:
        load_grid(path)
    assert message in str(caught.value) and str(path) in str(caught.value)
    with pytest.raises(InvalidParameterError, match="cannot read it"):
        load_grid(tmp_path / "missing.json")


# ---------------------------------------------------------------------- the rule


GRID = parse_grid_file(GUIDE, source="guide.json")
RULE = SelectionRule.parse("nDCG@10,R@10,nearest:w,nearest:k")


def _scores(**by_cell: tuple[float, float]) -> list[dict[str, float]]:
    """Every cell at nDCG@10 0.5, R@10 0.5, except those given as ``g<i>=(ndcg, recall)``."""
    out = [{"nDCG@10": 0.5, "R@10": 0.5} for _ in GRID.cells]
    for key, (ndcg, recall) in by_cell.items():
        out[int(key[1:])] = {"nDCG@10": ndcg, "R@10": recall}
    return out


def _pick(scores: list[dict[str, float]], rule: SelectionRule = RULE) -> tuple[int, str]:
    grid = GRID.with_rule(rule)
    result = select(grid, scores, split="dev", queries=3)
    return result.picked.index, result.selection.decided_by


def test_the_rule_picks_the_best_first_key() -> None:
    assert _pick(_scores(g3=(0.7, 0.1), g9=(0.69, 0.9))) == (3, "nDCG@10")


def test_the_rule_breaks_an_ndcg_tie_on_recall() -> None:
    assert _pick(_scores(g3=(0.7, 0.6), g9=(0.7, 0.8))) == (9, "R@10")


def test_the_rule_breaks_a_recall_tie_by_the_nearest_weight() -> None:
    # g0 (w=0.2, k=5), g13 (w=0.65, k=10), g18 (w=0.8, k=20): 0.65 is nearest the baseline's 0.5.
    assert _pick(_scores(g0=(0.7, 0.8), g13=(0.7, 0.8), g18=(0.7, 0.8))) == (13, "nearest:w")


def test_the_rule_breaks_a_weight_tie_by_the_nearest_k() -> None:
    # w=0.35 and w=0.65 are equally near 0.5 (as floats too); k=20 is nearer 60 than k=5.
    assert _pick(_scores(g4=(0.7, 0.8), g14=(0.7, 0.8))) == (14, "nearest:k")


def test_cells_tied_on_every_key_go_by_grid_order() -> None:
    # g5 (0.35, 10) and g13 (0.65, 10): tied on scores, weight distance and k.
    assert _pick(_scores(g13=(0.7, 0.8), g5=(0.7, 0.8))) == (5, "grid order")


def test_means_equal_to_twelve_places_tie_and_nan_ranks_last() -> None:
    assert _pick(_scores(g3=(0.7 + 1e-15, 0.1), g11=(0.7, 0.2))) == (11, "R@10")
    scores = [{"nDCG@10": math.nan, "R@10": 1.0} for _ in GRID.cells]
    scores[19] = {"nDCG@10": 0.0, "R@10": 0.0}
    assert _pick(scores) == (19, "nDCG@10")


def test_another_rule_order_picks_otherwise_and_is_recorded() -> None:
    scores = _scores(g3=(0.7, 0.6), g9=(0.6, 0.8))
    assert _pick(scores) == (3, "nDCG@10")
    recall_first = SelectionRule.parse(" R@10 , nDCG@10 ")
    assert _pick(scores, recall_first) == (9, "R@10")
    result = select(GRID.with_rule(recall_first), scores, split="dev", queries=3, removed={"q9": "q1"})
    record = result.record()
    assert record["selection"]["rule"] == "R@10,nDCG@10"
    words = "highest R@10, then highest nDCG@10, then first in grid order"
    assert record["selection"]["rule_in_words"] == words
    assert record["selection"]["arm"] == "hybrid-g9" and record["removed_query_ids"] == {"q9": "q1"}
    assert [c["means"]["R@10"] for c in record["cells"]][9] == 0.8 and len(record["cells"]) == 20


def test_a_score_missing_from_a_cell_is_refused() -> None:
    with pytest.raises(InvalidParameterError, match="cell 0 has no R@10 score"):
        RULE.pick([c.params for c in GRID.cells], [{"nDCG@10": 0.5} for _ in GRID.cells], GRID.baseline)


def test_the_default_rule_without_a_baseline_reads_measures_only() -> None:
    assert str(default_rule({"w": (0.1,), "n": ("a",)}, None)) == "nDCG@10,R@10"
    assert str(default_rule({"w": (0.1,), "n": ("a",)}, {"w": 0.1, "n": "a"})) == "nDCG@10,R@10,nearest:w"
