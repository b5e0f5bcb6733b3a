"""Cross-validated parameter choice: k-fold over queries, for collections without a development split.

CACM, CISI and Cranfield have one set of judged queries. Choosing a fuser or a
grid point on those queries and reporting its score on the same queries
overstates it (the choice has seen the answers). :func:`cross_validate` does
instead what a development split would:

1. :func:`assign_folds` deals the queries into ``folds`` folds, by a seeded
   permutation (``numpy.random.PCG64(seed)``) of the query ids in sorted order,
   so the assignment depends on the seed and the set of ids, never on their order;
2. for each fold, a :data:`Chooser` is handed a testbed holding only the
   *other* folds' queries and judgements, and returns the arm it chooses;
3. that arm is run on the held-out fold's queries only;
4. the held-out rankings of all folds are joined into one run over every
   query, which is evaluated and bootstrapped against the baseline like any
   other arm (:func:`add_to_comparison`; the bootstrap is
   :func:`~weftsearch.eval.stats.paired_bootstrap`).

Every query is scored exactly once, by a choice made without it.

What this is not: the folds share one collection (its documents, its
vocabulary statistics, its assessors), so the estimate says how the *choosing
procedure* does on unseen queries of this collection, not on another
collection; and the choice over a grid is still a choice, whose grid was
written by someone who had seen the collection's earlier results. See
docs/EVAL.md.

Nothing here knows what a scorer is: candidates are built arms.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from weftsearch.engine.protocols import Fuser
from weftsearch.errors import InvalidParameterError, PairingError
from weftsearch.eval.harness import ArmResult, Comparison, Testbed, learn_fusion
from weftsearch.eval.metrics import Evaluation, evaluate, parse_measure
from weftsearch.eval.runs import ArmRun, StreamCache, run_arm
from weftsearch.eval.stats import fisher_randomisation, paired_bootstrap
from weftsearch.ranking.arm import Arm

__all__ = [
    "Chooser",
    "Choice",
    "CrossValidation",
    "assign_folds",
    "cross_validate",
    "grid_chooser",
    "fusion_chooser",
    "add_to_comparison",
]


@dataclass(frozen=True, eq=False)
class Choice:
    """What a chooser picked on the training folds.

    Attributes:
        arm: the arm to run on the held-out fold.
        label: a short description of the choice (the grid point, the fuser).
        train_mean: the chosen arm's mean of the measure on the training queries.

    """

    arm: Arm
    label: str
    train_mean: float


#: Given a testbed holding only the training folds' queries (and a stream cache
#: on the same snapshot), return the chosen arm. It must not read other queries.
Chooser = Callable[[Testbed, StreamCache], Choice]


def assign_folds(qids: Sequence[str], folds: int, seed: int) -> dict[str, int]:
    """Deal ``qids`` into ``folds`` folds of sizes differing by at most one, seeded.

    The ids are sorted first, then permuted by ``numpy.random.PCG64(seed)``;
    position ``i`` of the permutation goes to fold ``i mod folds``. So the
    same set of ids and seed give the same folds whatever order the ids come
    in, on every platform.

    Returns:
        qid -> fold number in ``0 .. folds - 1``.

    Raises:
        InvalidParameterError: fewer than 2 folds, more folds than queries,
            repeated ids, or a negative seed.

    """
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise InvalidParameterError(f"cross-validation needs at least 2 folds, got {folds!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InvalidParameterError(f"the fold seed must be an integer >= 0, got {seed!r}")
    ordered = sorted(qids)
    if len(set(ordered)) != len(ordered):
        raise InvalidParameterError("query ids must be distinct to be dealt into folds")
    if folds > len(ordered):
        raise InvalidParameterError(f"{folds} folds for {len(ordered)} queries: each fold needs a query")
    permutation = np.random.Generator(np.random.PCG64(seed)).permutation(len(ordered))
    return {ordered[int(position)]: i % folds for i, position in enumerate(permutation)}


@dataclass(frozen=True, eq=False)
class CrossValidation:
    """The held-out result of :func:`cross_validate`.

    Attributes:
        name: the arm name the held-out run carries.
        folds: number of folds.
        seed: the fold seed.
        assignment: qid -> fold.
        choices: per fold, what was chosen on the other folds.
        run: the held-out rankings of every query, joined (each query ranked
            by its own fold's choice).
        measure: the measure the choosers maximised.

    """

    name: str
    folds: int
    seed: int
    assignment: Mapping[str, int]
    choices: tuple[Choice, ...]
    run: ArmRun
    measure: str

    def record(self) -> dict[str, Any]:
        """JSON-ready: the folds (each query's fold), each fold's choice, the measure."""
        return {
            "folds": self.folds,
            "seed": self.seed,
            "fold_assignment": "sorted qids permuted by numpy PCG64(seed); position i -> fold i mod folds",
            "assignment": dict(sorted(self.assignment.items())),
            "measure": self.measure,
            "choices": [
                {
                    "fold": fold,
                    "held_out_queries": sum(1 for f in self.assignment.values() if f == fold),
                    "chosen": choice.label,
                    "arm": choice.arm.describe(),
                    "train_mean": choice.train_mean,
                }
                for fold, choice in enumerate(self.choices)
            ],
        }


def cross_validate(
    testbed: Testbed,
    name: str,
    choose: Chooser,
    *,
    folds: int = 5,
    seed: int = 0,
    k: int = 100,
    measure: str = "nDCG@10",
    cache: StreamCache | None = None,
) -> CrossValidation:
    """Choose on ``folds - 1`` folds, rank the held-out fold with the choice, for every fold.

    Args:
        testbed: every judged query.
        name: the name of the joined held-out run (an arm name).
        choose: picks an arm from a testbed of training queries only.
        folds: number of folds (>= 2, at most the number of queries).
        seed: the fold seed (:func:`assign_folds`).
        k: hits kept per query in the held-out run.
        measure: recorded as the measure the chooser maximised.
        cache: streams computed before (on ``testbed.snapshot``).

    Raises:
        InvalidParameterError: bad folds or seed, a cache on another snapshot.

    """
    measure_name = str(parse_measure(measure))
    assignment = assign_folds(list(testbed.queries), folds, seed)
    cache = StreamCache(testbed.snapshot) if cache is None else cache
    if cache.snapshot is not testbed.snapshot:
        raise InvalidParameterError("the stream cache belongs to another snapshot")
    choices: list[Choice] = []
    held_runs: list[ArmRun] = []
    for fold in range(folds):
        train = [qid for qid in testbed.queries if assignment[qid] != fold]
        held = {qid: q for qid, q in testbed.queries.items() if assignment[qid] == fold}
        # The chooser sees a testbed whose queries and judgements are the training folds' only.
        training = replace(
            testbed,
            queries={qid: testbed.queries[qid] for qid in train},
            qrels={qid: testbed.qrels[qid] for qid in train},
        )
        choice = choose(training, cache)
        choices.append(choice)
        held_runs.append(run_arm(cache, choice.arm, held, min(k, choice.arm.depth)))
    joined = _join(name, testbed, assignment, held_runs, choices, k)
    return CrossValidation(name, folds, seed, assignment, tuple(choices), joined, measure_name)


def _join(
    name: str,
    testbed: Testbed,
    assignment: Mapping[str, int],
    runs: Sequence[ArmRun],
    choices: Sequence[Choice],
    k: int,
) -> ArmRun:
    """One run over every query in the testbed's order, each query from its own fold's run."""
    qids = tuple(testbed.queries)
    source = {qid: runs[assignment[qid]] for qid in qids}
    return ArmRun(
        arm=name,
        k=k,
        qids=qids,
        keys={qid: source[qid].keys[qid] for qid in qids},
        scores={qid: source[qid].scores[qid] for qid in qids},
        tied={qid: source[qid].tied[qid] for qid in qids},
        stream_tied={qid: source[qid].stream_tied[qid] for qid in qids},
        signals=runs[0].signals,
        description={
            "name": name,
            "cross_validated": True,
            "folds": [{"fold": f, "chosen": c.label, "arm": c.arm.describe()} for f, c in enumerate(choices)],
        },
    )


def _values_on(
    cache: StreamCache, arm: Arm, queries: Mapping[str, Any], qrels: Mapping[str, Any], k: int, measure: str
) -> dict[str, float]:
    run = run_arm(cache, arm, queries, min(k, arm.depth))
    evaluation = evaluate(qrels, run.run, [measure])
    if evaluation.missing:
        raise PairingError(f"arm {arm.name!r}: judged queries missing from the run: {evaluation.missing[:5]}")
    return evaluation.per_query(measure)


def grid_chooser(candidates: Sequence[tuple[str, Arm]], *, measure: str = "nDCG@10", k: int = 100) -> Chooser:
    """A chooser that runs every ``(label, arm)`` candidate on the training queries and keeps the best.

    The best mean of ``measure`` wins; on an exact tie, the earlier candidate
    (put the default first). A query's value under a candidate depends on
    that query alone, so each (candidate, query) is run and evaluated once,
    the first time the query is handed to the chooser as a training query,
    and remembered for later folds; each fold's mean reads only its own
    training queries (in sorted id order, as
    :meth:`~weftsearch.eval.metrics.Evaluation.mean` sums them). Streams are
    shared through the cache.

    Raises:
        InvalidParameterError: no candidate.

    """
    if not candidates:
        raise InvalidParameterError("grid_chooser needs at least one candidate")
    measure_name = str(parse_measure(measure))
    frozen = tuple(candidates)
    seen: list[dict[str, float]] = [{} for _ in frozen]

    def choose(training: Testbed, cache: StreamCache) -> Choice:
        qids = sorted(training.queries)
        best: Choice | None = None
        for (label, arm), values in zip(frozen, seen, strict=True):
            new = [qid for qid in training.queries if qid not in values]
            if new:
                queries = {qid: training.queries[qid] for qid in new}
                qrels = {qid: training.qrels[qid] for qid in new}
                values.update(_values_on(cache, arm, queries, qrels, k, measure_name))
            mean = float(np.array([values[qid] for qid in qids], dtype=np.float64).mean())
            if best is None or mean > best.train_mean:
                best = Choice(arm, label, mean)
        assert best is not None
        return best

    return choose


def fusion_chooser(
    arm: Arm, *, candidates: Sequence[Fuser] | None = None, measure: str = "nDCG@10", k: int = 100
) -> Chooser:
    """A chooser that runs :func:`~weftsearch.eval.harness.learn_fusion` on the training queries."""

    def choose(training: Testbed, cache: StreamCache) -> Choice:
        learned = learn_fusion(training, arm, candidates=candidates, measure=measure, k=k, cache=cache)
        return Choice(replace(arm, fuser=learned.fuser), repr(learned.fuser), learned.dev_mean)

    return choose


def add_to_comparison(
    comparison: Comparison, testbed: Testbed, validations: Sequence[CrossValidation]
) -> Comparison:
    """``comparison`` with each held-out run added as an arm, tested against the baseline.

    Each joined run is evaluated on every measure of the comparison and gets
    the same paired bootstrap and randomisation test (same resamples and
    seed) as the other arms. The fold assignments and choices go to
    ``extra["cross_validation"]``.

    Raises:
        InvalidParameterError: a name already used by an arm.
        PairingError: a judged query is missing from a held-out run.

    """
    arms: dict[str, ArmResult] = dict(comparison.arms)
    boot = dict(comparison.bootstrap)
    rand = dict(comparison.randomisation)
    base = comparison.arms[comparison.baseline].evaluation
    records = dict(comparison.extra.get("cross_validation", {}))
    for validation in validations:
        if validation.name in arms:
            raise InvalidParameterError(f"two arms are named {validation.name!r}")
        evaluation: Evaluation = evaluate(testbed.qrels, validation.run.run, comparison.measures)
        if evaluation.missing:
            raise PairingError(
                f"arm {validation.name!r}: judged queries missing from the run: {evaluation.missing[:5]}"
            )
        served = evaluate(testbed.qrels, validation.run.served_run, comparison.measures)
        arms[validation.name] = ArmResult(validation.run, evaluation, served)
        for measure in comparison.measures:
            a, b = evaluation.per_query(measure), base.per_query(measure)
            boot[validation.name, measure] = paired_bootstrap(
                a, b, resamples=comparison.resamples, seed=comparison.seed
            )
            rand[validation.name, measure] = fisher_randomisation(
                a, b, permutations=comparison.resamples, seed=comparison.seed
            )
        records[validation.name] = validation.record()
    extra = {**comparison.extra, "cross_validation": records}
    return replace(comparison, arms=arms, bootstrap=boot, randomisation=rand, extra=extra)
