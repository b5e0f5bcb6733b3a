"""Every third-party import is declared in ``pyproject.toml``, where its users will find it.

A developer's environment collects packages by hand; CI and users' machines hold only
what ``pyproject.toml`` declares. This test closes that gap for the whole class of
"works here, fails there" defects (the load ladder's ``hdrh`` sat in the ``bench`` extra
while the default tests imported it; the multi-process server imported ``httpx``, which
the ``server`` extra lacked):

* every module the library imports (``src/weftsearch``) comes from a distribution in
  the closure of the base dependencies and one of the extras;
* every module a **test** imports comes from the closure of the ``dev`` extra (what
  ``make test`` installs), unless the test file guards it (``pytest.importorskip``,
  ``find_spec``, or its own ``_needs`` helper) and so skips with a reason;
* a module under ``src/weftsearch/X/`` that imports an extra's package names that extra
  in the modules that use it (the ``MissingDependencyError`` message).

Requirements are followed transitively through the installed metadata (``fastapi``
brings ``starlette`` and ``pydantic``), with markers evaluated for this interpreter.
"""

from __future__ import annotations

import ast
import re
import sys
from functools import cache
from importlib import metadata
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "weft-search"
GUARDS = ("importorskip", "find_spec", "_needs")
# Modules of this repository that are imported by path or by name, not installed.
# The benchmark peers: only the bench extra installs them; the library imports them lazily
# (raising MissingDependencyError naming the extra) and their tests skip without them.
PEERS = {"tantivy", "lancedb", "pyarrow", "bm25s", "numba", "qdrant_client"}
# Where a peer is not installed (CI's default run) its metadata cannot name its
# distribution: these do. Every other module must be installed for the check.
PEER_DISTRIBUTIONS = {
    "tantivy": "tantivy", "lancedb": "lancedb", "pyarrow": "pyarrow", "bm25s": "bm25s",
    "numba": "numba", "qdrant_client": "qdrant-client", "ray": "ray",
}  # fmt: skip
# Ray (the ray extra, about 240 MB): only weftsearch.distributed.ray_shard imports it, and its
# tests skip without it; .ci/run installs the extra and runs them.
HEAVY = {"ray"}
LOCAL = {"weftsearch", "tests", "query_path", "synthetic_corpus", "bm25_vs_bm25s", "conftest"}


def _pyproject() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        return tomllib.load(handle)


def _closure(requirements: list[str]) -> set[str]:
    """Canonical names of the distributions ``requirements`` install, followed transitively."""
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    extras: dict[str, list[str]] = project["optional-dependencies"]
    seen: set[str] = set()
    pending = [Requirement(text) for text in requirements]
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        if name == PROJECT:  # the project's own extras, read from pyproject.toml
            for extra in requirement.extras:
                pending.extend(Requirement(text) for text in extras[extra])
            continue
        key = name + "[" + ",".join(sorted(requirement.extras)) + "]"
        if key in seen:
            continue
        seen.add(key)
        try:
            declared = metadata.requires(requirement.name) or []
        except metadata.PackageNotFoundError:
            continue  # not installed here: its own imports cannot be checked, its name still counts
        for text in declared:
            child = Requirement(text)
            wanted = [{"extra": extra} for extra in requirement.extras] or [{"extra": ""}]
            if child.marker is None or any(child.marker.evaluate(env) for env in wanted):
                pending.append(child)
    return {key.split("[")[0] for key in seen}


@cache
def _distributions_of() -> dict[str, list[str]]:
    installed: dict[str, list[str]] = {module: [canonicalize_name(d) for d in dists] for module, dists in
                 metadata.packages_distributions().items()}  # fmt: skip
    return {module: [dist] for module, dist in PEER_DISTRIBUTIONS.items()} | installed


def _declared(requirements: list[str]) -> set[str]:
    """Canonical names ``requirements`` name directly, the project's own extras expanded."""
    names: set[str] = set()
    pending = [Requirement(text) for text in requirements]
    while pending:
        requirement = pending.pop()
        if canonicalize_name(requirement.name) == PROJECT:
            pending.extend(Requirement(text) for extra in requirement.extras for text in _extras()[extra])
        else:
            names.add(canonicalize_name(requirement.name))
    return names


def _imports(path: Path) -> dict[str, int]:
    """Top-level third-party modules ``path`` imports, with a line where each is imported."""
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top not in sys.stdlib_module_names and top not in LOCAL:
                found.setdefault(top, node.lineno)
    return found


def _guarded(path: Path) -> set[str]:
    """Modules a test file checks for before using (and so skips without)."""
    guarded: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        first = node.args[0]
        if name in GUARDS and isinstance(first, ast.Constant) and isinstance(first.value, str):
            guarded.add(first.value.split(".")[0])
    return guarded


def _undeclared(files: list[Path], allowed: set[str], honour_guards: bool) -> list[str]:
    problems = []
    for path in files:
        guarded = _guarded(path) if honour_guards else set()
        for module, line in sorted(_imports(path).items()):
            if module in guarded:
                continue
            dists = _distributions_of().get(module)
            where = f"{path.relative_to(ROOT)}:{line}"
            if not dists:
                problems.append(f"{where}: {module} is not installed here, so its origin cannot be checked")
            elif not set(dists) & allowed:
                problems.append(f"{where}: {module} (from {', '.join(dists)}) is not declared")
    return problems


def _extras() -> dict[str, list[str]]:
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    extras: dict[str, list[str]] = project["optional-dependencies"]
    return extras


def _base() -> list[str]:
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    base: list[str] = project["dependencies"]
    return base


def test_the_library_imports_only_what_the_base_or_an_extra_declares() -> None:
    """An optional package absent here (a peer, Ray) is traced through :data:`PEER_DISTRIBUTIONS`."""
    allowed = _closure([*_base(), f"{PROJECT}[{','.join(_extras())}]"])
    files = sorted((ROOT / "src" / "weftsearch").rglob("*.py"))
    assert _undeclared(files, allowed, honour_guards=False) == []


def test_every_library_import_but_the_benchmark_peers_is_installed_by_make_test() -> None:
    """The default tests reach every library module, so ``dev`` must hold all they import.

    The peers (tantivy, LanceDB, ...) are the exception: they are big, only the
    benchmarks use them, and every test that needs one skips without it; so is Ray
    (``HEAVY``: only the ``ray`` extra's module imports it).
    """
    allowed = _closure([*_base(), f"{PROJECT}[dev]"])
    files = sorted((ROOT / "src" / "weftsearch").rglob("*.py"))
    problems = _undeclared(files, allowed, honour_guards=False)
    assert [line for line in problems if line.split(": ")[1].split(" ")[0] not in PEERS | HEAVY] == []


def test_the_tests_import_only_what_make_test_installs_or_skip_without_it() -> None:
    allowed = _closure([*_base(), f"{PROJECT}[dev]"])
    files = sorted((ROOT / "tests").rglob("*.py"))
    assert _undeclared(files, allowed, honour_guards=True) == []


@pytest.mark.parametrize(
    ("module", "extra"),
    [("hdrh", "bench"), ("httpx", "server"), ("fastapi", "server"), ("uvicorn", "server"),
     ("prometheus_client", "server"), ("langchain_core", "langchain"), ("onnxruntime", "embed"),
     ("tantivy", "bench"), ("lancedb", "bench"), ("ray", "ray")],
)  # fmt: skip
def test_each_optional_import_sits_in_the_extra_its_error_message_names(module: str, extra: str) -> None:
    dists = set(_distributions_of()[module])
    assert dists & _declared([f"{PROJECT}[{extra}]"]), f"{module} is not declared in the {extra} extra"
    # The benchmark peers' adapters live in bench/peers (outside the wheel, issue 27).
    files = [*(ROOT / "src" / "weftsearch").rglob("*.py"), *(ROOT / "bench" / "peers").glob("*.py")]
    users = [
        path
        for path in files
        if module in _imports(path) and re.search(rf"weft-search\[[^\]]*\b{extra}\b", path.read_text())
    ]
    importers = [path for path in files if module in _imports(path)]
    assert importers, f"nothing imports {module}"
    assert users, f"no module importing {module} names the {extra} extra in its messages"


def test_the_checker_catches_an_undeclared_import(tmp_path: Path) -> None:
    fake = ROOT / "tests" / "_dependency_probe_tmp.py"
    try:
        fake.write_text("import hdrh\nimport rank_bm25\n")
        problems = _undeclared([fake], _closure(["numpy"]), honour_guards=True)
        assert len(problems) == 2 and "hdrh" in problems[0]
        fake.write_text('import pytest\npytest.importorskip("hdrh")\nimport hdrh\n')
        assert _undeclared([fake], _closure(["pytest"]), honour_guards=True) == []
    finally:
        fake.unlink(missing_ok=True)
