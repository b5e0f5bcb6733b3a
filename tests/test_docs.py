"""Every code block in README.md and docs/*.md runs or parses, so a documented example cannot break.

The conventions a docs author follows (and this runner enforces):

* **Python blocks** (```` ```python ````, ```` ```py ````) run. Each block runs on its own, in a
  fresh namespace (``__name__ == "__main__"``) and a fresh temporary working directory, so a
  reader can paste any one block into a new interpreter: a block does its own imports and
  never relies on an earlier one. Beside the working directory sits ``../shared``, a link to
  the checkout's ``../shared``, so ``../shared/datasets/...`` resolves as it does from a
  checkout; a block that names ``shared/datasets`` is skipped, with the reason, when the data
  is absent.
* **Markers** are HTML comments on the lines just above a fence (blank lines between allowed):

  - ``<!-- no-run: REASON -->``: a Python block that must not run (a ``pip install``, a
    network download, a placeholder path). It is still compiled, so its syntax is checked.
  - ``<!-- slow -->``: the block runs only under ``-m slow``.
  - ``<!-- output -->`` above a ```` ```text ```` block that directly follows a Python block:
    the exact standard output of that Python block (trailing blanks on each line and at the
    end are ignored).
  - ``<!-- run -->`` above a shell block: its commands also run for real (below).

  Any other comment directly above a fence is an error (a misspelt marker must not silently
  turn a check off), except the ``<!-- eval:NAME -->`` table markers of docs/EVAL.md.
* **Shell blocks** (```` ```sh ````, ``shell``, ``bash``, ``console``, or no language) are
  checked line by line (backslash continuations joined, ``#`` comments and a ``$`` prompt
  dropped): a ``weft-search ...`` line must parse with the real parser
  (:func:`weftsearch.cli.build_parser`), so a renamed flag or subcommand fails here; a
  ``make TARGET`` line must name a target of the Makefile; ``python SCRIPT.py`` must name a file
  of the repository. Other lines are not checked. A shell block marked ``<!-- run -->`` holds only
  ``weft-search`` lines, and they run in order through :func:`weftsearch.cli.main` in a fresh
  temporary working directory (with ``../shared`` as above), each exiting 0.
* ```` ```text ```` and other languages never run.
* **Inline code** in README.md, docs/ARCHITECTURE.md and docs/EVAL.md: a span that starts
  ``weft-search`` names a real subcommand and only its options; a span that starts with a
  ``--flag`` names an option some subcommand has.

The rest of the file checks what the command line prints about itself: every ``--help`` is
free of argparse's ``%`` escapes, units are named, and error messages name flags, not keywords.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from weftsearch import Document, Index
from weftsearch.cli import build_parser, main
from weftsearch.errors import IndexExistsError, IndexStorageError

REPO = Path(__file__).resolve().parents[1]
DOCS = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))
SHARED = REPO.parent / "shared"
DATASETS = SHARED / "datasets"

PYTHON = frozenset({"python", "py", "python3"})
SHELL = frozenset({"", "sh", "shell", "bash", "console"})
MARKERS = frozenset({"no-run", "slow", "output", "run"})
#: Comments above fences that belong to other tools (docs/EVAL.md's generated tables).
FOREIGN_COMMENT = re.compile(r"/?eval:[\w-]+")
#: Files whose inline code is about the command line (docs/BENCHMARKS.md's flags are bench scripts').
CLI_PROSE = ("README.md", "docs/ARCHITECTURE.md", "docs/EVAL.md")

_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,})\s*(?P<info>[^`]*)$")
_COMMENT = re.compile(r"^\s*<!--\s*(?P<body>.*?)\s*-->\s*$")
_MARKER = re.compile(r"(?P<name>[a-z-]+)(?:\s*:\s*(?P<reason>.*))?")
_INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a Markdown file."""

    path: Path
    line: int  # 1-based line of the block's first content line
    language: str  # first word of the info string, lower case; "" when there is none
    source: str
    markers: dict[str, str]  # marker name -> reason ("" when none)
    comments: tuple[str, ...]  # every comment just above the fence, markers or not

    @property
    def where(self) -> str:
        """``README.md:31``: where the block starts, for test ids and messages."""
        try:
            name = self.path.relative_to(REPO).as_posix()
        except ValueError:
            name = self.path.name
        return f"{name}:{self.line}"


def parse_blocks(text: str, path: Path) -> list[Block]:
    """The fenced blocks of Markdown ``text``, with the markers above each.

    Raises:
        ValueError: a fence that is never closed.

    """
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence = opening["fence"]
        info = opening["info"].strip()
        start = i + 1
        end = start
        while end < len(lines) and not re.match(rf"^ {{0,3}}{fence}`*\s*$", lines[end]):
            end += 1
        if end == len(lines):
            raise ValueError(f"{path.name}:{i + 1}: the fence {fence}{info} is never closed")
        comments = _comments_above(lines, i)
        markers: dict[str, str] = {}
        for body in comments:
            marker = _MARKER.fullmatch(body)
            if marker is not None and marker["name"] in MARKERS:
                markers[marker["name"]] = (marker["reason"] or "").strip()
        blocks.append(
            Block(
                path=path,
                line=start + 1,
                language=info.split()[0].lower() if info else "",
                source="\n".join(lines[start:end]) + "\n",
                markers=markers,
                comments=tuple(comments),
            )
        )
        i = end + 1
    return blocks


def _comments_above(lines: list[str], fence_index: int) -> list[str]:
    """The HTML comments on the lines just above line ``fence_index`` (blank lines skipped)."""
    comments: list[str] = []
    j = fence_index - 1
    while j >= 0:
        if not lines[j].strip():
            j -= 1
            continue
        comment = _COMMENT.match(lines[j])
        if comment is None:
            break
        comments.append(comment["body"])
        j -= 1
    return comments[::-1]


def all_blocks() -> list[Block]:
    """Every fenced block of README.md and docs/*.md, in file order."""
    return [block for path in DOCS for block in parse_blocks(path.read_text(encoding="utf-8"), path)]


def expected_output(blocks: list[Block], index: int) -> str | None:
    """The ``<!-- output -->`` text block right after ``blocks[index]``, if there is one."""
    if index + 1 < len(blocks):
        following = blocks[index + 1]
        if following.path == blocks[index].path and "output" in following.markers:
            return following.source
    return None


def _normalised(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())


def run_python(block: Block) -> None:
    """Compile ``block`` (line numbers as in its file) and, unless ``no-run``, execute it fresh."""
    code = compile("\n" * (block.line - 1) + block.source, str(block.path), "exec")
    if "no-run" in block.markers:
        return
    namespace: dict[str, object] = {"__name__": "__main__"}
    try:
        exec(code, namespace)
    finally:
        namespace.clear()  # drop open indexes (and their locks) before the directory goes
        gc.collect()


#: First words of the shell lines the runner checks (any other line is prose to it).
CHECKED = re.compile(r"weft-search|make|(?:\S*/)?python3?")


def logical_lines(block: Block) -> Iterator[tuple[int, str]]:
    """``(line, text)`` for each non-blank line of a shell block, continuations joined."""
    pending = ""
    first = block.line
    for offset, raw in enumerate(block.source.splitlines()):
        line = raw.rstrip()
        if not pending:
            first = block.line + offset
            if block.language == "console" and line.lstrip().startswith("$ "):
                line = line.lstrip()[2:]
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        text, pending = pending + line, ""
        if text.strip() and not text.lstrip().startswith("#"):
            yield first, text


def commands(block: Block) -> Iterator[tuple[int, list[str]]]:
    """``(line, argv)`` for each checked command of a shell block.

    Backslash continuations are joined and ``#`` comments dropped. A line that
    does not start with a checked command (:data:`CHECKED`) is skipped; one that
    does but is not valid shell quoting yields ``["<unquotable>", text]``.
    """
    for first, text in logical_lines(block):
        if not CHECKED.fullmatch(text.split()[0]):
            continue
        try:
            argv = shlex.split(text, comments=True)
        except ValueError as exc:
            argv = ["<unquotable>", f"{text.strip()} ({exc})"]
        if argv:
            yield first, argv


def run_shell(block: Block) -> str | None:
    """Run a ``<!-- run -->`` block's commands in order in the current directory; the first failure."""
    others = [f"{line}: {text}" for line, text in logical_lines(block) if text.split()[0] != "weft-search"]
    if others:
        return f"{block.where}: a run block holds weft-search lines only: {others}"
    for line, argv in commands(block):
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            status = main(argv[1:])
        if status != 0:
            return f"{block.path.name}:{line}: {shlex.join(argv)} exited {status}: {stderr.getvalue()}"
    return None


def makefile_targets() -> set[str]:
    """The targets the Makefile defines."""
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    return {m[1] for m in re.finditer(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, re.M)}


def parse_command(argv: list[str]) -> str | None:
    """Parse a ``weft-search`` argv with the real parser: ``None`` if it parses, else the error."""
    assert argv[0] == "weft-search"
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            build_parser().parse_args(argv[1:])
    except SystemExit:  # argparse prints usage and "prog: error: ..." and exits 2
        lines = stderr.getvalue().strip().splitlines()
        return lines[-1] if lines else "exited while parsing"
    return None


def check_command(argv: list[str], targets: set[str]) -> str | None:
    """The problem with one shell command line, or ``None``."""
    if argv[0] == "<unquotable>":
        return f"not valid shell quoting: {argv[1]}"
    if argv[0] == "weft-search":
        return parse_command(argv)
    if argv[0] == "make":
        unknown = [t for t in argv[1:] if not t.startswith("-") and "=" not in t and t not in targets]
        return f"no Makefile target {unknown}" if unknown else None
    if Path(argv[0]).name.startswith("python") and len(argv) > 1 and argv[1].endswith(".py"):
        return None if (REPO / argv[1]).is_file() else f"no script {argv[1]} in the repository"
    return None


def _work_dir(tmp_path: Path) -> Path:
    """A fresh working directory with ``../shared`` pointing at the checkout's (when present)."""
    work = tmp_path / "work"
    work.mkdir()
    if SHARED.exists():
        (tmp_path / "shared").symlink_to(SHARED, target_is_directory=True)
    return work


def _needs_data(text: str) -> bool:
    return "shared/datasets" in text and not DATASETS.is_dir()


# ---------------------------------------------------------------------- collection

BLOCKS = all_blocks()


def _params(blocks: list[tuple[int, Block]]) -> list[object]:
    return [
        pytest.param(i, block, id=block.where, marks=[pytest.mark.slow] if "slow" in block.markers else [])
        for i, block in blocks
    ]


PYTHON_BLOCKS = [(i, b) for i, b in enumerate(BLOCKS) if b.language in PYTHON]
SHELL_BLOCKS = [(i, b) for i, b in enumerate(BLOCKS) if b.language in SHELL and any(commands(b))]
RUN_BLOCKS = [(i, b) for i, b in SHELL_BLOCKS if "run" in b.markers]


# ---------------------------------------------------------------------- the documents' blocks


@pytest.mark.parametrize(("index", "block"), _params(PYTHON_BLOCKS))
def test_python_block_runs(
    index: int,
    block: Block,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if _needs_data(block.source) and "no-run" not in block.markers:
        pytest.skip(f"{block.where} reads ../shared/datasets, which is absent")
    monkeypatch.chdir(_work_dir(tmp_path))
    run_python(block)
    printed = capsys.readouterr().out
    expected = expected_output(BLOCKS, index)
    if expected is not None:
        assert _normalised(printed) == _normalised(expected), (
            f"{block.where}: the printed output differs from the output block below it"
        )


@pytest.mark.parametrize(("index", "block"), _params(SHELL_BLOCKS))
def test_shell_block_commands_parse(index: int, block: Block) -> None:
    targets = makefile_targets()
    problems = [
        f"{block.path.name}:{line}: {shlex.join(argv)}\n    {problem}"
        for line, argv in commands(block)
        if (problem := check_command(argv, targets)) is not None
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(("index", "block"), _params(RUN_BLOCKS))
def test_shell_block_runs(
    index: int,
    block: Block,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if _needs_data(block.source):
        pytest.skip(f"{block.where} reads ../shared/datasets, which is absent")
    monkeypatch.chdir(_work_dir(tmp_path))
    failure = run_shell(block)
    capsys.readouterr()
    assert failure is None, failure


def test_markers_are_known_and_in_their_place() -> None:
    problems: list[str] = []
    for i, block in enumerate(BLOCKS):
        for body in block.comments:
            marker = _MARKER.fullmatch(body)
            known = marker is not None and marker["name"] in MARKERS
            if not known and not FOREIGN_COMMENT.fullmatch(body):
                problems.append(f"{block.where}: unknown marker <!-- {body} --> (known: {sorted(MARKERS)})")
        if "output" in block.markers:
            previous = BLOCKS[i - 1] if i else None
            if block.language != "text" or previous is None or previous.path != block.path:
                problems.append(
                    f"{block.where}: <!-- output --> belongs on a text block after a Python block"
                )
            elif previous.language not in PYTHON or "no-run" in previous.markers:
                problems.append(f"{block.where}: <!-- output --> follows no Python block that runs")
        if "run" in block.markers and block.language not in SHELL:
            problems.append(f"{block.where}: <!-- run --> is for shell blocks (Python blocks always run)")
        if "no-run" in block.markers and block.language not in PYTHON:
            problems.append(
                f"{block.where}: <!-- no-run --> is for Python blocks (shell blocks run only if marked)"
            )
        if "no-run" in block.markers and not block.markers["no-run"]:
            problems.append(f"{block.where}: <!-- no-run: REASON --> needs its reason")
    assert not problems, "\n".join(problems)


def test_the_runner_sees_the_readme_examples() -> None:
    # Guards the runner itself: a collection bug must not turn every check into a pass.
    readme = [b for b in BLOCKS if b.path.name == "README.md"]
    assert [b for b in readme if b.language in PYTHON and "no-run" not in b.markers]
    assert any("output" in b.markers for b in readme)
    assert any("run" in b.markers for b in readme)
    assert sum(1 for _, b in SHELL_BLOCKS if b.path.name == "EVAL.md") >= 5


# ---------------------------------------------------------------------- inline code


def _option_strings(parser: argparse.ArgumentParser) -> set[str]:
    return {s for action in parser._actions for s in action.option_strings}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


def _all_parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for child in _subparsers(parser).values():
        yield from _all_parsers(child)


def inline_problems(text: str, name: str, root: argparse.ArgumentParser) -> list[str]:
    """Inline code that names a subcommand or option ``weft-search`` does not have."""
    every_option = set().union(*(_option_strings(p) for p in _all_parsers(root)))
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        for span in _INLINE.findall(line):
            tokens = span.split()
            if tokens[0] == "weft-search":
                parser = root
                for token in tokens[1:]:
                    children = _subparsers(parser)
                    if token.startswith("--"):
                        flag = token.split("=")[0]
                        if flag not in _option_strings(parser):
                            problems.append(f"{name}:{number}: `{span}`: {parser.prog} has no {flag}")
                    elif token in children:
                        parser = children[token]
                    elif children and re.fullmatch(r"[a-z][a-z0-9-]*", token):
                        problems.append(
                            f"{name}:{number}: `{span}`: {parser.prog} has no subcommand {token!r}"
                        )
                    # Anything else is a positional value or a placeholder (NAME, DIR, |).
            elif re.fullmatch(r"--[a-z][a-z0-9-]*", tokens[0]) and tokens[0] not in every_option:
                problems.append(f"{name}:{number}: `{span}`: no weft-search command has {tokens[0]}")
    return problems


def test_inline_commands_and_flags_exist() -> None:
    root = build_parser()
    problems: list[str] = []
    for path in DOCS:
        name = path.relative_to(REPO).as_posix()
        text = path.read_text(encoding="utf-8")
        if name in CLI_PROSE:
            problems += inline_problems(text, name, root)
        else:  # elsewhere only spans that start with weft-search are about the CLI
            problems += [p for p in inline_problems(text, name, root) if "`weft-search" in p]
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------- the runner can fail


def _one(markdown: str, tmp_path: Path) -> list[Block]:
    path = tmp_path / "doc.md"
    path.write_text(markdown, encoding="utf-8")
    return parse_blocks(markdown, path)


def test_runner_fails_a_block_whose_import_is_gone(tmp_path: Path) -> None:
    (block,) = _one("# t\n\n```python\nfrom weftsearch import NoSuchName\n```\n", tmp_path)
    assert block.line == 4 and block.language == "python"
    with pytest.raises(ImportError, match="NoSuchName"):
        run_python(block)


def test_runner_reports_the_markdown_line(tmp_path: Path) -> None:
    (block,) = _one("a\nb\n\n```python\nx = 1\n\nraise RuntimeError('here')\n```\n", tmp_path)
    with pytest.raises(RuntimeError) as caught:
        run_python(block)
    frames = [f for f in caught.traceback if str(f.path).endswith("doc.md")]
    assert frames and frames[-1].lineno + 1 == 7  # pytest's lineno is 0-based


def test_no_run_blocks_are_compiled_not_run(tmp_path: Path) -> None:
    blocks = _one(
        "<!-- no-run: needs the network -->\n```python\nraise SystemExit('ran')\n```\n\n"
        "<!-- no-run: broken -->\n\n```python\ndef (:\n```\n",
        tmp_path,
    )
    assert blocks[0].markers == {"no-run": "needs the network"} and blocks[1].markers == {"no-run": "broken"}
    run_python(blocks[0])
    with pytest.raises(SyntaxError):
        run_python(blocks[1])


def test_output_blocks_pair_with_the_python_above(tmp_path: Path) -> None:
    blocks = _one(
        "```python\nprint(1)\n```\n\n<!-- output -->\n```text\n1\n```\n\n```text\nx\n```\n", tmp_path
    )
    assert expected_output(blocks, 0) == "1\n"
    assert expected_output(blocks, 1) is None and expected_output(blocks, 2) is None


def test_an_unclosed_fence_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="never closed"):
        _one("```python\nx = 1\n", tmp_path)


def test_shell_lines_are_parsed_by_the_real_parser(tmp_path: Path) -> None:
    (block,) = _one(
        "```\nweft-search search 'a b' --index idx \\\n    -k 3   # comment\n"
        "weft-search search q --index idx --top-k 3\nweft-search serch q\nmake demo\nmake deploy\n"
        "python bench/nothing.py\nls -l\nweft-search search 'a\n```\n",
        tmp_path,
    )
    found = list(commands(block))
    assert [line for line, _ in found] == [2, 4, 5, 6, 7, 8, 10]  # ls (line 9) is not checked
    assert found[0][1] == ["weft-search", "search", "a b", "--index", "idx", "-k", "3"]
    targets = makefile_targets()
    verdicts = [check_command(argv, targets) for _, argv in found]
    assert verdicts[0] is None
    assert verdicts[1] is not None and "--top-k" in verdicts[1]  # a renamed flag fails
    assert verdicts[2] is not None and "serch" in verdicts[2]
    assert verdicts[3] is None and verdicts[4] is not None and "deploy" in verdicts[4]
    assert verdicts[5] is not None and "nothing.py" in verdicts[5]
    assert verdicts[6] is not None and "quoting" in verdicts[6]


def test_run_blocks_stop_at_the_first_failing_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (good, bad, foreign) = _one(
        "<!-- run -->\n```sh\nweft-search demo -k 1\n```\n"
        "<!-- run -->\n```sh\nweft-search scrub no-such-index   # fails\nweft-search demo\n```\n"
        "<!-- run -->\n```sh\nrm -rf /\n```\n",
        tmp_path,
    )
    monkeypatch.chdir(tmp_path)
    assert run_shell(good) is None
    failure = run_shell(bad)
    assert failure is not None and "doc.md:7: weft-search scrub no-such-index exited 2" in failure
    assert "no-such-index" in failure.split("exited 2:")[1]  # the command's own message
    failure = run_shell(foreign)
    assert failure is not None and "weft-search lines only" in failure
    capsys.readouterr()


def test_inline_checks_catch_a_renamed_flag_or_subcommand() -> None:
    root = build_parser()
    text = (
        "`weft-search eval scifact --data DATA` and `--any-snapshot` are fine; "
        "`weft-search index | search | scrub | merge | demo` too.\n"
        "`weft-search datasets fetch NAME --into DIR`, `weft-search evaluate`, `--no-such-flag`.\n"
    )
    problems = inline_problems(text, "x.md", root)
    assert len(problems) == 3, problems
    assert "--into" in problems[0] and "evaluate" in problems[1] and "--no-such-flag" in problems[2]


def test_unknown_markers_are_reported(tmp_path: Path) -> None:
    (block,) = _one("<!-- no_run -->\n```python\nx = 1\n```\n", tmp_path)
    assert block.markers == {} and block.comments == ("no_run",)


# ---------------------------------------------------------------------- what the CLI says about itself


def test_every_help_text_is_free_of_percent_escapes(capsys: pytest.CaptureFixture[str]) -> None:
    for parser in _all_parsers(build_parser()):
        text = parser.format_help()
        assert "%%" not in text and "%(" not in text, f"{parser.prog} --help:\n{text}"
    assert main(["eval", "--help"]) == 0
    printed = capsys.readouterr().out
    assert "95%" in printed and "95%%" not in printed


def test_durations_on_the_command_line_name_their_unit() -> None:
    search = _subparsers(build_parser())["search"]
    help_text = " ".join(search.format_help().split())
    assert "--half-life DAYS" in help_text and "half-life in days" in help_text
    evaluate = " ".join(_subparsers(build_parser())["eval"].format_help().split())
    assert "recency(half_life=DAYS) counts days" in evaluate


def test_index_refusal_names_the_flag_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"key": "a", "text": "alpha"}\n', encoding="utf-8")
    target = tmp_path / "idx"
    assert main(["index", str(corpus), "--index", str(target)]) == 0
    capsys.readouterr()
    assert main(["index", str(corpus), "--index", str(target)]) == 2
    err = capsys.readouterr().err
    assert "--overwrite" in err and "overwrite=True" not in err and str(target) in err
    assert main(["index", str(corpus), "--index", str(target), "--overwrite"]) == 0


def test_index_refusal_names_the_keyword_in_python(tmp_path: Path) -> None:
    with Index.create(tmp_path / "idx") as index:
        index.add(Document("a", "alpha"))
        index.commit()
    with pytest.raises(IndexExistsError, match=r"not empty; pass overwrite=True") as caught:
        Index.create(tmp_path / "idx")
    assert isinstance(caught.value, IndexStorageError) and isinstance(caught.value, FileExistsError)
