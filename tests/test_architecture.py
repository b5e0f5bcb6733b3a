"""Architecture tests: the engine never knows which scorer produced a stream, and the
fuser never learns what a scorer is.

* Import rules, proved by parsing the source with :mod:`ast`: engine and fusion
  import no scorer, no scorer imports another, storage imports neither scorers
  nor fusion. The checker has its own tests, so it is known to catch violations.
* The engine treats every scorer alike: replaying each built-in scorer's stream
  through an unrelated class gives bit-identical hits.
* RRF reads ranks only; every fuser honours over-fetching; ties break on the key.
* The public API matches the committed golden file.
"""

from __future__ import annotations

import ast
import difflib
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

import weftsearch.scorers
from tests.golden import make_public_api
from weftsearch import (
    RRF,
    BM25Scorer,
    Document,
    FusedStream,
    Fuser,
    GraphScorer,
    Index,
    KeyOrder,
    PageRankScorer,
    Query,
    RecencyScorer,
    ScoreFusion,
    Scorer,
    SearchResults,
    Snapshot,
    Stream,
    VectorScorer,
    WeightedRRF,
)
from weftsearch.fusion.score import Normalisation

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIR = ROOT / "src" / "weftsearch"
PACKAGE = "weftsearch"
SCORERS = "weftsearch.scorers"
FUSION = "weftsearch.fusion"
FACADE = "weftsearch"
INTEGRATIONS = "weftsearch.integrations"

# ---------------------------------------------------------------------------- the import checker


@dataclass(frozen=True)
class ImportRef:
    """One import found in a module: the absolute dotted name it reaches, and where."""

    line: int
    target: str


def _resolve_relative(module: str, is_package: bool, level: int, name: str | None) -> str:
    """Absolute name of ``from <level dots><name> import ...`` inside ``module``."""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 > len(parts) - 1:
        raise ValueError(f"relative import beyond the top-level package in {module}")
    base = parts[: len(parts) - (level - 1)]
    return ".".join([*base, name] if name else base)


def _dynamic_import(node: ast.Call) -> str | None:
    """The module named by ``importlib.import_module("x")`` or ``__import__("x")``, if constant."""
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if name not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def imports_of(source: str, module: str, is_package: bool = False) -> list[ImportRef]:
    """Every import in ``source`` (anywhere: functions, ``TYPE_CHECKING`` blocks, ...).

    ``import a.b`` reaches ``a.b``; ``from a import b`` reaches ``a.b`` (``b``
    may be a submodule or an attribute of ``a``; both are imports of ``a``);
    relative imports are resolved against ``module``; a constant-string
    ``importlib.import_module`` / ``__import__`` call counts too.
    """
    found: list[ImportRef] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend(ImportRef(node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                origin = _resolve_relative(module, is_package, node.level, node.module)
            else:
                origin = node.module or ""
            found.extend(ImportRef(node.lineno, f"{origin}.{alias.name}") for alias in node.names)
        elif isinstance(node, ast.Call):
            target = _dynamic_import(node)
            if target is not None:
                found.append(ImportRef(node.lineno, target))
    return sorted(found, key=lambda ref: (ref.line, ref.target))


def _package_children() -> frozenset[str]:
    """Names of the modules and subpackages directly inside ``weftsearch``."""
    return frozenset(
        path.stem if path.is_file() else path.name
        for path in PACKAGE_DIR.iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").exists()
    )


def _within(target: str, prefix: str) -> bool:
    return target == prefix or target.startswith(prefix + ".")


def import_violations(
    source: str,
    module: str,
    forbidden: Sequence[str],
    *,
    is_package: bool = False,
    allowed: Sequence[str] = (),
    children: frozenset[str] | None = None,
) -> list[str]:
    """Imports in ``source`` that reach a ``forbidden`` package (unless inside ``allowed``).

    Importing the package facade (``import weftsearch`` or ``from weftsearch
    import Name`` where ``Name`` is not a submodule) counts as importing
    everything, since the facade imports every scorer and fuser.
    """
    children = _package_children() if children is None else children
    problems: list[str] = []
    for ref in imports_of(source, module, is_package):
        target = ref.target
        head, _, rest = target.partition(".")
        if head == PACKAGE and (not rest or rest.split(".")[0] not in children):
            problems.append(f"{module}:{ref.line} imports {target!r} through the package facade")
            continue
        if any(_within(target, prefix) for prefix in allowed):
            continue
        for prefix in forbidden:
            if _within(target, prefix):
                problems.append(f"{module}:{ref.line} imports {target!r} (from forbidden {prefix!r})")
    return problems


def _module_name(path: Path) -> tuple[str, bool]:
    relative = path.relative_to(PACKAGE_DIR.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _modules_under(*relative: str) -> list[Path]:
    paths: list[Path] = []
    for name in relative:
        target = PACKAGE_DIR / name
        if target.is_dir():
            paths.extend(sorted(target.rglob("*.py")))
        elif target.with_suffix(".py").is_file():
            paths.append(target.with_suffix(".py"))
    return paths


def _violations_in(paths: Sequence[Path], forbidden: Sequence[str]) -> list[str]:
    problems: list[str] = []
    for path in paths:
        module, is_package = _module_name(path)
        source = path.read_text(encoding="utf-8")
        problems.extend(import_violations(source, module, forbidden, is_package=is_package))
    return problems


# ---------------------------------------------------------------------------- the checker's own tests

CHECKER_VIOLATIONS = [
    ("import weftsearch.scorers.bm25", "weftsearch.engine.search"),
    ("import weftsearch.scorers", "weftsearch.engine.search"),
    ("import weftsearch.scorers.graph as g", "weftsearch.fusion.rrf"),
    ("from weftsearch.scorers import BM25Scorer", "weftsearch.engine.search"),
    ("from weftsearch.scorers.bm25 import BM25Scorer", "weftsearch.engine.search"),
    ("from weftsearch import scorers", "weftsearch.engine.search"),
    ("from ..scorers import bm25", "weftsearch.engine.search"),
    ("from ..scorers.bm25 import BM25Scorer", "weftsearch.engine.search"),
    ("from .. import scorers", "weftsearch.engine.search"),
    ("from ...scorers import bm25", "weftsearch.engine.sub.deep"),
    ("from ..scorers import bm25", "weftsearch.engine"),  # package __init__ handled by is_package below
    ("def f() -> None:\n    from weftsearch.scorers.graph import GraphScorer\n", "weftsearch.engine.search"),
    (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from weftsearch.scorers import X\n",
        "weftsearch.engine.search",
    ),
    ("class A:\n    def m(self) -> None:\n        import weftsearch.scorers.bm25\n", "weftsearch.fusion.rrf"),
    ("try:\n    pass\nexcept ImportError:\n    from weftsearch.scorers import x\n", "weftsearch.fusion.rrf"),
    ("import importlib\nimportlib.import_module('weftsearch.scorers.bm25')\n", "weftsearch.engine.index"),
    ("__import__('weftsearch.scorers')\n", "weftsearch.engine.index"),
    ("from weftsearch import BM25Scorer", "weftsearch.engine.search"),
    ("import weftsearch", "weftsearch.engine.search"),
    ("from weftsearch import *", "weftsearch.engine.search"),
    ("import os, weftsearch.scorers.vector", "weftsearch.engine.search"),
]


@pytest.mark.parametrize(("source", "module"), CHECKER_VIOLATIONS)
def test_checker_catches_a_forbidden_import(source: str, module: str) -> None:
    is_package = module == "weftsearch.engine"
    problems = import_violations(source, module, [SCORERS], is_package=is_package)
    assert problems, f"checker missed a forbidden import in {source!r}"


CHECKER_CLEAN = [
    "from weftsearch.engine.stream import Stream",
    "from .stream import Stream",
    "from . import stream",
    "from ..errors import InvalidParameterError",
    "from weftsearch import errors",
    "import weftsearch.errors",
    "import weftsearch.scorers_extra",  # a name that only starts like the forbidden one
    "import numpy as np\nfrom collections.abc import Sequence",
    "x = 'from weftsearch.scorers import BM25Scorer'",  # a string, not an import
    "# import weftsearch.scorers",
]


@pytest.mark.parametrize("source", CHECKER_CLEAN)
def test_checker_accepts_allowed_imports(source: str) -> None:
    children = _package_children() | {"scorers_extra"}
    assert import_violations(source, "weftsearch.engine.search", [SCORERS], children=children) == []


def test_checker_resolves_relative_imports_and_reports_lines() -> None:
    source = "import numpy\n\n\ndef f() -> None:\n    from ..scorers.graph import GraphScorer\n"
    refs = imports_of(source, "weftsearch.fusion.rrf")
    assert refs == [ImportRef(1, "numpy"), ImportRef(5, "weftsearch.scorers.graph.GraphScorer")]
    # In a package's __init__, one dot is the package itself.
    assert imports_of("from .rrf import RRF", "weftsearch.fusion", is_package=True) == [
        ImportRef(1, "weftsearch.fusion.rrf.RRF")
    ]
    problems = import_violations(source, "weftsearch.fusion.rrf", [SCORERS])
    assert len(problems) == 1 and "weftsearch.fusion.rrf:5" in problems[0]


def test_checker_honours_allowed_prefixes() -> None:
    source = "from weftsearch.scorers.bm25 import lucene_idf\nfrom weftsearch.scorers import graph\n"
    problems = import_violations(source, "weftsearch.scorers.bm25", [SCORERS], allowed=[f"{SCORERS}.bm25"])
    assert len(problems) == 1 and "weftsearch.scorers.graph" in problems[0]


def test_checker_rejects_a_relative_import_beyond_the_package() -> None:
    with pytest.raises(ValueError, match="beyond the top-level package"):
        imports_of("from .... import x", "weftsearch.engine.search")


# ---------------------------------------------------------------------------- the rules, on the real source


def test_the_rules_see_the_real_modules() -> None:
    """Guard against a vacuous pass: the globs find the modules the rules are about."""
    engine = {_module_name(p)[0] for p in _modules_under("engine")}
    fusion = {_module_name(p)[0] for p in _modules_under("fusion")}
    scorers = {_module_name(p)[0] for p in _modules_under("scorers")}
    assert {"weftsearch.engine", "weftsearch.engine.search", "weftsearch.engine.index"} <= engine
    assert {"weftsearch.fusion", "weftsearch.fusion.rrf", "weftsearch.fusion.score"} <= fusion
    assert {f"{SCORERS}.{name}" for name in ("bm25", "vector", "graph", "recency")} <= scorers
    assert _modules_under("storage"), "neither storage.py nor a storage/ package was found"


def test_engine_imports_no_scorer_and_no_fuser() -> None:
    # engine/__init__ documents both: "nothing here imports a scorer or a fuser".
    assert _violations_in(_modules_under("engine"), [SCORERS, FUSION]) == []


def test_the_coordinator_and_engine_never_pick_out_a_graph_scorer_by_name() -> None:
    """Graph scorers run on shards through the generic whole-collection protocol
    (``collection_inputs``/``score_inputs``), found by ``getattr`` as ``score_many`` is: no
    engine or distributed module compares with a graph scorer's label or spec name either."""
    labels = {"graph", "pagerank", "propagate", "propagation"}
    found = []
    for path in _modules_under("engine", "distributed"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in labels:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    assert found == []


def test_fusion_imports_no_scorer() -> None:
    assert _violations_in(_modules_under("fusion"), [SCORERS]) == []


ENGINE = "weftsearch.engine"
STORAGE = "weftsearch.storage"
#: The value types below storage: what a document and a time are.
VALUE_TYPES = ("documents", "times", "schema")


def test_storage_imports_neither_scorers_nor_fusion() -> None:
    assert _violations_in(_modules_under("storage"), [SCORERS, FUSION]) == []


def test_storage_imports_no_engine_module() -> None:
    """Storage sits below the engine, with no exception: the documents it writes and reads are
    the value types of ``weftsearch.documents`` (issue 27: ``storage/segment.py`` imported
    ``engine/documents.py``, an ``engine <-> storage`` package cycle)."""
    assert {_module_name(p)[0] for p in _modules_under("storage")} >= {f"{STORAGE}.segment"}
    assert _violations_in(_modules_under("storage"), [ENGINE]) == []


def test_storage_checker_sees_an_import_of_the_engine() -> None:
    for source in ("from weftsearch.engine.query import Query", "from ..engine import snapshot"):
        assert import_violations(source, f"{STORAGE}.segment", [ENGINE]), source


@pytest.mark.parametrize("name", VALUE_TYPES)
def test_the_value_types_import_neither_storage_nor_the_engine(name: str) -> None:
    """``documents`` and ``times`` sit below storage: they import the errors and number helpers only."""
    path = PACKAGE_DIR / f"{name}.py"
    assert path.is_file()
    source = path.read_text(encoding="utf-8")
    reached = [ref.target for ref in imports_of(source, f"{PACKAGE}.{name}")]
    ours = [t for t in reached if t.split(".")[0] == PACKAGE]
    allowed = ("weftsearch.errors", "weftsearch._numbers", "weftsearch.times")
    assert ours and all(any(_within(t, a) for a in allowed) for t in ours), ours


def test_the_harness_imports_no_scorer() -> None:
    """``weftsearch.eval`` never learns what a scorer is; only the spec parser names them.

    The spec parser is :mod:`weftsearch.ranking.specs` and the command line
    :mod:`weftsearch.cli.eval`; every eval module (runs, harness, metrics,
    stats, reports, datasets) must work on arms it is handed.
    """
    harness = _modules_under("eval")
    assert {p.stem for p in harness} >= {"runs", "harness", "metrics", "stats", "datasets"}
    assert _violations_in(harness, [SCORERS]) == []


def imports_reaching(source: str, module: str, target: str, *, is_package: bool = False) -> list[str]:
    """Imports in ``source`` that reach ``target`` or anything inside it.

    Unlike :func:`import_violations`, importing the package facade is not
    counted: whether the facade reaches ``target`` is decided by checking the
    facade's own source, which :func:`_library_modules` includes.
    """
    return [
        f"{module}:{ref.line} imports {ref.target!r}"
        for ref in imports_of(source, module, is_package)
        if _within(ref.target, target)
    ]


def _library_modules() -> list[Path]:
    """Every module of the package except the integrations (the facade included)."""
    return [p for p in sorted(PACKAGE_DIR.rglob("*.py")) if not _within(_module_name(p)[0], INTEGRATIONS)]


INTEGRATION_IMPORTS = [
    ("from weftsearch.integrations.langchain import WeftRetriever", "weftsearch.engine.index", False),
    ("import weftsearch.integrations", "weftsearch.cli", False),
    ("from weftsearch import integrations", "weftsearch.eval.harness", False),
    ("from . import integrations", "weftsearch", True),
    ("from .integrations import langchain", "weftsearch", True),
    ("from ..integrations.langchain import WeftRetriever", "weftsearch.scorers.bm25", False),
    ("def f() -> None:\n    import weftsearch.integrations.langchain\n", "weftsearch.demo", False),
    (
        "import importlib\nimportlib.import_module('weftsearch.integrations.langchain')\n",
        "weftsearch.cli",
        False,
    ),
]


@pytest.mark.parametrize(("source", "module", "is_package"), INTEGRATION_IMPORTS)
def test_integration_checker_catches_an_import_of_an_integration(
    source: str, module: str, is_package: bool
) -> None:
    assert imports_reaching(source, module, INTEGRATIONS, is_package=is_package), source


@pytest.mark.parametrize(
    "source",
    [
        "from weftsearch import __version__",  # the facade: checked through its own source
        "import weftsearch.integrations_extra",  # a name that only starts like an integration
        "x = 'import weftsearch.integrations'",
    ],
)
def test_integration_checker_accepts_other_imports(source: str) -> None:
    assert imports_reaching(source, "weftsearch.cli", INTEGRATIONS) == []


def test_nothing_in_the_library_imports_an_integration() -> None:
    """Integrations sit above the library: they may import engine, scorers and fusion,
    and no library module (the facade included) imports them."""
    library = {_module_name(p)[0] for p in _library_modules()}
    assert {FACADE, "weftsearch.cli", "weftsearch.engine.index", "weftsearch.eval.harness"} <= library
    assert not any(_within(name, INTEGRATIONS) for name in library)
    integrations = {_module_name(p)[0] for p in _modules_under("integrations")}
    assert f"{INTEGRATIONS}.langchain" in integrations  # the rule is about a real module
    problems: list[str] = []
    for path in _library_modules():
        module, is_package = _module_name(path)
        source = path.read_text(encoding="utf-8")
        problems.extend(imports_reaching(source, module, INTEGRATIONS, is_package=is_package))
    assert problems == []


SERVER = "weftsearch.server"
#: The command-line entry points: they may reach the server (``serve``, ``eval --save-profile``).
SERVER_ENTRY_POINTS = frozenset({"weftsearch.cli", "weftsearch.cli.serve", "weftsearch.cli.eval"})
#: The server launcher: the benchmarks (the load ladder's serve:N target) may import it, and nothing
#: else of the server; it imports nothing of the server or the library but the errors.
LAUNCHER = f"{SERVER}.launch"
#: Command-line modules that may import the launcher and nothing else of the server (like the
#: benchmarks): ``trial run --serve DIR`` starts ``weft-search serve`` as a child process for its run.
#: The launcher imports only the errors, so this brings no app, index or web framework into the CLI.
LAUNCHER_USERS = frozenset({"weftsearch.cli.trial"})
#: The web framework and friends, needed only by the ``server`` extra.
WEB_STACK = ("fastapi", "starlette", "uvicorn", "prometheus_client", "pydantic")


def test_nothing_in_the_library_imports_the_server() -> None:
    """The server sits above the library: it may import anything, and no library module
    (the facade included) imports it, except the command line's entry points."""
    library = [p for p in _library_modules() if not _within(_module_name(p)[0], SERVER)]
    names = {_module_name(p)[0] for p in library}
    assert {FACADE, "weftsearch.engine.index", "weftsearch.eval.harness", *SERVER_ENTRY_POINTS} <= names
    server = {_module_name(p)[0] for p in _modules_under("server")}
    assert {f"{SERVER}.app", f"{SERVER}.run"} <= server  # the rule is about real modules
    assert names >= LAUNCHER_USERS
    problems: list[str] = []
    for path in library:
        module, is_package = _module_name(path)
        if module in SERVER_ENTRY_POINTS:
            continue
        source = path.read_text(encoding="utf-8")
        if _within(module, BENCH) or module in LAUNCHER_USERS:  # the launcher only
            problems.extend(
                f"{module}:{ref.line} imports {ref.target!r}"
                for ref in imports_of(source, module, is_package)
                if _within(ref.target, SERVER) and not _within(ref.target, LAUNCHER)
            )
            continue
        problems.extend(imports_reaching(source, module, SERVER, is_package=is_package))
    assert problems == []


def test_the_launcher_is_a_leaf_of_the_server() -> None:
    """``weftsearch.server.launch`` starts ``weft-search serve`` as a child process: it imports the
    errors and nothing else of weftsearch (no app, no index), so the benchmarks may use it."""
    path = PACKAGE_DIR / "server" / "launch.py"
    assert path.is_file()
    reached = [ref.target for ref in imports_of(path.read_text(encoding="utf-8"), LAUNCHER)]
    ours = [t for t in reached if t.split(".")[0] == PACKAGE]
    assert ours and all(_within(t, "weftsearch.errors") for t in ours), ours
    assert not [t for t in reached if t.split(".")[0] in WEB_STACK]


#: Helpers every layer may import: they import nothing of weftsearch themselves.
LEAVES = ("_argtypes", "_plotting", "_atomic")


@pytest.mark.parametrize("name", LEAVES)
def test_the_shared_helpers_import_nothing_of_the_package(name: str) -> None:
    """The argparse types and the legend placement serve the command line, the benchmarks, the eval
    reports and the server alike, so they sit below all of them."""
    path = PACKAGE_DIR / f"{name}.py"
    assert path.is_file()
    reached = imports_of(path.read_text(encoding="utf-8"), f"{PACKAGE}.{name}")
    assert [ref for ref in reached if ref.target.split(".")[0] == PACKAGE] == []


#: The server's modules that make up the web application (``create_app``, its models, state,
#: middleware, error handlers, metrics and routes): they alone import the web framework.
WEB_MODULES = frozenset(
    f"{SERVER}.{name}" for name in ("app", "models", "errors", "state", "metrics", "middleware", "handlers")
)
WEB_ROUTES = f"{SERVER}.routes"


def test_the_web_stack_stays_inside_the_server_app() -> None:
    """Only the web application's modules (and ``serve``, when it runs) import the web framework,
    so the library, profiles and ``eval --save-profile`` work without the ``server`` extra."""
    modules = {_module_name(p)[0] for p in _library_modules()}
    assert WEB_MODULES | {WEB_ROUTES, f"{WEB_ROUTES}.search"} <= modules  # the rule is about real modules
    problems: list[str] = []
    for path in _library_modules():
        module, is_package = _module_name(path)
        if module in WEB_MODULES or _within(module, WEB_ROUTES):
            continue
        source = path.read_text(encoding="utf-8")
        for ref in imports_of(source, module, is_package):
            top = ref.target.split(".")[0]
            if top in WEB_STACK and not (module == f"{SERVER}.run" and top == "uvicorn"):
                problems.append(f"{module}:{ref.line} imports {ref.target!r}")
    assert problems == []  # (it collected them and asserted nothing: a rule that could not fail)


DISTRIBUTED = "weftsearch.distributed"
#: What may reach the scale-out package: the command line (``eval --ray``, ``search`` of a sharded
#: index) and the server's runner (``serve --sharded``, ``serve --ray``).
DISTRIBUTED_ENTRY_POINTS = frozenset(
    {
        "weftsearch.cli._common",
        "weftsearch.cli.index",
        "weftsearch.cli.search",
        "weftsearch.cli.eval",
        "weftsearch.server.run",  # serve --sharded, serve --ray
    }
)


def test_the_distributed_package_sits_above_the_library_and_adds_no_semantics() -> None:
    """``weftsearch.distributed`` is like the server: it may import the engine, and nothing in
    the library but the command line imports it. It imports no scorer and no fuser and names
    no scorer class (it calls them through their protocols, as the engine does), and it alone
    imports Ray."""
    distributed = {_module_name(p)[0] for p in _modules_under("distributed")}
    assert {f"{DISTRIBUTED}.sharded", f"{DISTRIBUTED}.shard", f"{DISTRIBUTED}.ray_shard"} <= distributed
    problems: list[str] = []
    scorer_classes = set(weftsearch.scorers.__all__)
    for path in _library_modules():
        module, is_package = _module_name(path)
        source = path.read_text(encoding="utf-8")
        if _within(module, DISTRIBUTED):
            problems.extend(import_violations(source, module, [SCORERS, FUSION], is_package=is_package))
            named = _identifiers(source) & scorer_classes
            if named:
                problems.append(f"{module} names scorer classes {sorted(named)}")
            continue
        if module not in DISTRIBUTED_ENTRY_POINTS:
            problems.extend(imports_reaching(source, module, DISTRIBUTED, is_package=is_package))
        problems.extend(
            f"{module}:{ref.line} imports {ref.target!r}"
            for ref in imports_of(source, module, is_package)
            if ref.target.split(".")[0] == "ray"
        )
    assert problems == []


BENCH = "weftsearch.bench"


def test_only_the_command_line_imports_the_benchmarks() -> None:
    """``weftsearch.bench`` (the load ladder, recall) sits on top: it may import the engine,
    scorers, fusion and the harness, and nothing in the library but ``cli`` imports it."""
    bench = {_module_name(p)[0] for p in _modules_under("bench")}
    assert {f"{BENCH}.loadgen", f"{BENCH}.recall"} <= bench  # the rule is about real modules
    problems: list[str] = []
    for path in _library_modules():
        module, is_package = _module_name(path)
        if _within(module, BENCH) or module == CLI:
            continue
        source = path.read_text(encoding="utf-8")
        problems.extend(imports_reaching(source, module, BENCH, is_package=is_package))
    assert problems == []


CLI = "weftsearch.cli"
RANKING = "weftsearch.ranking"


def _package_graph() -> dict[str, set[str]]:
    """``weftsearch``'s top-level units (packages and root modules) and which others each imports."""
    children = _package_children()
    graph: dict[str, set[str]] = {}
    for path in _library_modules():
        module, is_package = _module_name(path)
        head = module.split(".")[1] if "." in module else ""
        if not head:
            continue  # the facade gathers everything; that is its job
        for ref in imports_of(path.read_text(encoding="utf-8"), module, is_package):
            parts = ref.target.split(".")
            if parts[0] == PACKAGE and len(parts) > 1 and parts[1] in children and parts[1] != head:
                graph.setdefault(head, set()).add(parts[1])
    return graph


def _cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """Pairs of nodes of ``graph`` that reach each other (directly or round a loop)."""

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            for nxt in graph.get(node, ()):
                if nxt == goal:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return False

    return {frozenset({a, b}) for a in graph for b in graph[a] if reaches(b, a)}


def test_no_package_cycle() -> None:
    """No two packages import each other, directly or round a loop, with no exception
    (``distributed``, ``eval``, ``server`` and ``embed`` once did, and ``engine`` and ``storage``:
    the command line, the ranking language and the value types now sit apart)."""
    assert _cycles(_package_graph()) == set()


def _module_edges(source: str, module: str, is_package: bool, modules: set[str]) -> set[str]:
    """The library modules ``source`` imports, as the project's import walk counts them.

    ``from a.b import c`` reaches ``a.b`` (its ``__init__`` runs) and ``a.b.c`` when that is a
    module; every import, however lazy (inside a function) counts.
    """
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            relative = node.level > 0
            base = _resolve_relative(module, is_package, node.level, node.module) if relative else node.module
            if base is None:
                continue
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        for target in targets:
            parts = target.split(".")
            while parts and ".".join(parts) not in modules:
                parts.pop()
            if parts and ".".join(parts) != module:
                found.add(".".join(parts))
    return found


def test_no_module_cycle() -> None:
    """No two modules import each other, however lazily (``engine.index`` and ``engine.ingest`` once
    did, and ``eval`` with its own submodules through ``from weftsearch.eval import pins``)."""
    named = {path: _module_name(path) for path in _library_modules()}
    modules = {module for module, _ in named.values()}
    graph = {
        module: _module_edges(path.read_text(encoding="utf-8"), module, is_package, modules)
        for path, (module, is_package) in named.items()
    }
    assert {c for c in _cycles(graph) if PACKAGE not in c} == set()


def test_the_command_line_is_on_top_and_the_ranking_language_below_its_users() -> None:
    """``weftsearch.cli`` holds every subcommand's parsing and nothing in the library imports it;
    ``weftsearch.ranking`` (specs, arms, profiles) imports none of eval, server, distributed, embed,
    bench or cli, which all build their rankings with it."""
    assert {f"{CLI}.search", f"{CLI}.eval", f"{CLI}.serve", f"{CLI}.embed"} <= {
        _module_name(p)[0] for p in _modules_under("cli")
    }
    assert {f"{RANKING}.specs", f"{RANKING}.arm", f"{RANKING}.profiles"} <= {
        _module_name(p)[0] for p in _modules_under("ranking")
    }
    problems: list[str] = []
    for path in _library_modules():
        module, is_package = _module_name(path)
        source = path.read_text(encoding="utf-8")
        if not _within(module, CLI):
            problems.extend(imports_reaching(source, module, CLI, is_package=is_package))
        if _within(module, RANKING):
            for above in ("eval", "server", "distributed", "embed", "bench", "cli"):
                problems.extend(imports_reaching(source, module, f"{PACKAGE}.{above}", is_package=is_package))
    assert problems == []


def test_no_library_module_defines_an_argument_parser() -> None:
    """Only ``weftsearch.cli`` builds parsers: ``add_parser`` appears nowhere else in the library,
    except the two benchmark modules whose parsers cli adds (bench/ is being split)."""
    problems = []
    for path in _library_modules():
        module, _ = _module_name(path)
        if _within(module, CLI) or module in (f"{BENCH}.loadgen", f"{BENCH}.recall"):
            continue
        if ".add_parser(" in path.read_text(encoding="utf-8"):
            problems.append(module)
    assert problems == []


def test_no_scorer_imports_another_scorer() -> None:
    problems: list[str] = []
    for path in _modules_under("scorers"):
        module, is_package = _module_name(path)
        if module == SCORERS:
            continue  # the package __init__ gathers the scorers; that is its job
        # A scorer is one module (scorers/bm25.py) or one subpackage (scorers/foo/...).
        unit = ".".join(module.split(".")[:3])
        source = path.read_text(encoding="utf-8")
        problems.extend(import_violations(source, module, [SCORERS], is_package=is_package, allowed=[unit]))
    assert problems == []


def _identifiers(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[-1])
    return names


def test_engine_and_fusion_code_never_names_a_scorer_class() -> None:
    """No ``isinstance(s, BM25Scorer)`` or ``type(s).__name__ == ...`` style branching."""
    scorer_classes = set(weftsearch.scorers.__all__)
    assert scorer_classes >= {"BM25Scorer", "VectorScorer", "GraphScorer", "RecencyScorer"}
    for path in _modules_under("engine", "fusion"):
        named = _identifiers(path.read_text(encoding="utf-8")) & scorer_classes
        assert not named, f"{path.relative_to(ROOT)} names scorer classes {sorted(named)} in code"


# ---------------------------------------------------------------------------- the engine treats scorers alike


DIM = 4
DAY = 86_400.0


def _corpus() -> list[Document]:
    rows = [
        ("bm25", "bm25 ranks sparse text retrieval by term weight", [1, 0, 0, 0], ["rrf"], 10),
        ("dense", "dense vector retrieval with embeddings", [0, 1, 0, 0], ["bm25"], 40),
        ("graph", "graph retrieval follows links between documents", [0, 0, 1, 0], ["dense", "rrf"], 20),
        ("rrf", "reciprocal rank fusion merges retrieval runs", [0.5, 0.5, 0, 0], ["graph"], 30),
        ("recency", "recent documents first, decay by age", [0, 0, 0, 1], [], 50),
        ("hybrid", "hybrid retrieval: text, vector and graph signals", [0.6, 0.6, 0.3, 0], ["rrf"], 45),
        ("lucene", "lucene sparse text index and bm25 scoring", [0.9, 0.1, 0, 0], ["bm25"], 5),
        ("notext", "", [0.2, 0.2, 0.2, 0.2], ["hybrid"], None),
        ("novec", "sparse retrieval without an embedding", None, ["lucene", "missing"], 25),
        ("twin-a", "sparse retrieval without an embedding", None, ["lucene"], 25),
    ]
    return [
        Document(
            key,
            text,
            vector=None if vector is None else np.asarray(vector, dtype=np.float32),
            links=tuple(links),
            time=None if day is None else day * DAY,
            fields={"title": key.upper()},
        )
        for key, text, vector, links, day in rows
    ]


def _index(documents: Sequence[Document]) -> Index:
    index = Index()
    index.add_many(documents)
    return index


QUERY = Query(text="sparse text retrieval", vector=np.asarray([0.8, 0.3, 0.1, 0.0], dtype=np.float32))
DEPTH = 8
K = 6


def _builtin_scorers() -> list[Scorer]:
    return [
        BM25Scorer(),
        VectorScorer(),
        GraphScorer(BM25Scorer(), max_depth=2, seed_n=2),
        PageRankScorer(BM25Scorer(), seed_n=2),
        RecencyScorer(half_life=10 * DAY),
    ]


def _fusers(n_streams: int) -> list[Fuser]:
    weights = [float(w) for w in range(1, n_streams + 1)]
    return [
        RRF(),
        RRF(k=0),
        WeightedRRF(weights),
        ScoreFusion(),
        ScoreFusion(weights, norm="zscore"),
    ]


class Replay:
    """Not a scorer of any known kind: a name and a precomputed stream, nothing else."""

    __slots__ = ("_name", "_stream")

    def __init__(self, name: str, stream: Stream) -> None:
        self._name = name
        self._stream = stream

    @property
    def name(self) -> str:
        return self._name

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        return self._stream


class Delegate:
    """A user-defined scorer class that computes its stream by calling another scorer live."""

    def __init__(self, inner: Scorer) -> None:
        self._inner = inner

    @property
    def name(self) -> str:
        return self._inner.name

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        stream = self._inner.score(snapshot, query, k)
        # A fresh Stream built from plain copies: nothing of the inner scorer travels with it.
        return Stream(np.array(stream.ids), np.array(stream.scores))


Fingerprint = tuple[object, ...]


def fingerprint(results: SearchResults) -> Fingerprint:
    """What a caller sees in ``results``, floats as exact bits (``float.hex``).

    The generation is left out: it counts writes, so it differs between two
    indexes filled in different batches.
    """
    hits = tuple(
        (
            hit.key,
            hit.rank,
            hit.score.hex(),
            tuple(
                (
                    signal.signal,
                    signal.rank,
                    None if signal.score is None else signal.score.hex(),
                    signal.contribution.hex(),
                )
                for signal in hit.signals
            ),
            tuple(sorted(hit.fields.items())),
        )
        for hit in results
    )
    return (results.signals, results.fuser, results.depth, hits)


def _replays(index: Index, scorers: Sequence[Scorer]) -> list[Scorer]:
    snapshot = index.snapshot()
    return [Replay(s.name, s.score(snapshot, QUERY, DEPTH)) for s in scorers]


def test_every_builtin_scorer_gives_a_nonempty_stream_on_the_fixture() -> None:
    """Guard against a vacuous comparison below."""
    index = _index(_corpus())
    for scorer in _builtin_scorers():
        assert len(scorer.score(index.snapshot(), QUERY, DEPTH)) >= 2, scorer.name


@pytest.mark.parametrize("fuser_index", range(5))
def test_replaying_each_scorers_stream_gives_identical_hits(fuser_index: int) -> None:
    index = _index(_corpus())
    scorers = _builtin_scorers()
    fuser = _fusers(len(scorers))[fuser_index]
    real = index.search(QUERY, K, fuser, *scorers, depth=DEPTH)
    replayed = index.search(QUERY, K, fuser, *_replays(index, scorers), depth=DEPTH)
    assert len(real) == K
    assert fingerprint(replayed) == fingerprint(real)
    # Every signal took part somewhere in the fused list, so the comparison is not vacuous.
    for column in range(len(scorers)):
        assert any(hit.signals[column].rank is not None for hit in real)


@pytest.mark.parametrize("fuser_index", range(5))
def test_builtins_and_user_defined_classes_give_the_same_results_in_any_mix(fuser_index: int) -> None:
    index = _index(_corpus())
    scorers = _builtin_scorers()
    fuser = _fusers(len(scorers))[fuser_index]
    expected = fingerprint(index.search(QUERY, K, fuser, *scorers, depth=DEPTH))
    replays = _replays(index, scorers)
    for mask in itertools.product(range(3), repeat=len(scorers)):
        mixed: list[Scorer] = [
            (scorer, Delegate(scorer), replay)[choice]
            for scorer, replay, choice in zip(scorers, replays, mask, strict=True)
        ]
        assert fingerprint(index.search(QUERY, K, fuser, *mixed, depth=DEPTH)) == expected, mask


class SpyFuser:
    """Wraps a fuser and records exactly what the engine hands it."""

    def __init__(self, inner: Fuser) -> None:
        self.inner = inner
        self.calls: list[tuple[list[Stream], int, KeyOrder]] = []

    @property
    def name(self) -> str:
        return self.inner.name

    def fuse(self, streams: Sequence[Stream], k: int, keys: KeyOrder) -> FusedStream:
        self.calls.append((list(streams), k, keys))
        return self.inner.fuse(streams, k, keys)


def test_the_fuser_sees_only_plain_streams_whatever_the_scorer() -> None:
    index = _index(_corpus())
    scorers = _builtin_scorers()
    real_spy, replay_spy = SpyFuser(RRF()), SpyFuser(RRF())
    index.search(QUERY, K, real_spy, *scorers, depth=DEPTH)
    index.search(QUERY, K, replay_spy, *_replays(index, scorers), depth=DEPTH)
    (real_streams, real_k, real_keys), (replay_streams, replay_k, replay_keys) = (
        real_spy.calls[0],
        replay_spy.calls[0],
    )
    assert real_k == replay_k == K
    assert real_keys is replay_keys is index.snapshot()
    for real, replayed in zip(real_streams, replay_streams, strict=True):
        assert type(real) is Stream and type(replayed) is Stream
        assert real.ids.tobytes() == replayed.ids.tobytes()
        assert real.scores.tobytes() == replayed.scores.tobytes()


# ---------------------------------------------------------------------------- RRF never reads scores


class IdOrder:
    """The trivial KeyOrder: keys compare like the ids themselves."""

    def key_rank(self, ids: NDArray[np.int64]) -> NDArray[np.int64]:
        return np.asarray(ids, dtype=np.int64)


class PermutedOrder:
    """A KeyOrder in which document ``i`` has the ``rank[i]``-th smallest key."""

    def __init__(self, rank: Sequence[int]) -> None:
        self.rank = np.asarray(rank, dtype=np.int64)

    def key_rank(self, ids: NDArray[np.int64]) -> NDArray[np.int64]:
        return self.rank[np.asarray(ids, dtype=np.int64)]


def _same(a: FusedStream, b: FusedStream) -> bool:
    """Bit-identical fused streams (ids, scores, contributions)."""
    return (
        a.ids.tobytes() == b.ids.tobytes()
        and a.scores.tobytes() == b.scores.tobytes()
        and a.contributions.shape == b.contributions.shape
        and a.contributions.tobytes() == b.contributions.tobytes()
    )


RANK_FUSERS: list[Callable[[int], Fuser]] = [
    lambda n: RRF(),
    lambda n: RRF(k=1),
    lambda n: WeightedRRF([1.0, 2.0, 0.5][:n]),
]


@pytest.mark.parametrize("make", RANK_FUSERS)
def test_rrf_keeps_rank_order_against_tiny_and_huge_scores(make: Callable[[int], Fuser]) -> None:
    # Rank 1 carries a tiny score, rank 2 a huge one.
    alone = make(1).fuse([Stream([1, 2], [1e-300, 1e300])], 2, IdOrder())
    assert alone.ids.tolist() == [1, 2]
    assert alone.scores[0] > alone.scores[1]
    # Three streams whose scales differ by hundreds of orders of magnitude, with
    # signs and infinities mixed in: only the positions matter.
    streams = [
        Stream([4, 2, 7], [1e-300, 1e300, 5.0]),
        Stream([4, 9], [-1e308, 1e-12]),
        Stream([9, 2], [math.inf, -math.inf]),
    ]
    fuser = make(3)
    fused = fuser.fuse(streams, 10, IdOrder())
    by_rank = fuser.fuse([Stream(s.ids, np.zeros(len(s))) for s in streams], 10, IdOrder())
    assert _same(fused, by_rank)
    assert fused.ids[0] == 4  # rank 1 in two streams beats everything else


def _streams(n_docs: int, max_streams: int = 4) -> st.SearchStrategy[list[Stream]]:
    """Random valid streams over ``n_docs`` ids: unique ids, scores non-increasing (with ties)."""
    score = st.one_of(
        st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
        st.sampled_from([0.0, 1.0, 2.0, -3.0]),
    )

    def build(ids: list[int], scores: list[float]) -> Stream:
        return Stream(ids, sorted(scores[: len(ids)], reverse=True))

    one = st.builds(
        build,
        st.lists(st.integers(0, n_docs - 1), unique=True, max_size=n_docs),
        st.lists(score, min_size=n_docs, max_size=n_docs),
    )
    return st.lists(one, min_size=1, max_size=max_streams)


@st.composite
def _problem(draw: st.DrawFn, max_streams: int = 4) -> tuple[list[Stream], PermutedOrder]:
    n_docs = draw(st.integers(1, 25))
    streams = draw(_streams(n_docs, max_streams))
    rank = draw(st.permutations(list(range(n_docs))))
    return streams, PermutedOrder(rank)


@settings(max_examples=200, deadline=None)
@given(
    problem=_problem(),
    replacement=st.lists(st.floats(allow_nan=False, allow_infinity=True, width=64), min_size=25, max_size=25),
    c=st.sampled_from([0.0, 1.0, 60.0]),
    k=st.integers(1, 30),
)
def test_rrf_output_is_unchanged_by_any_non_increasing_scores(
    problem: tuple[list[Stream], PermutedOrder], replacement: list[float], c: float, k: int
) -> None:
    streams, keys = problem
    values = sorted(replacement, reverse=True)
    rescored = [Stream(s.ids, values[: len(s)]) for s in streams]
    for fuser in (RRF(k=c), WeightedRRF([0.5 + i for i in range(len(streams))], k=c)):
        assert _same(fuser.fuse(rescored, k, keys), fuser.fuse(streams, k, keys))


# ---------------------------------------------------------------------------- over-fetching


def _fuser_strategy(n_streams: int) -> st.SearchStrategy[Fuser]:
    weights = st.lists(
        st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.25]), min_size=n_streams, max_size=n_streams
    ).filter(any)
    norms: st.SearchStrategy[Normalisation] = st.sampled_from(["minmax", "zscore"])
    return st.one_of(
        st.sampled_from([0.0, 1.0, 60.0]).map(lambda c: RRF(k=c)),
        weights.map(lambda w: WeightedRRF(w)),
        st.builds(lambda w, norm: ScoreFusion(w, norm=norm), weights, norms),
        norms.map(lambda norm: ScoreFusion(norm=norm)),
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), k=st.integers(1, 12), m=st.integers(1, 5))
def test_over_fetching_never_changes_the_top_k(data: st.DataObject, k: int, m: int) -> None:
    streams, keys = data.draw(_problem())
    fuser = data.draw(_fuser_strategy(len(streams)))
    deep = fuser.fuse(streams, k * m, keys)
    shallow = fuser.fuse(streams, k, keys)
    assert len(shallow) == min(k, len(deep))
    assert _same(deep.head(k), shallow), fuser


def test_over_fetching_with_a_real_snapshot_as_the_key_order() -> None:
    index = _index(_corpus())
    snapshot = index.snapshot()
    streams = [
        canonical
        for scorer in _builtin_scorers()
        if len(canonical := scorer.score(snapshot, QUERY, snapshot.n_docs)) > 0
    ]
    for fuser in _fusers(len(streams)):
        full = fuser.fuse(streams, snapshot.n_docs, snapshot)
        for k in range(1, snapshot.n_docs + 1):
            assert _same(full.head(k), fuser.fuse(streams, k, snapshot)), (fuser, k)


# ---------------------------------------------------------------------------- ties break on the key


def _tie_corpus() -> list[Document]:
    # "x" is first by text and second by recency, "y" the reverse: under RRF they
    # tie exactly (1/61 + 1/62 either way). "p", "q", "r" have the same text and
    # the same time, so their scores tie in every stream, and under ScoreFusion
    # their fused scores tie exactly too. Documents are listed against key order.
    return [
        Document("y", "retrieval retrieval", time=6 * DAY),
        Document("x", "retrieval retrieval retrieval", time=5 * DAY),
        Document("r", "retrieval of many other words", time=2 * DAY),
        Document("q", "retrieval of many other words", time=2 * DAY),
        Document("p", "retrieval of many other words", time=2 * DAY),
        Document("z", "unrelated words only", time=None),
    ]


TIE_SCORERS: list[Scorer] = [BM25Scorer(), RecencyScorer(half_life=DAY)]


def _ranks(results: SearchResults, key: str) -> list[int | None]:
    return [signal.rank for signal in next(hit for hit in results if hit.key == key).signals]


def test_exact_rrf_ties_are_ordered_by_key() -> None:
    results = _index(_tie_corpus()).search("retrieval", 10, RRF(), *TIE_SCORERS)
    assert _ranks(results, "x") == [1, 2] and _ranks(results, "y") == [2, 1]  # the fixture's premise
    scores = {hit.key: hit.score for hit in results}
    assert scores["x"] == scores["y"]  # an exact tie, not a near one
    assert results.keys[:2] == ["x", "y"]


@pytest.mark.parametrize("norm", ["minmax", "zscore"])
def test_exact_score_fusion_ties_are_ordered_by_key(norm: Normalisation) -> None:
    results = _index(_tie_corpus()).search("retrieval", 10, ScoreFusion(norm=norm), *TIE_SCORERS)
    scores = {hit.key: hit.score for hit in results}
    assert scores["p"] == scores["q"] == scores["r"]
    keys = results.keys
    start = keys.index("p")
    assert keys[start : start + 3] == ["p", "q", "r"]


def _has_exact_tie(results: SearchResults) -> bool:
    return len({hit.score for hit in results}) < len(results)


@pytest.mark.parametrize(
    "fuser", [RRF(), WeightedRRF([1.0, 1.0]), ScoreFusion(), ScoreFusion(norm="zscore")], ids=repr
)
def test_insertion_order_never_changes_a_ranking_with_ties(fuser: Fuser) -> None:
    documents = _tie_corpus()
    forward = _index(documents).search("retrieval", 10, fuser, *TIE_SCORERS)
    backward = _index(documents[::-1]).search("retrieval", 10, fuser, *TIE_SCORERS)
    one_by_one = Index()
    for document in sorted(documents, key=lambda d: (d.text, d.key), reverse=True):
        one_by_one.add(document)
    third = one_by_one.search("retrieval", 10, fuser, *TIE_SCORERS)
    assert _has_exact_tie(forward)  # the fixture does tie under this fuser
    expected = fingerprint(forward)
    assert fingerprint(backward) == expected
    assert fingerprint(third) == expected


@settings(max_examples=25, deadline=None)
@given(order=st.permutations(list(range(len(_corpus())))))
def test_any_insertion_order_gives_the_same_hybrid_results(order: list[int]) -> None:
    documents = _corpus()
    expected = fingerprint(_index(documents).search(QUERY, K, RRF(), *_builtin_scorers(), depth=DEPTH))
    shuffled = _index([documents[i] for i in order])
    assert fingerprint(shuffled.search(QUERY, K, RRF(), *_builtin_scorers(), depth=DEPTH)) == expected


# ---------------------------------------------------------------------------- the public API golden file


def test_public_api_matches_the_golden_file() -> None:
    expected = make_public_api.GOLDEN.read_text(encoding="utf-8")
    actual = make_public_api.render()
    if actual != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                actual.splitlines(keepends=True),
                fromfile="tests/golden/public_api.txt (committed)",
                tofile="public API (rendered now)",
            )
        )
        pytest.fail(
            "The public API differs from tests/golden/public_api.txt. If the change is intended, "
            f"regenerate it with\n    {make_public_api.REGENERATE}\nand commit the diff:\n{diff}",
            pytrace=False,
        )


def test_the_golden_renderer_sees_contract_changes() -> None:
    """The rendering includes what the file promises: kinds, signatures, field order."""
    text = make_public_api.render()
    assert "dataclass (frozen) Document\n" in text
    fields = [line.strip() for line in text.splitlines() if line.startswith("  field ")]
    document_fields = fields[fields.index("field key: str") :][:6]
    assert [f.split(":")[0] for f in document_fields] == [
        "field key",
        "field text",
        "field vector",
        "field links",
        "field time",
        "field fields",
    ]
    assert "  signature: (k: float = 60.0) -> None\n" in text
    assert "  method search(self, query: Query | str, k: int, fuser: Fuser, *scorers: Scorer" in text
    assert "exception UnknownKeyError\n  bases: WeftError, KeyError\n" in text
    # Pydantic models (the LangChain retriever): frozen or not, and their own fields in order.
    retriever = text[text.index("pydantic model (frozen) WeftRetriever\n") :].split("\n\n", 1)[0]
    fields = [line.split(":")[0].strip() for line in retriever.splitlines() if line.startswith("  field ")]
    assert fields == [
        f"field {name}"
        for name in ("index", "scorers", "fuser", "k", "depth", "embed_query", "filter", "refresh", "syntax")
    ]
    assert "model_" not in retriever  # pydantic's own namespace is not weft-search's contract


# ---------------------------------------------------------------------------- compiled code in one home

NATIVE = "weftsearch.native"

#: The loader's helpers: a definition of one of these names anywhere else is a second loader.
NATIVE_HELPERS = frozenset(
    {"library_path", "_library_path", "Scratch", "_Scratch", "load_library", "load_extension", "disabled"}
)

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)

#: ``ctypes`` calls that load a shared library (``ctypes.CDLL(None)``, the process's own symbols,
#: loads no file and is not one).
_LOADERS = frozenset({"CDLL", "PyDLL", "LoadLibrary", "WinDLL", "OleDLL"})


def native_loading_problems(modules: Sequence[tuple[str, str]]) -> list[str]:
    """What in ``modules`` (``(dotted name, source)``) loads compiled code outside :data:`NATIVE`.

    Reported: a second definition of a :data:`NATIVE_HELPERS` name (anywhere, native included),
    and, outside native: a call that loads a shared library (:data:`_LOADERS`, not with ``None``),
    a read of ``EXTENSION_SUFFIXES`` (a library lookup), and a disable-switch name
    (``"WEFTSEARCH_NO_COMPILED_..."`` as a string of its own: docstrings naming one are fine).
    """
    problems: list[str] = []
    defined: dict[str, list[str]] = {}
    for module, source in modules:
        inside = _within(module, NATIVE)
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, _DEFINITIONS) and node.col_offset == 0 and node.name in NATIVE_HELPERS:
                defined.setdefault(node.name.lstrip("_"), []).append(f"{module}:{node.lineno}")
            elif not inside:
                problem = _outside_native(node)
                if problem:
                    problems.append(f"{module}:{getattr(node, 'lineno', 0)} {problem}")
    for name, places in sorted(defined.items()):
        if len(places) > 1:
            problems.append(f"{name} is defined {len(places)} times: {', '.join(places)}")
    return problems


def _outside_native(node: ast.AST) -> str:
    """What ``node`` does that only native may (see :func:`native_loading_problems`), or ``""``."""
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        first = node.args[0] if node.args else None
        own_symbols = isinstance(first, ast.Constant) and first.value is None
        return f"loads a shared library ({name})" if name in _LOADERS and not own_symbols else ""
    if isinstance(node, (ast.Attribute, ast.Name)):
        name = node.attr if isinstance(node, ast.Attribute) else node.id
        return "looks a compiled library up" if name == "EXTENSION_SUFFIXES" else ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        # A switch's name alone (a docstring or a message mentioning one has spaces).
        switch = node.value.startswith("WEFTSEARCH_NO_COMPILED") and " " not in node.value
        return f"names a disable switch ({node.value})" if switch else ""
    return ""


def _sources(paths: Sequence[Path]) -> list[tuple[str, str]]:
    return [(_module_name(path)[0], path.read_text(encoding="utf-8")) for path in paths]


def test_compiled_code_is_found_switched_and_loaded_in_native_alone() -> None:
    """One loader (weftsearch.native.loader): one library lookup, one scratch, one switch scheme."""
    assert native_loading_problems(_sources(_modules_under(""))) == []
    assert {"weftsearch.native.loader", "weftsearch.native.bm25"} <= {
        _module_name(path)[0] for path in _modules_under("native")
    }


@pytest.mark.parametrize(
    ("modules", "found"),
    [
        # The copies this rule was written against: a second lookup and a second scratch.
        (
            [
                ("weftsearch.native.loader", "def library_path(name): ...\nclass Scratch: ..."),
                ("weftsearch.engine.kernels", "def _library_path(): ...\nclass _Scratch: ..."),
            ],
            ["library_path is defined 2 times", "Scratch is defined 2 times"],
        ),
        ([("weftsearch.engine.kernels", "import ctypes\nctypes.CDLL(str(path))")], ["loads a shared"]),
        ([("weftsearch.analysis", "from ctypes import cdll\ncdll.LoadLibrary('x.so')")], ["loads a shared"]),
        (
            [("weftsearch.scorers.x", "import importlib.machinery as m\nm.EXTENSION_SUFFIXES")],
            ["looks a compiled library up"],
        ),
        ([("weftsearch.analysis", "VARIABLE = 'WEFTSEARCH_NO_COMPILED_ANALYSIS'")], ["disable switch"]),
    ],
)
def test_the_native_rule_catches_a_second_loader(modules: list[tuple[str, str]], found: list[str]) -> None:
    problems = native_loading_problems(modules)
    assert len(problems) == len(found)
    assert all(any(text in problem for problem in problems) for text in found), problems


def test_the_native_rule_accepts_the_processs_own_symbols_and_docstrings() -> None:
    source = '"""Set WEFTSEARCH_NO_COMPILED_BM25=1 for numpy."""\nimport ctypes\nctypes.CDLL(None).prctl\n'
    assert native_loading_problems([("weftsearch.engine.index", source)]) == []
    assert native_loading_problems([("weftsearch.native.bm25", "import ctypes\nctypes.CDLL('x')\n")]) == []


# ------------------------------------------------------- agreement-with-a-reference tests, kept apart

#: Outside implementations a test may compare against: such a test is an agreement test.
REFERENCE_MODULES = frozenset({"pytrec_eval", "rank_bm25", "networkx", "ranx", "rbo", "ir_measures"})


def _binds_reference(node: ast.AST) -> bool:
    """An import of a reference module, or ``pytest.importorskip("<reference>")``."""
    if isinstance(node, ast.Import):
        return any(alias.name.split(".")[0] in REFERENCE_MODULES for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        return node.module is not None and node.module.split(".")[0] in REFERENCE_MODULES
    called = node.func if isinstance(node, ast.Call) else None
    if isinstance(node, ast.Call) and isinstance(called, ast.Attribute) and called.attr == "importorskip":
        first = node.args[0] if node.args else None
        return isinstance(first, ast.Constant) and str(first.value).split(".")[0] in REFERENCE_MODULES
    return False


def _is_marked_reference(function: ast.FunctionDef) -> bool:
    return any(ast.unparse(decorator) == "pytest.mark.reference" for decorator in function.decorator_list)


def unmarked_reference_tests(source: str) -> list[str]:
    """Test functions of ``source`` that reach a reference implementation without the ``reference`` mark.

    A function reaches one when it imports it (or ``importorskip``s it), names
    what the module imported of it, or calls a module-level helper that does
    (followed transitively within the module).
    """
    tree = ast.parse(source)
    known = {
        (alias.asname or alias.name).split(".")[0]
        for node in tree.body
        if isinstance(node, (ast.Import, ast.ImportFrom)) and _binds_reference(node)
        for alias in node.names
    }
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}

    def reaches(function: ast.FunctionDef) -> bool:
        return any(
            _binds_reference(node) or (isinstance(node, ast.Name) and node.id in known)
            for node in ast.walk(function)
        )

    grew = True
    while grew:
        grew = False
        for name, function in functions.items():
            if not name.startswith("test_") and name not in known and reaches(function):
                known.add(name)
                grew = True
    return [
        name
        for name, function in functions.items()
        if name.startswith("test_") and reaches(function) and not _is_marked_reference(function)
    ]


def test_the_reference_checker_finds_direct_and_indirect_uses() -> None:
    source = (
        "import pytest\nimport rank_bm25\n"
        "def _oracle():\n    return pytest.importorskip('pytrec_eval')\n"
        "def _helper():\n    return _oracle()\n"
        "def test_direct():\n    rank_bm25.BM25Okapi([])\n"
        "def test_indirect():\n    _helper()\n"
        "@pytest.mark.reference\ndef test_marked():\n    _helper()\n"
        "def test_behaviour():\n    assert True\n"
    )
    assert unmarked_reference_tests(source) == ["test_direct", "test_indirect"]


def test_every_agreement_with_a_reference_is_marked_reference() -> None:
    """STYLE.md: agreement tests kept apart from behaviour tests (``pytest -m reference`` runs them alone)."""
    found = {
        str(path.relative_to(ROOT)): names
        for path in sorted((ROOT / "tests").rglob("test_*.py"))
        if (names := unmarked_reference_tests(path.read_text(encoding="utf-8")))
    }
    assert found == {}, f"mark these @pytest.mark.reference: {found}"


# ---------------------------------------------------------------------------- no function over 150 lines

#: The most lines a function may span (its ``def`` line to its last, docstring included), counted
#: as ``../shared/tools/import_map.py`` counts them.
MAX_FUNCTION_LINES = 150


def long_functions(source: str, module: str, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """Every function of ``source`` (methods, async and nested ones too) spanning over ``limit`` lines."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > limit:
                found.append(f"{module}:{node.lineno} {node.name} spans {length} lines")
    return found


def _function(name: str, lines: int, indent: str = "", kind: str = "def") -> str:
    """Source of a function spanning exactly ``lines`` lines (its ``def`` line included)."""
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(lines - 1))
    return f"{indent}{kind} {name}() -> None:\n{body}"


@pytest.mark.parametrize(
    "source",
    [
        _function("f", MAX_FUNCTION_LINES + 1),
        "class C:\n" + _function("method", MAX_FUNCTION_LINES + 1, indent="    "),
        _function("f", MAX_FUNCTION_LINES + 1, kind="async def"),
        "def outer() -> None:\n" + _function("inner", MAX_FUNCTION_LINES + 1, indent="    "),
    ],
    ids=["function", "method", "async", "nested"],
)
def test_the_length_checker_finds_a_function_over_the_limit(source: str) -> None:
    found = long_functions(source, "weftsearch.x")
    assert found and f"spans {MAX_FUNCTION_LINES + 1} lines" in found[-1], found


def test_the_length_checker_accepts_a_function_at_the_limit() -> None:
    assert long_functions(_function("f", MAX_FUNCTION_LINES), "weftsearch.x") == []


def test_no_function_in_the_package_spans_over_150_lines() -> None:
    """The project's limit, with no exception: a longer function is split into named steps."""
    paths = sorted(PACKAGE_DIR.rglob("*.py"))
    assert {"weftsearch.engine.index", "weftsearch.cli.eval"} <= {_module_name(p)[0] for p in paths}
    problems: list[str] = []
    for path in paths:
        problems.extend(long_functions(path.read_text(encoding="utf-8"), _module_name(path)[0]))
    assert problems == []
