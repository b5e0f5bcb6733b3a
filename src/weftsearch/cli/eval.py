"""``weft-search eval`` and ``weft-search datasets``: the harness from the command line.

:func:`run_experiment` is the whole of ``weft-search eval`` as a function, so
``make eval``, the docs test and the CLI print the same numbers from the same
code: load and verify the collection (and its frozen vectors when present),
build the arms from their specs, learn the fuser of ``learned(...)`` arms on
development queries, compare every arm with the baseline, run the sweeps asked
for, and return everything for printing or writing.

What ``DATASET`` names (:func:`resolve_dataset`): one of the known collections
(``scifact``, ``cacm``, ``cisi``, ``cranfield``), always the pinned collection
under ``--data``, even when a folder of that name exists in the working
directory (write ``./scifact`` to mean the folder); anything else must be a
folder in BEIR's layout: a collection of your own, loaded by
:func:`~weftsearch.eval.datasets.load_beir` (its own pins apply only when its
folder name is a pinned BEIR collection's, e.g. ``./scifact``), with
``--vectors DIR`` (:func:`~weftsearch.eval.datasets.load_vector_folder`),
``--split NAME`` and scorers of your own from ``--plugin MODULE``
(:func:`load_plugins`, imported before any arm spec is read).
"""

from __future__ import annotations

import argparse
import importlib
import json
import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from weftsearch._argtypes import int_at_least, positive_int
from weftsearch.embedders import get_embedder
from weftsearch.errors import InvalidParameterError, PluginError
from weftsearch.eval.cv import (
    CrossValidation,
    add_to_comparison,
    cross_validate,
    fusion_chooser,
    grid_chooser,
)
from weftsearch.eval.datasets import (
    COLLECTIONS,
    DEFAULT_VECTORS,
    DEV_SPLIT,
    FROZEN_MODEL,
    PINS,
    Collection,
    CollectionVectors,
    beir_splits,
    fetch,
    load_beir,
    load_collection,
    load_frozen_vectors,
    load_vector_folder,
)
from weftsearch.eval.gridfile import GridFile, GridResult, SelectionRule, load_grid
from weftsearch.eval.gridfile import select as select_cell
from weftsearch.eval.grids import BM25_B as BM25_B
from weftsearch.eval.grids import BM25_K1 as BM25_K1
from weftsearch.eval.grids import RRF_KS as RRF_KS
from weftsearch.eval.grids import STREAM_WEIGHTS as STREAM_WEIGHTS
from weftsearch.eval.grids import SWEEP_DEPTHS as SWEEP_DEPTHS
from weftsearch.eval.grids import families
from weftsearch.eval.harness import (
    DEFAULT_MEASURES,
    Comparison,
    LearnedFusion,
    Sweep,
    Testbed,
    build_testbed,
    compare,
    development_split,
    learn_fusion,
    sweep,
    title_body_documents,
)
from weftsearch.eval.links import DEFAULT_RANDOM_PAIRS, format_link_independence, link_independence
from weftsearch.eval.runs import StreamCache, run_arm
from weftsearch.ranking.arm import Arm
from weftsearch.ranking.specs import ArmBuilder, ArmSpec, parse_arm

__all__ = [
    "PRESET_ARMS",
    "SPLITS",
    "SWEEP_KINDS",
    "Experiment",
    "load_plugins",
    "resolve_dataset",
    "run_experiment",
    "experiment_from_args",
    "add_eval_commands",
]

#: Arms run when ``--arms`` is not given, per collection; the first is the baseline.
PRESET_ARMS: Mapping[str, tuple[str, ...]] = {
    "scifact": (
        "text=bm25",
        "vector=vector(exact=true)",
        "rrf=rrf(bm25, vector(exact=true))",
        "learned=learned(bm25, vector(exact=true))",
    ),
    "cacm": (
        "text=bm25",
        "graph=rrf(bm25, graph(seed=bm25))",
        "pagerank=rrf(bm25, pagerank(seed=bm25))",
        "graph-seeds=rrf(bm25, graph(seed=bm25, keep_seeds=true))",
        "recency=rrf(bm25, recency(half_life=1825))",
    ),
    "cisi": (
        "text=bm25",
        "graph=rrf(bm25, graph(seed=bm25))",
        "pagerank=rrf(bm25, pagerank(seed=bm25))",
        "graph-seeds=rrf(bm25, graph(seed=bm25, keep_seeds=true))",
    ),
    "cranfield": ("text=bm25", "vector=vector(exact=true)", "rrf=rrf(bm25, vector(exact=true))"),
}

#: (evaluation split, development split) per collection; ``None``: the collection's only judgements.
SPLITS: Mapping[str, tuple[str | None, str | None]] = {
    "scifact": ("test", "train"),
    "cacm": (None, None),
    "cisi": (None, None),
    "cranfield": (None, None),
}

#: ``--sweep`` kinds: ``rrf:ARM`` (RRF k x depth), ``weights:ARM`` (each stream's weight), ``bm25`` (k1 x b).
SWEEP_KINDS = ("rrf", "weights", "bm25")

# The grids of the built-in sweeps live in eval.grids, so a sweep and the
# cross-validated arm choosing over the same family read one definition.


@dataclass(frozen=True, eq=False)
class Experiment:
    """Everything one ``weft-search eval`` run produced."""

    comparison: Comparison
    sweeps: tuple[Sweep, ...] = ()
    learned: Mapping[str, LearnedFusion] = field(default_factory=dict)
    seconds: float = 0.0
    command: str = ""
    validations: tuple[CrossValidation, ...] = ()
    #: The spec of each ``learned`` arm whose fuser was chosen on development queries, by arm name.
    learned_specs: Mapping[str, ArmSpec] = field(default_factory=dict)
    #: The development split learned fusion read (split, queries, duplicates removed), if any.
    development: Mapping[str, Any] = field(default_factory=dict)
    #: ``--grid``: every cell's development scores and the cell the rule picked.
    grid: GridResult | None = None
    #: The spec of every arm of the comparison, by arm name (what ``--save-profile`` saves).
    specs: Mapping[str, ArmSpec] = field(default_factory=dict)


# ---------------------------------------------------------------------- a user's own folder and scorers


def load_plugins(modules: Sequence[str]) -> None:
    """Import each module of ``modules`` (``--plugin``), in order, so that it can call ``register_scorer``.

    A plugin is any importable module (on ``sys.path``, e.g. the working
    directory or an installed package) whose import registers scorers with
    :func:`weftsearch.ranking.specs.register_scorer`.

    Raises:
        PluginError: importing a module failed, for any reason (not found, a
            syntax error, an exception inside it); the message names the module
            and the error.

    """
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # a plugin may fail in any way; say which one and how
            raise PluginError(
                f"--plugin {name!r}: importing it failed: {type(exc).__name__}: {exc} "
                "(a plugin is a module on the Python path that calls weftsearch.eval.register_scorer)"
            ) from exc


def resolve_dataset(dataset: str | Path) -> tuple[str, Path | None]:
    """``(name, None)`` for a known collection, ``(folder name, folder)`` for a folder of your own.

    A known collection name wins over a folder of the same name (write
    ``./NAME`` for the folder); anything else must be an existing folder.

    Raises:
        InvalidParameterError: neither a known collection nor a folder.

    """
    text = str(dataset)
    if text in COLLECTIONS and not isinstance(dataset, Path):
        return text, None
    folder = Path(dataset)
    if folder.is_dir():
        return folder.resolve().name, folder
    raise InvalidParameterError(
        f"{text!r} is neither a known collection ({', '.join(COLLECTIONS)}) nor a folder in BEIR's layout "
        "(corpus.jsonl, queries.jsonl, qrels/*.tsv)"
    )


def _user_collection(
    folder: Path, name: str, split: str | None, vectors: str | None, any_snapshot: bool, fields: bool = False
) -> tuple[Collection, CollectionVectors | None]:
    """A folder of your own: :func:`load_beir` with ``--split``, and its ``--vectors DIR`` (or none).

    A folder that is a pinned BEIR collection (``./scifact``) with one of its
    pinned vector variants is verified as ``weft-search eval scifact`` would
    verify it (:func:`load_frozen_vectors`); any other vectors folder is read
    by :func:`~weftsearch.eval.datasets.load_vector_folder`.
    """
    directory: Path | None = None
    if vectors is not None:
        for candidate in (Path(vectors), folder / "vectors" / vectors):
            if candidate.is_dir():
                directory = candidate
                break
        if directory is None and vectors != DEFAULT_VECTORS:
            raise InvalidParameterError(
                f"--vectors {vectors!r}: no such folder (nor {folder / 'vectors' / vectors}); give a folder "
                "holding corpus.npy, corpus_ids.txt, queries.npy and queries_ids.txt, or 'none'"
            )
    collection = load_beir(folder, name=name, split=split, any_snapshot=any_snapshot, fields=fields)
    if directory is None:
        return collection, None
    pinned = PINS[name].vectors if name in PINS else {}
    if collection.provenance != "unpinned" and directory.name in pinned:
        variant = directory.name
        return collection, load_frozen_vectors(
            collection, variant=variant, folder=directory, any_snapshot=any_snapshot
        )
    return collection, load_vector_folder(collection, directory)


def _user_dev_split(folder: Path, test_split: str) -> str | None:
    """The development split of a folder of your own: ``train`` when it has one besides the test split."""
    return "train" if "train" in beir_splits(folder) and test_split != "train" else None


def _user_main_split(collection: Collection) -> str | None:
    """The split whose judgements are the collection's default qrels."""
    for name, judgements in collection.splits.items():
        if judgements is collection.qrels:
            return name
    return None


def _dev_split_asked(split: str | None, dev_from: str | None, dedupe_against: str | None) -> str | None:
    """The evaluation split: ``--split``, or ``dev`` when only ``--dev-from``/``--dedupe-against`` are given.

    Raises:
        InvalidParameterError: those flags with ``--split`` naming another split.

    """
    if dev_from is None and dedupe_against is None:
        return split
    if split not in (None, DEV_SPLIT):
        raise InvalidParameterError(
            f"--dev-from/--dedupe-against make the {DEV_SPLIT!r} split, but --split is {split!r}: "
            f"give --split {DEV_SPLIT} or neither"
        )
    return DEV_SPLIT


def _with_dev_split(
    collection: Collection, split: str | None, dev_from: str | None, dedupe_against: str | None
) -> Collection:
    """``collection`` with the derived ``dev`` split when ``split`` is ``dev`` and the files have none.

    ``dev`` is ``dev_from`` (default ``train``) minus the queries that
    duplicate one of ``dedupe_against`` (default ``test``):
    :meth:`~weftsearch.eval.datasets.Collection.with_derived_split`.

    Raises:
        InvalidParameterError: the files have a ``dev`` split of their own and
            the flags ask to derive one, or a named split does not exist (the
            message lists the collection's splits).

    """
    if split != DEV_SPLIT:
        return collection
    if DEV_SPLIT in collection.splits:
        if dev_from is not None or dedupe_against is not None:
            raise InvalidParameterError(
                f"{collection.name} has a {DEV_SPLIT!r} split of its own; --dev-from/--dedupe-against "
                "derive one only where the files have none"
            )
        return collection
    return collection.with_derived_split(
        DEV_SPLIT, source=dev_from or "train", against=dedupe_against or "test"
    )


def _vectors_for(collection: Any, variant: str | None, any_snapshot: bool) -> CollectionVectors | None:
    if variant is None:
        return None
    folder = collection.folder / "vectors" / variant
    if not folder.exists():
        if variant == DEFAULT_VECTORS:
            return None  # optional by default: arms that need vectors will say so
        raise InvalidParameterError(f"no vectors {variant!r} under {collection.folder / 'vectors'}")
    return load_frozen_vectors(collection, variant=variant, any_snapshot=any_snapshot)


@dataclass(frozen=True, eq=False)
class _Loaded:
    """A collection ready to run arms on: the parsed arm specs, the testbed and its splits."""

    name: str
    specs: list[ArmSpec]
    collection: Collection
    testbed: Testbed
    test_split: str | None
    dev_split: str | None


def _load(
    dataset: str | Path,
    data: str | Path | None,
    arms: Sequence[str] | None,
    vectors: str | None,
    split: str | None,
    any_snapshot: bool,
    cranfield_grades: str,
    link_set: str | None,
    progress: bool | None,
    dev_from: str | None = None,
    dedupe_against: str | None = None,
    fields: bool = False,
    embed: str | None = None,
    query_syntax: str = "plain",
) -> _Loaded:
    """The collection ``dataset`` names (verified), its testbed, splits and the arm specs to run.

    ``fields``: the joined text as the default field (as without it) and the title and the
    text as the text fields ``title`` and ``body`` (``--fields``:
    :func:`~weftsearch.eval.harness.title_body_documents`), with no vectors.
    """
    name, folder = resolve_dataset(dataset)
    if fields and vectors is not None:
        if vectors != DEFAULT_VECTORS:
            raise InvalidParameterError(
                f"--fields indexes the title and the text apart; vectors ({vectors!r}) pair with the joined "
                "text: give --vectors none"
            )
        vectors = None
    split = _dev_split_asked(split, dev_from, dedupe_against)
    if folder is not None:
        specs = [parse_arm(text) for text in (arms or ("text=bm25",))]
        derived = split == DEV_SPLIT and (
            dev_from is not None or dedupe_against is not None or DEV_SPLIT not in beir_splits(folder)
        )
        # A derived split is no file: load with the split it is deduplicated against as the default.
        load_split = (dedupe_against or "test") if derived else split
        collection, loaded = _user_collection(
            folder, name, load_split, None if embed is not None else vectors, any_snapshot, fields
        )
        collection = _with_dev_split(collection, split, dev_from, dedupe_against)
        test_split: str | None = split or _user_main_split(collection)
        dev_split = _user_dev_split(folder, test_split or "test")
        model = None
    else:
        specs = [parse_arm(text) for text in (arms or PRESET_ARMS[name])]
        if data is None:
            raise InvalidParameterError(
                f"{name} is a known collection: give the folder holding it (--data DIR)"
            )
        collection = load_collection(
            name,
            data,
            any_snapshot=any_snapshot,
            cranfield_grades=cranfield_grades,  # type: ignore[arg-type]
            fields=fields,
        )
        loaded = None if embed is not None else _vectors_for(collection, vectors, any_snapshot)
        collection = _with_dev_split(collection, split, dev_from, dedupe_against)
        test_split, dev_split = SPLITS[name]
        if split is not None:
            collection.judgements(split)  # an unknown split names the known ones
            test_split = split
            dev_split = dev_split if dev_split != split else None
        model = FROZEN_MODEL if loaded else None
    if fields:
        collection = replace(collection, documents=title_body_documents(collection.documents))
    if collection.derivation(test_split) is not None:
        dev_split = None  # evaluating on development queries: nothing else to learn a fuser on
    testbed = build_testbed(
        collection,
        split=test_split,
        vectors=loaded,
        model=model,
        link_set=link_set,
        progress=progress,
        embedder=embed,
        query_syntax=query_syntax,
    )
    return _Loaded(name, specs, collection, testbed, test_split, dev_split)


def _build_arms(
    loaded: _Loaded, builder: ArmBuilder, cache: StreamCache, k: int, cv: int | None
) -> tuple[dict[str, Arm], dict[str, LearnedFusion], dict[str, ArmSpec], list[ArmSpec], dict[str, Any]]:
    """The arms of ``loaded.specs``, each ``learned`` fuser chosen on the development split.

    Returns the built arms by name, each learned arm's choice and spec, the
    specs deferred to cross-validation (``learned`` without a development
    split, with ``cv``), and the report's extra records.
    """
    name, specs, collection, testbed = loaded.name, loaded.specs, loaded.collection, loaded.testbed
    test_split, dev_split = loaded.test_split, loaded.dev_split
    built: dict[str, Arm] = {}
    learned: dict[str, LearnedFusion] = {}
    learned_specs: dict[str, ArmSpec] = {}
    extra: dict[str, Any] = {}
    deferred: list[ArmSpec] = []
    for spec in specs:
        arm = builder.arm(spec)
        if spec.learned and dev_split is None and cv is not None:
            deferred.append(spec)  # chosen by cross-validation below
            continue
        if spec.learned:
            if dev_split is None:
                raise InvalidParameterError(
                    f"arm {spec.name!r}: {name} has no development split to learn fusion on"
                )
            development = development_split(collection, train=dev_split, test=test_split or "test")
            dev = testbed.with_split(dev_split, development.qids)
            choice = learn_fusion(dev, arm, k=k, cache=cache)
            learned[spec.name] = choice
            learned_specs[spec.name] = spec
            arm = replace(arm, fuser=choice.fuser)
            extra["development_split"] = {
                "split": dev_split,
                "queries": len(development.qids),
                "removed_as_duplicates_of_test": dict(development.removed),
                "rule": development.rule,
            }
        if arm.name in built:
            raise InvalidParameterError(f"two arms are named {arm.name!r}")
        built[arm.name] = arm
    if learned:
        extra["learned"] = {name: choice.record() for name, choice in learned.items()}
    return built, learned, learned_specs, deferred, extra


def run_experiment(
    dataset: str | Path,
    data: str | Path | None,
    *,
    arms: Sequence[str] | None = None,
    baseline: str | None = None,
    measures: Sequence[str] = DEFAULT_MEASURES,
    k: int = 100,
    resamples: int = 10_000,
    seed: int = 0,
    vectors: str | None = DEFAULT_VECTORS,
    link_set: str | None = None,
    sweeps: Sequence[str] = (),
    any_snapshot: bool = False,
    cranfield_grades: str = "cleverdon",
    progress: bool | None = False,
    command: str = "",
    cv: int | None = None,
    split: str | None = None,
    plugins: Sequence[str] = (),
    ray: str | None = None,
    grid: str | Path | GridFile | None = None,
    select: str | None = None,
    dev_from: str | None = None,
    dedupe_against: str | None = None,
    fields: bool = False,
    embed: str | None = None,
    query_syntax: str = "plain",
) -> Experiment:
    """Run ``weft-search eval`` as a function; see the module docstring.

    Args:
        dataset: a known collection's name (read from ``data``), or a folder
            in BEIR's layout (see :func:`resolve_dataset`).
        data: the folder holding the known collections (ignored for a folder).
        vectors: a known collection's vector variant, or for a folder a
            vectors folder (a path, or a name under ``<folder>/vectors/``);
            ``None``: no vectors.
        split: the evaluation split (a folder's ``qrels/<split>.tsv``;
            default: ``test``, else the only one). ``dev`` on a collection
            whose files have no such split is derived: ``dev_from`` minus the
            queries duplicating one of ``dedupe_against``
            (:meth:`~weftsearch.eval.datasets.Collection.with_derived_split`),
            recorded in the report's ``testbed.split_derivation``.
        dev_from: the split ``dev`` is derived from (``None``: ``train``);
            giving it (or ``dedupe_against``) implies ``split="dev"``.
        dedupe_against: the split ``dev`` is deduplicated against (``None``: ``test``).
        fields: also index the title and the text as the text fields
            ``title`` and ``body`` for ``bm25f`` arms, beside the joined text
            (the default field, which ``bm25`` scores as without ``fields``):
            :func:`~weftsearch.eval.harness.title_body_documents`; no vectors.
        query_syntax: ``"lucene"``: every query text is parsed as the query
            language (``--syntax lucene``: phrases, ``+must -not``,
            ``field:term``, boosts), a query that does not parse naming its
            id; ``"plain"`` (default): bags of words.
        plugins: modules to import before the arm specs are read
            (:func:`load_plugins`); a plugin may also register an embedder for ``embed``.
        embed: the name of a registered embedder (``--embed NAME``): the
            documents and judged queries get the vectors of their texts from
            it (:func:`~weftsearch.eval.harness.build_testbed` ``embedder=``),
            and the report's testbed record names it. No stored vectors then:
            ``vectors`` must be ``None`` or the default variant (which is not loaded).
        ray: a Ray cluster's address: the arms' streams are computed there,
            queries spread over its workers (the ``ray`` extra); the results
            are a local run's (:mod:`weftsearch.distributed.cluster_eval`).
        arms: arm specs; the first is the baseline (default: the preset arms,
            or ``text=bm25`` for a folder).
        baseline: the arm every other is compared with (default: the first).
        measures: measure names; the first is the headline.
        k: hits per query.
        resamples: bootstrap resamples and randomisation permutations.
        seed: the seed of both tests.
        link_set: take the documents' links from this link set.
        sweeps: ``--sweep`` kinds to run.
        any_snapshot: accept pinned files that differ from their pins (unpublishable).
        cranfield_grades: how Cranfield's codes become grades.
        progress: progress bars (``None``: on a terminal).
        command: the command line, for the report.
        cv: folds of the cross-validated arms (``None``: none; see below).
        grid: a grid file (:mod:`weftsearch.eval.gridfile`): its cells are
            the arms, evaluated on development queries only, and its rule
            picks one (:func:`_run_grid`); no ``arms``, ``baseline``,
            ``sweeps`` or ``cv`` with it.
        select: a selection rule replacing the grid file's (``--select``).

    Raises:
        InvalidParameterError: an unknown dataset or split, a bad arm spec or
            sweep, a ``learned`` arm on a collection without a development split
            (unless ``cv``).
        PluginError: a plugin module failed to import.
        MissingInputError: an arm's scorer has no input for any query.
        PairingError: data that cannot be verified to belong together.
        DatasetIntegrityError: a pinned file differs from its pin (unless ``any_snapshot``).

    With ``cv`` (a number of folds), every ``learned`` arm of a collection
    without a development split, and every sweep's family, also gets an arm
    whose choice is made by ``cv``-fold cross-validation over queries
    (:func:`_cross_validated`).

    """
    started = time.perf_counter()
    load_plugins(plugins)  # before any spec is read: a plugin's scorers must be known by then
    _check_embed(embed, vectors)
    declared = _declared_grid(grid, select, arms=arms, baseline=baseline, sweeps=sweeps, cv=cv)
    loaded = _load(
        dataset,
        data,
        arms if declared is None else [f"{cell.name}={cell.spec}" for cell in declared.cells],
        vectors,
        split,
        any_snapshot,
        cranfield_grades,
        link_set,
        progress,
        dev_from,
        dedupe_against,
        fields,
        embed,
        query_syntax,
    )
    run = _Run(measures, k, resamples, seed, progress, ray, command, started)
    if declared is not None:
        return _run_grid(declared, loaded, split, run)
    return _run_arms(loaded, sweeps, cv, baseline, run)


def _check_embed(embed: str | None, vectors: str | None) -> None:
    """Refuse ``--embed`` with stored vectors, or naming no registered embedder.

    Checked before the collection is read, so a mistyped name costs no loading.
    """
    if embed is None:
        return
    if vectors not in (None, DEFAULT_VECTORS):
        raise InvalidParameterError(
            f"--embed {embed!r} embeds the texts; give it or --vectors {vectors!r}, not both"
        )
    get_embedder(embed)  # an unknown name is said now, before the collection is read


@dataclass(frozen=True)
class _Run:
    """What a grid run and an arms run share: how arms are compared, and the report's context.

    Attributes:
        measures: measure names; the first is the headline.
        k: hits per query (and the arms' default depth).
        resamples: bootstrap resamples and randomisation permutations.
        seed: the seed of both tests.
        progress: progress bars (``None``: on a terminal).
        ray: a Ray cluster's address that computes the arms' streams, or ``None``.
        command: the command line, for the report.
        started: ``time.perf_counter()`` when the run started.

    """

    measures: Sequence[str]
    k: int
    resamples: int
    seed: int
    progress: bool | None
    ray: str | None
    command: str
    started: float

    def compare(
        self,
        testbed: Testbed,
        arms: list[Arm],
        cache: StreamCache,
        baseline: str | None,
        *,
        measures: Sequence[str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> Comparison:
        """``arms`` compared with ``baseline`` on ``testbed`` (``measures``: these, not the run's).

        With ``ray``, the arms' streams are computed over the cluster first,
        into ``cache``: the report is then a local run's.
        """
        if self.ray is not None:
            from weftsearch.distributed.cluster_eval import fill_streams_on_ray

            fill_streams_on_ray(self.ray, cache, testbed, arms)
        return compare(
            testbed,
            arms,
            k=self.k,
            measures=self.measures if measures is None else measures,
            baseline=baseline,
            resamples=self.resamples,
            seed=self.seed,
            cache=cache,
            progress=self.progress,
            extra=extra,
        )


def _run_arms(
    loaded: _Loaded, sweeps: Sequence[str], cv: int | None, baseline: str | None, run: _Run
) -> Experiment:
    """The arms of ``loaded`` compared with the baseline, then the sweeps and the cross-validated arms.

    The counterpart of :func:`_run_grid` for a run without ``--grid``; kept
    apart from :func:`run_experiment` (which checks the options and reads the
    collection) so each stays one readable step.
    """
    k, seed = run.k, run.seed
    builder = ArmBuilder(default_depth=k)
    cache = StreamCache(loaded.testbed.snapshot)
    built, learned, learned_specs, deferred, extra = _build_arms(loaded, builder, cache, k, cv)
    testbed, specs = loaded.testbed, loaded.specs
    comparison = run.compare(testbed, list(built.values()), cache, baseline, extra=extra)
    done: list[Sweep] = [
        result
        for kind in sweeps
        for result in _sweep(
            kind,
            testbed,
            built,
            comparison.baseline,
            builder,
            seed=seed,
            resamples=run.resamples,
            cache=cache,
            k=k,
            specs=specs,
        )
    ]
    validations: tuple[CrossValidation, ...] = ()
    if cv is not None:
        validations = _cross_validated(cv, testbed, built, specs, deferred, sweeps, builder, cache, seed, k)
        comparison = add_to_comparison(comparison, testbed, validations)
    seconds = time.perf_counter() - run.started
    return Experiment(
        comparison,
        tuple(done),
        learned,
        seconds,
        run.command,
        validations,
        learned_specs,
        dict(extra.get("development_split", {})),
        specs={spec.name: spec for spec in specs},
    )


def _declared_grid(
    grid: str | Path | GridFile | None, select: str | None, **others: object
) -> GridFile | None:
    """``--grid`` (with ``--select``'s rule), checked against the options it cannot go with.

    ``None`` when no grid is given.
    """
    if select is not None and grid is None:
        raise InvalidParameterError("--select chooses among a grid's cells: give --grid FILE")
    if grid is None:
        return None
    declared = grid if isinstance(grid, GridFile) else load_grid(grid)
    if select is not None:
        declared = declared.with_rule(SelectionRule.parse(select, where="--select"))
    flags = {"arms": "--arms", "baseline": "--baseline", "sweeps": "--sweep", "cv": "--cv"}
    given = [flags[name] for name, value in others.items() if value]
    if given:
        raise InvalidParameterError(
            f"--grid evaluates the grid file's cells and picks one; {', '.join(given)} cannot go with it"
        )
    return declared


def _run_grid(grid: GridFile, loaded: _Loaded, split: str | None, run: _Run) -> Experiment:
    """``--grid``: every cell on development queries, each against the baseline cell; the rule picks one.

    The development queries are ``--split``'s, as named (the run is then a
    development run by the user's word), else the collection's development
    split with every query whose text duplicates an evaluation query removed
    (the removed ids are recorded); a collection with neither is refused, so
    a grid never picks on the evaluation (test) queries by default.
    """
    testbed = loaded.testbed
    removed: dict[str, str] = {}
    development: dict[str, Any] = {}
    if split is None:
        if loaded.dev_split is None:
            raise InvalidParameterError(
                f"--grid picks on development queries, and {loaded.name} has no development split: "
                "name the split to pick on with --split NAME"
            )
        dev = development_split(loaded.collection, train=loaded.dev_split, test=loaded.test_split or "test")
        testbed = testbed.with_split(loaded.dev_split, dev.qids)
        removed = dict(dev.removed)
        development = {
            "split": loaded.dev_split,
            "queries": len(dev.qids),
            "removed_as_duplicates_of_test": removed,
            "rule": dev.rule,
        }
    elif (derived := testbed.split_derivation) is not None:  # --split dev or --dev-from: a derived split
        removed = dict(derived.removed)
        development = derived.record()
    wanted = list(run.measures) + [m for m in grid.rule.measures() if m not in run.measures]
    builder = ArmBuilder(default_depth=run.k)
    cache = StreamCache(testbed.snapshot)
    arms = [builder.arm(cell.arm) for cell in grid.cells]
    comparison = run.compare(testbed, arms, cache, grid.baseline_cell.name, measures=wanted)
    scores = [{m: comparison.mean(cell.name, m) for m in comparison.measures} for cell in grid.cells]
    result = select_cell(grid, scores, split=testbed.split, queries=len(testbed.queries), removed=removed)
    extra: dict[str, Any] = {"grid": result.record()}
    if development:
        extra["development_split"] = development
    comparison = replace(comparison, extra=extra)
    return Experiment(
        comparison,
        seconds=time.perf_counter() - run.started,
        command=run.command,
        development=development,
        grid=result,
        specs={cell.name: cell.arm for cell in grid.cells},
    )


def _sweep(
    kind: str,
    testbed: Testbed,
    arms: Mapping[str, Arm],
    baseline: str,
    builder: ArmBuilder,
    *,
    seed: int,
    resamples: int,
    cache: StreamCache,
    k: int,
    specs: Sequence[ArmSpec] = (),
) -> list[Sweep]:
    """One ``--sweep`` (``rrf:ARM``, ``weights:ARM``, ``bm25``, ``grid:ARM:...``) against ``baseline``.

    ``specs`` are the arms' specs, which a ``grid:`` sweep rebuilds its arm from.

    The families and their grids are :func:`weftsearch.eval.grids.families`'. Every
    point keeps the report's k hits (its depth where that is smaller), so the point
    at an arm's own parameters reprints the arm's figure in the table: keeping fewer
    would cut tied scores at another place than the table does.
    """
    chosen = families(kind, arms, {s.name: s for s in specs}, builder)
    reference = run_arm(cache, arms[baseline], testbed.queries, k)
    return [
        sweep(
            testbed,
            family.label,
            family.make_arm,
            family.grid,
            measure="nDCG@10",
            k=k,
            reference=reference,
            resamples=resamples,
            seed=seed,
            cache=cache,
        )
        for family in chosen
    ]


def _cross_validated(
    folds: int,
    testbed: Testbed,
    arms: Mapping[str, Arm],
    specs: Sequence[ArmSpec],
    learned: Sequence[ArmSpec],
    sweeps: Sequence[str],
    builder: ArmBuilder,
    cache: StreamCache,
    seed: int,
    k: int,
) -> tuple[CrossValidation, ...]:
    """``--cv N``: one cross-validated arm per ``learned`` arm and per sweep family.

    A ``learned(...)`` arm (on a collection without a development split) is
    named as given and chooses from :func:`~weftsearch.eval.harness.fusion_grid`;
    a sweep's family gives ``<arm>-cv-<kind>`` choosing among the sweep's grid
    points. Folds are dealt with the experiment's seed.
    """
    out: list[CrossValidation] = []
    for spec in learned:
        arm = builder.arm(spec)
        out.append(
            cross_validate(
                testbed, spec.name, fusion_chooser(arm, k=k), folds=folds, seed=seed, k=k, cache=cache
            )
        )
    by_name = {s.name: s for s in specs}
    for kind in sweeps:
        for family in families(kind, arms, by_name, builder):
            chooser = grid_chooser(family.candidates(), k=k)
            out.append(
                cross_validate(testbed, family.cv_name(), chooser, folds=folds, seed=seed, k=k, cache=cache)
            )
    return tuple(out)


# ---------------------------------------------------------------------- the command line


def _print_sweep(result: Sweep) -> None:
    print(f"\nsweep {result.name} ({result.measure}; difference vs {result.reference}):")
    for point in result.points:
        params = ", ".join(
            f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}"
            for key, value in point.params.items()
        )
        line = f"  {params:<24} {point.mean:.4f}"
        if point.difference is not None:
            d = point.difference
            line += f"  {d.mean_difference:+.4f} [{d.low:+.4f}, {d.high:+.4f}]"
        print(line)
    best = result.best()
    print(f"  best: {best.params} {best.mean:.4f}")


def experiment_from_args(args: argparse.Namespace, command: str) -> Experiment:
    """:func:`run_experiment` with the parsed arguments of ``weft-search eval``."""
    return run_experiment(
        args.dataset,
        args.data,
        arms=args.arms,
        baseline=args.baseline,
        measures=args.measures,
        k=args.k,
        resamples=args.resamples,
        seed=args.seed,
        vectors=_vectors_arg(args),
        link_set=args.link_set,
        sweeps=args.sweep or (),
        any_snapshot=args.any_snapshot,
        cranfield_grades=args.cranfield_grades,
        progress=None if getattr(args, "progress", False) else False,
        command=command,
        cv=getattr(args, "cv", None),
        split=getattr(args, "split", None),
        plugins=getattr(args, "plugin", None) or (),
        ray=getattr(args, "ray", None),
        grid=getattr(args, "grid", None),
        select=getattr(args, "select", None),
        dev_from=getattr(args, "dev_from", None),
        dedupe_against=getattr(args, "dedupe_against", None),
        fields=getattr(args, "fields", False),
        embed=getattr(args, "embed", None),
        query_syntax=getattr(args, "syntax", "plain"),
    )


def _vectors_arg(args: argparse.Namespace) -> str | None:
    """``--vectors`` as :func:`run_experiment` takes it: unset is the default variant, unless ``--embed``."""
    given: str | None = args.vectors
    embed = getattr(args, "embed", None)
    if given is None:
        return None if embed is not None else DEFAULT_VECTORS
    if embed is not None and given != "none":
        raise InvalidParameterError(
            f"--embed {embed!r} embeds the texts; give it or --vectors {given!r}, not both"
        )
    return None if given == "none" else given


def _print_grid(result: GridResult) -> None:
    grid, picked = result.grid, result.picked
    removed = ", ".join(f"{qid} (duplicates {twin})" for qid, twin in result.removed.items()) or "none"
    print(
        f"\ngrid {grid.source} (sha256 {grid.sha256[:12] or '-'}): {len(grid.cells)} cells on split "
        f"{result.split} ({result.queries} queries; removed: {removed})"
    )
    measures = grid.rule.measures()
    for cell in grid.cells:
        figures = "  ".join(f"{m} {result.scores[cell.index][m]:.4f}" for m in measures)
        mark = "  <- picked" if cell is picked else ""
        print(f"  {cell.name:<12} {cell.label():<24} {figures}{mark}")
    print(f"  rule {grid.rule}: {grid.rule.describe()}")
    print(
        f"  picked {picked.name} ({picked.label()}), decided by {result.selection.decided_by}: {picked.spec}"
    )


def _cmd_eval(args: argparse.Namespace) -> int:
    from weftsearch.eval import reports  # matplotlib stays optional until a report is written

    command = "weft-search " + shlex.join(getattr(args, "argv", None) or sys.argv[1:])
    experiment = experiment_from_args(args, command)
    collection = experiment.comparison.testbed.get("collection", args.dataset)
    print(reports.format_table(experiment.comparison))
    for name, choice in experiment.learned.items():
        print(
            f"\n{name}: fuser chosen on {choice.dev_queries} development queries: "
            f"{choice.fuser!r} ({choice.measure} {choice.dev_mean:.4f} on them)"
        )
    if experiment.grid is not None:
        _print_grid(experiment.grid)
    for result in experiment.sweeps:
        _print_sweep(result)
    for validation in experiment.validations:
        print(
            f"\n{validation.name}: chosen by {validation.folds}-fold cross-validation "
            f"(seed {validation.seed}):"
        )
        for fold, picked in enumerate(validation.choices):
            print(
                f"  fold {fold}: {picked.label} "
                f"({validation.measure} {picked.train_mean:.4f} on the other folds)"
            )
    if getattr(args, "save_profile", None) is not None:
        _save_profile(args, experiment)
    if args.out is not None:
        files = reports.write_report(
            experiment.comparison,
            args.out,
            sweeps=experiment.sweeps,
            learned=experiment.learned,
            title=f"{collection}: {', '.join(experiment.comparison.arms)}",
            command=command,
            plots=not args.no_plots,
        )
        print(f"\nwrote {files}")
    print(f"\n{collection}: {len(experiment.comparison.arms)} arms in {experiment.seconds:.1f} s")
    return 0


def _plain(value: Mapping[str, Any]) -> dict[str, Any]:
    """``value`` as plain JSON (anything else, a path or a fuser, by its text)."""
    plain: dict[str, Any] = json.loads(json.dumps(value, default=str))
    return plain


def _saved_arm(args: argparse.Namespace, experiment: Experiment) -> str:
    """The arm ``--save-profile`` saves: ``--save-arm``, the grid's pick, the one learned arm, the one arm."""
    names = list(experiment.specs) or list(experiment.learned_specs)
    if args.save_arm is not None:
        if args.save_arm not in experiment.specs and args.save_arm not in experiment.learned_specs:
            raise InvalidParameterError(
                f"--save-arm {args.save_arm!r} is not an arm of this run (arms: {', '.join(names) or 'none'})"
            )
        return str(args.save_arm)
    if experiment.grid is not None:
        return experiment.grid.picked.name
    if len(experiment.learned_specs) == 1:
        return next(iter(experiment.learned_specs))
    if len(names) == 1:
        return names[0]
    raise InvalidParameterError(
        f"--save-profile saves one arm; this run has {len(names)} ({', '.join(names)}): "
        "name one with --save-arm ARM, or pick one with --grid FILE"
    )


def _save_profile(args: argparse.Namespace, experiment: Experiment) -> None:
    """``--save-profile NAME``: store one arm of the run as the next version of profile NAME.

    The arm is :func:`_saved_arm`'s. Its spec is written in the spec language,
    so the server and ``weft-search search --profile`` build what was measured:
    a ``learned(...)`` arm as its scorers under the fuser chosen on development
    queries, any other arm as written. Its provenance is one
    :class:`~weftsearch.ranking.profiles.ProfileProvenance`: the command, the
    code version, the testbed (files and SHA-256 hashes), the split and the
    query ids it left out, the arm's scores on that split and, for a grid's
    pick, the grid file (path and SHA-256), every cell's scores and the rule.
    """
    from weftsearch.ranking.profiles import ProfileProvenance, ProfileStore, spec_of_fuser

    if args.profile_index is None:
        raise InvalidParameterError("--save-profile needs --profile-index DIR (the index that serves it)")
    arm_name = _saved_arm(args, experiment)
    comparison = experiment.comparison
    testbed = _plain(comparison.testbed)
    code = _plain(comparison.code)
    source = "weft-search eval --save-profile"
    if arm_name in experiment.learned_specs:
        spec = experiment.learned_specs[arm_name]
        choice = experiment.learned[arm_name]
        scorers = ", ".join(str(item) for item in spec.expr.args)
        depth = spec.depth if spec.depth is not None else args.k
        text = f"{spec_of_fuser(choice.fuser, scorers)}@{depth}"
        learned = _plain({k: v for k, v in choice.record().items() if k != "tried"})
        development = _plain(experiment.development)
        provenance = ProfileProvenance(
            source=source,
            command=experiment.command,
            code=code,
            arm=str(spec),
            testbed=testbed,
            split=development.get("split"),
            removed_query_ids=dict(development.get("removed_as_duplicates_of_test", {})),
            scores={choice.measure: choice.dev_mean},
            development=development,
            learned=learned,
        )
        description = f"arm {arm_name}: fuser chosen on {choice.dev_queries} development queries"
    else:
        spec = experiment.specs[arm_name]
        depth = spec.depth if spec.depth is not None else args.k
        text = f"{spec.expr}@{depth}"
        scores = {m: comparison.mean(arm_name, m) for m in comparison.measures}
        grid = experiment.grid
        removed = {} if grid is None else dict(grid.removed)
        provenance = ProfileProvenance(
            source=source,
            command=experiment.command,
            code=code,
            arm=str(spec.expr) if spec.depth is None else f"{spec.expr}@{spec.depth}",
            testbed=testbed,
            split=testbed.get("split"),
            removed_query_ids=removed,
            scores=scores,
            selection={} if grid is None else grid.selection_record(),
            grid={} if grid is None else grid.grid.record(),
            cells=() if grid is None else grid.cells_record(),
            development=_plain(experiment.development),
        )
        if grid is not None and arm_name == grid.picked.name:
            description = f"grid {grid.grid.source} cell {grid.picked.label()}: picked by {grid.grid.rule}"
        else:
            description = f"arm {arm_name} as evaluated"
    profile = ProfileStore(args.profile_index).create(
        args.save_profile,
        text,
        depth=depth,
        filter=None if spec.filter is None else str(spec.filter),
        description=description,
        provenance=provenance,
    )
    print(f"\nsaved profile {profile.name} version {profile.version}: {profile.spec}")


def _cmd_fetch(args: argparse.Namespace) -> int:
    result = fetch(args.name, args.to, base_url=args.base_url)
    print(
        f"{args.name}: {len(result.files)} files verified in {result.folder} "
        f"({len(result.downloaded)} downloaded)"
    )
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    collection = load_collection(args.name, args.data)
    for record in collection.manifest:
        print(f"{record.path}: {record.size} bytes sha256 {record.sha256} ok")
    print(
        f"{args.name}: {len(collection.documents)} documents, {len(collection.queries)} queries, "
        f"{collection.relevant_pairs()} relevant pairs"
    )
    return 0


def _cmd_links(args: argparse.Namespace) -> int:
    collection = load_collection(args.name, args.data)
    result = link_independence(
        collection, link_set=args.link_set, split=args.split, pairs=args.pairs, seed=args.seed
    )
    print(format_link_independence(result), end="")
    return 0


def _measures(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _add_testbed_options(evaluate: Any) -> None:
    """``eval``'s options for what the testbed holds: the split, the text fields, the query syntax."""
    evaluate.add_argument(
        "--split",
        metavar="NAME",
        help="judgements to evaluate on: qrels/NAME.tsv (default: test, else the only split); "
        "'dev' where the files have none is --dev-from minus the queries whose text duplicates one "
        "of --dedupe-against (SciFact: 807 queries), recorded in the report",
    )
    evaluate.add_argument(
        "--dev-from",
        metavar="SPLIT",
        help="derive the dev split from SPLIT (default: train); implies --split dev",
    )
    evaluate.add_argument(
        "--dedupe-against",
        metavar="SPLIT",
        help="drop from the dev split every query whose text (or id) is a query of SPLIT (default: test); "
        "implies --split dev",
    )
    evaluate.add_argument(
        "--fields",
        action="store_true",
        help="also index the title and the text as text fields title and body, for bm25f(title=W, "
        "body=W) arms (the joined text stays the default field: bm25 scores it as without --fields). "
        "No vectors",
    )
    evaluate.add_argument(
        "--syntax",
        choices=("plain", "lucene"),
        default="plain",
        help="how query texts are read: plain (default: bags of words) or lucene (each parsed as the "
        "query language: \"phrases\", +must -not, AND/OR/NOT, field:term, boosts, prefix*)",
    )


def add_eval_commands(commands: Any) -> None:
    """Add ``eval`` and ``datasets`` to the ``weft-search`` subcommand parser."""
    presets = "; ".join(f"{name}: {' '.join(arms)}" for name, arms in PRESET_ARMS.items())
    evaluate = commands.add_parser(
        "eval",
        help="evaluate arms on a judged collection",
        description=(
            # A description is printed as written (only help strings and usage are %-formatted).
            "Run arms on a judged collection, print each measure with the paired 95% bootstrap "
            "interval against the baseline arm, and write a report. Arm spec: NAME=EXPR[@DEPTH], e.g. "
            "'hybrid=rrf(bm25, vector, k=60)'; recency(half_life=DAYS) counts days. Default arms: "
            + presets
            + "; text=bm25 for a folder of your own."
        ),
    )
    evaluate.add_argument(
        "dataset",
        metavar="DATASET",
        help=(
            f"a known collection ({', '.join(COLLECTIONS)}: the pinned copy under --data; a known name "
            "always means it, so write ./NAME for a folder of that name), or else a folder of your own "
            "in BEIR's layout (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv); corpus.jsonl may give "
            "links, time and fields as for 'weft-search index'"
        ),
    )
    evaluate.add_argument(
        "--data", metavar="DIR", help="folder holding the known collections (required for a known name)"
    )
    _add_testbed_options(evaluate)
    evaluate.add_argument(
        "--plugin",
        action="append",
        metavar="MODULE",
        help="import MODULE (on the Python path) before the arms are read, so that it can call "
        "weftsearch.eval.register_scorer; repeatable",
    )
    evaluate.add_argument("--arms", nargs="+", metavar="SPEC", help="arm specs; the first is the baseline")
    evaluate.add_argument("--baseline", metavar="ARM", help="compare against this arm (default: the first)")
    evaluate.add_argument(
        "--measures",
        type=_measures,
        default=list(DEFAULT_MEASURES),
        metavar="M,M",
        help="ir_measures names, the first is the headline (default: %(default)s)",
    )
    evaluate.add_argument("--k", type=positive_int, default=100, help="hits per query (default: %(default)s)")
    evaluate.add_argument("--resamples", type=positive_int, default=10_000, help="bootstrap resamples")
    evaluate.add_argument("--seed", type=int_at_least(0), default=0, help="seed of the tests (default: 0)")
    evaluate.add_argument(
        "--vectors",
        default=None,
        metavar="VARIANT|DIR",
        help="a known collection's frozen vectors (default: %(default)s when present), or for a folder of "
        "your own a folder holding corpus.npy, corpus_ids.txt, queries.npy, queries_ids.txt (and the "
        "records 'weft-search embed' writes, which are checked); 'none' for none",
    )
    evaluate.add_argument(
        "--embed",
        metavar="NAME",
        help="embed the documents and queries from their texts with the embedder NAME (e.g. "
        "minilm-l6-int8, or one a --plugin registers or a package declares) instead of stored vectors",
    )
    evaluate.add_argument("--link-set", metavar="NAME", help="take document links from this link set")
    evaluate.add_argument(
        "--sweep",
        action="append",
        metavar="KIND",
        help=(
            "rrf:ARM (RRF k x depth), weights:ARM, bm25 (k1 x b), grid:ARM:NAME=V,V;NAME=V "
            "(any of the arm's parameters; see weftsearch.eval.grids); repeatable"
        ),
    )
    evaluate.add_argument(
        "--cranfield-grades", default="cleverdon", choices=("cleverdon", "ir_datasets", "binary")
    )
    evaluate.add_argument(
        "--any-snapshot",
        action="store_true",
        help="accept files that differ from their pins; every number is marked unpublishable",
    )
    evaluate.add_argument(
        "--cv",
        type=int_at_least(2),
        metavar="FOLDS",
        help=(
            "choose each learned arm's fuser (on a collection without a development split) and "
            "each sweep's grid point by FOLDS-fold cross-validation over queries (folds seeded by "
            "--seed); adds one held-out arm per choice"
        ),
    )
    evaluate.add_argument("--out", type=Path, metavar="DIR", help="write report.md, report.json, runs, plots")
    evaluate.add_argument("--no-plots", action="store_true", help="write no PNG plots")
    evaluate.add_argument("--progress", action="store_true", help="show progress bars")
    evaluate.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="compute the arms' streams on the Ray cluster at ADDRESS (the ray extra); same results",
    )
    evaluate.add_argument(
        "--grid",
        type=Path,
        metavar="FILE",
        help="evaluate a declared grid (JSON or TOML: template, axes, baseline, select; see "
        "weftsearch.eval.gridfile) on development queries only (--split NAME, else the collection's "
        "development split less test duplicates) and pick one cell by the grid's selection rule",
    )
    evaluate.add_argument(
        "--select",
        metavar="RULE",
        help="the grid's selection rule, e.g. 'nDCG@10,R@10,nearest:w,nearest:k': measures (highest "
        "wins) and nearest:AXIS (closest to the baseline cell), in order, then grid order",
    )
    evaluate.add_argument(
        "--save-profile",
        metavar="NAME",
        help="store one arm as the next version of ranking profile NAME in --profile-index (what "
        "weft-search serve and search --profile run), with its provenance: the grid's pick, else the "
        "learned(...) arm's chosen fuser, else the only arm, else --save-arm",
    )
    evaluate.add_argument("--profile-index", metavar="DIR", help="the index --save-profile writes to")
    evaluate.add_argument("--save-arm", metavar="ARM", help="which arm (or grid cell) --save-profile saves")
    evaluate.set_defaults(handler=_cmd_eval)

    _add_datasets_command(commands)


def _add_datasets_command(commands: Any) -> None:
    """``weft-search datasets fetch | verify | links``."""
    datasets = commands.add_parser("datasets", help="fetch or verify judged collections")
    actions = datasets.add_subparsers(dest="action", required=True, metavar="ACTION")
    fetching = actions.add_parser("fetch", help="download a collection from its upstream, verified")
    fetching.add_argument("name", choices=COLLECTIONS)
    fetching.add_argument("--to", required=True, metavar="DIR", help="files go into DIR/NAME/")
    fetching.add_argument("--base-url", metavar="URL", help="a mirror to fetch from instead of the upstream")
    fetching.set_defaults(handler=_cmd_fetch)
    verifying = actions.add_parser("verify", help="check a local copy against the pinned hashes")
    verifying.add_argument("name", choices=COLLECTIONS)
    verifying.add_argument("--data", required=True, metavar="DIR")
    verifying.set_defaults(handler=_cmd_verify)
    linking = actions.add_parser(
        "links",
        help="how a collection's links meet its judgements (link coverage, linked co-relevant pairs)",
        description=(
            "Print how many documents have links, how many of those are relevant to no query, and "
            "the fraction of pairs of documents relevant to the same query that are linked against "
            "the fraction of random document pairs (seeded): how strongly the links go with "
            "relevance (docs/EVAL.md, Experiment 3)."
        ),
    )
    linking.add_argument("name", choices=COLLECTIONS)
    linking.add_argument("--data", required=True, metavar="DIR")
    linking.add_argument("--link-set", metavar="NAME", help="a link set instead of the documents' links")
    linking.add_argument("--split", metavar="NAME", help="judgements of this split (default: the default)")
    linking.add_argument(
        "--pairs", type=positive_int, default=DEFAULT_RANDOM_PAIRS, help="random pairs (default: %(default)s)"
    )
    linking.add_argument(
        "--seed", type=int_at_least(0), default=0, help="seed of the random pairs (default: 0)"
    )
    linking.set_defaults(handler=_cmd_links)
