"""Every name README.md's "Evaluate" section gives for ``weftsearch.eval`` is importable from it."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import weftsearch.eval

README = Path(__file__).resolve().parents[2] / "README.md"


def evaluate_section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## Evaluate")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def named_in_readme() -> tuple[set[str], set[str]]:
    """(names README says ``weftsearch.eval`` offers, dotted submodules it names)."""
    section = evaluate_section()
    names: set[str] = set()
    modules: set[str] = set()
    # The prose: "From Python: `weftsearch.eval` (`load_collection`, ..., `weftsearch.eval.links` ...)".
    prose = section[section.index("From Python:") :]
    prose = prose[: prose.index("\n\n")]
    for token in re.findall(r"`([^`]+)`", prose):
        if token.startswith("weftsearch.eval."):
            modules.add(token)
        elif token.isidentifier():
            names.add(token)
    # The code: every `from weftsearch.eval import ...` of its Python blocks.
    for block in re.findall(r"```python\n(.*?)```", section, flags=re.S):
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and node.module == "weftsearch.eval":
                names.update(alias.name for alias in node.names)
    return names, modules


def test_readme_names_are_exported_from_weftsearch_eval() -> None:
    names, modules = named_in_readme()
    # The names the issue reported as failing, so the parse above cannot silently find nothing.
    assert {"build_testbed", "Arm", "compare", "sweep", "learn_fusion", "write_report"} <= names
    assert {"load_collection", "load_beir"} <= names
    for name in sorted(names):
        assert name in weftsearch.eval.__all__, name
        assert getattr(weftsearch.eval, name) is not None, name
    namespace: dict[str, object] = {}
    exec(f"from weftsearch.eval import {', '.join(sorted(names))}", namespace)  # the README's form
    for module in sorted(modules):
        importlib.import_module(module)


def test_every_name_in_all_exists() -> None:
    missing = [name for name in weftsearch.eval.__all__ if not hasattr(weftsearch.eval, name)]
    assert not missing
    assert len(set(weftsearch.eval.__all__)) == len(weftsearch.eval.__all__)
