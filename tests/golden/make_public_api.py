"""Render weft-search's public API as text, and write it to ``tests/golden/public_api.txt``.

The rendering covers every name in ``weftsearch.__all__`` and in the
``__all__`` of the public subpackages listed in :data:`MODULES`: its kind, its
signature, for classes their public methods and properties with signatures,
and for dataclasses their fields in order with annotations. The test
``tests/test_architecture.py`` renders the same text and compares it with the
committed file, so any change to the contract shows up as a diff.

Regenerate after an intended API change with::

    .venv/bin/python tests/golden/make_public_api.py
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import sys
from pathlib import Path
from typing import Any

#: The public modules whose ``__all__`` is the contract, in rendering order.
MODULES = (
    "weftsearch",
    "weftsearch.errors",
    "weftsearch.fusion",
    "weftsearch.scorers",
    "weftsearch.eval",
    "weftsearch.integrations.langchain",
    "weftsearch.server.app",
    "weftsearch.ranking.profiles",
    "weftsearch.server.compare",
    "weftsearch.server.embedding",
    "weftsearch.distributed",
)

#: Where the golden file lives.
GOLDEN = Path(__file__).resolve().parent / "public_api.txt"

#: The command that regenerates the golden file.
REGENERATE = ".venv/bin/python tests/golden/make_public_api.py"

#: Dunder methods that are part of a class's contract when a weft-search class defines them.
_CONTRACT_DUNDERS = frozenset(
    {"__len__", "__iter__", "__getitem__", "__contains__", "__call__", "__enter__", "__exit__"}
)


class _Raw:
    """An annotation shown as its source text (without the quotes a string would get)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _annotation(annotation: object) -> object:
    if annotation is inspect.Parameter.empty:
        return annotation
    if isinstance(annotation, str):
        return _Raw(annotation)
    if isinstance(annotation, type):
        return _Raw(annotation.__qualname__)
    return _Raw(repr(annotation).replace("typing.", ""))


def _default(value: object) -> object:
    """A default with a stable repr: sets are shown sorted (their order varies per run)."""
    if isinstance(value, (set, frozenset)):
        items = ", ".join(repr(item) for item in sorted(value, key=repr))
        return _Raw(f"{type(value).__name__}({{{items}}})")
    return value


def signature_text(obj: Any) -> str:
    """``str(inspect.signature(obj))`` with annotations shown as written in the source."""
    signature = inspect.signature(obj, eval_str=False)
    parameters = [
        parameter.replace(annotation=_annotation(parameter.annotation), default=_default(parameter.default))
        for parameter in signature.parameters.values()
    ]
    return str(
        signature.replace(parameters=parameters, return_annotation=_annotation(signature.return_annotation))
    )


def _is_ours(cls: type) -> bool:
    return cls.__module__.split(".")[0] == "weftsearch"


def _is_protocol(cls: type) -> bool:
    return bool(getattr(cls, "_is_protocol", False))


def _is_pydantic(cls: type) -> bool:
    """Whether ``cls`` is a pydantic model (the LangChain integration's classes are)."""
    return isinstance(getattr(cls, "__pydantic_fields__", None), dict)


def _pydantic_fields(cls: type) -> list[tuple[str, str]]:
    """The fields ``cls`` itself declares, in order, with their annotations as written."""
    fields: dict[str, Any] = cls.__pydantic_fields__  # type: ignore[attr-defined]
    own = vars(cls).get("__annotations__", {})
    return [
        (name, annotation if isinstance(annotation, str) else repr(_annotation(annotation)))
        for name, annotation in own.items()
        if name in fields
    ]


def _class_kind(cls: type) -> str:
    if _is_pydantic(cls):
        frozen = bool(getattr(cls, "model_config", {}).get("frozen", False))
        return "pydantic model (frozen)" if frozen else "pydantic model"
    if issubclass(cls, BaseException):
        return "exception"
    if _is_protocol(cls):
        runtime = " (runtime_checkable)" if getattr(cls, "_is_runtime_protocol", False) else ""
        return "protocol" + runtime
    if dataclasses.is_dataclass(cls):
        params = getattr(cls, "__dataclass_params__", None)
        frozen = bool(getattr(params, "frozen", False))
        return "dataclass (frozen)" if frozen else "dataclass"
    return "class"


def _members(cls: type) -> list[str]:
    """Public methods, properties and class attributes of ``cls`` defined in weft-search."""
    seen: dict[str, str] = {}
    field_names = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    pydantic = _is_pydantic(cls)
    if pydantic:
        field_names = set(cls.__pydantic_fields__)  # type: ignore[attr-defined]
    for owner in cls.__mro__:
        if not _is_ours(owner):
            continue
        for name, raw in vars(owner).items():
            if name in seen or name in field_names:
                continue
            if pydantic and name.startswith("model_"):
                continue  # pydantic's namespace (model_config, hooks it injects): not ours to promise
            if name.startswith("_") and name not in _CONTRACT_DUNDERS:
                continue
            if isinstance(raw, property):
                fget = raw.fget
                returns = "" if fget is None else signature_text(fget).split(" -> ", 1)[-1]
                seen[name] = f"property {name} -> {returns}" + ("" if raw.fset is None else " (settable)")
            elif isinstance(raw, classmethod):
                seen[name] = f"classmethod {name}{signature_text(raw.__func__)}"
            elif isinstance(raw, staticmethod):
                seen[name] = f"staticmethod {name}{signature_text(raw.__func__)}"
            elif inspect.isfunction(raw):
                seen[name] = f"method {name}{signature_text(raw)}"
            elif inspect.ismemberdescriptor(raw) or inspect.isgetsetdescriptor(raw):
                seen[name] = f"attribute {name}"
            else:
                seen[name] = f"attribute {name} = {raw!r}"
    return [seen[name] for name in sorted(seen)]


def _class_lines(name: str, cls: type) -> list[str]:
    kind = _class_kind(cls)
    lines = [f"{kind} {name}"]
    # Private bases are an implementation detail; their public members are listed below.
    bases = [
        base.__name__
        for base in cls.__bases__
        if base is not object and base.__name__ != "Protocol" and not base.__name__.startswith("_")
    ]
    if bases:
        lines.append(f"  bases: {', '.join(bases)}")
    if not kind.startswith(("protocol", "exception")) or _defines_init(cls):
        lines.append(f"  signature: {signature_text(cls)}")
    if dataclasses.is_dataclass(cls):
        for field in dataclasses.fields(cls):
            annotation = field.type if isinstance(field.type, str) else repr(_annotation(field.type))
            lines.append(f"  field {field.name}: {annotation}")
    if _is_pydantic(cls):
        lines.extend(f"  field {name}: {annotation}" for name, annotation in _pydantic_fields(cls))
    lines.extend(f"  {member}" for member in _members(cls))
    return lines


def _defines_init(cls: type) -> bool:
    """Whether the ``__init__`` that ``cls`` uses is defined by a weft-search class."""
    for owner in cls.__mro__:
        if "__init__" in vars(owner):
            return _is_ours(owner)
    return False


def _value_lines(name: str, value: object) -> list[str]:
    if inspect.isclass(value):
        return _class_lines(name, value)
    if inspect.isfunction(value):
        return [f"function {name}{signature_text(value)}"]
    if isinstance(value, (tuple, frozenset)) and all(isinstance(item, str) for item in value):
        items = value if isinstance(value, tuple) else tuple(sorted(value))
        return [f"constant {name}: {type(value).__name__} = {items!r}"]
    # Other constants (``__version__``): the type is the contract, not the value.
    return [f"constant {name}: {type(value).__name__}"]


def render() -> str:
    """The public API of weft-search as text (deterministic: names sorted per module)."""
    out: list[str] = [
        "# weft-search public API. Generated by tests/golden/make_public_api.py; do not edit.",
        f"# Regenerate: {REGENERATE}",
    ]
    first_seen: dict[int, str] = {}
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        names: list[str] = list(module.__all__)
        out.append("")
        out.append(f"## {module_name}")
        if len(set(names)) != len(names):
            duplicates = sorted({n for n in names if names.count(n) > 1})
            out.append(f"!! __all__ repeats {duplicates}")
        for name in sorted(set(names)):
            out.append("")
            if not hasattr(module, name):
                out.append(f"!! {name} is listed in __all__ but not defined")
                continue
            value = getattr(module, name)
            qualified = f"{module_name}.{name}"
            if (inspect.isclass(value) or inspect.isfunction(value)) and id(value) in first_seen:
                out.append(f"{name}: same object as {first_seen[id(value)]}")
                continue
            if inspect.isclass(value) or inspect.isfunction(value):
                first_seen[id(value)] = qualified
            out.extend(_value_lines(name, value))
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    """Write the golden file (or the path given as the only argument)."""
    target = Path(argv[1]) if len(argv) > 1 else GOLDEN
    target.write_text(render(), encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
