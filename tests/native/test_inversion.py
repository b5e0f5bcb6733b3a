"""The segment writer's compiled inversion (``_inversion.c``) against its Python path, byte for byte.

The Python path (flatten the term counts, map them to ids, argsort by term and
document) is the oracle: every index built with the compiled inversion must have
the same bytes in every file as one built without it, whatever the documents
(named text fields with positions, list fields, deletes, empty texts, Unicode).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from weftsearch import Document, Index
from weftsearch.native import inversion
from weftsearch.schema import Schema, TextField
from weftsearch.storage import postings, segment_writer
from weftsearch.storage.pausing import no_pause

WORDS = [
    "a",
    "graph",
    "graphs",
    "ranking",
    "the",
    "don't",
    "\u00e9t\u00e9",
    "Stra\u00dfe",
    "x\u00b2",
    "\U0001f600",
    "z",
]

SCHEMA = Schema(
    (
        TextField("text"),
        TextField("title", positions=True),
        TextField("tags", analyzer="simple", stored=False, positions=False),
    )
)


def python_inversion(
    term_maps: Sequence[Mapping[str, int]], position_maps: Sequence[Mapping[str, Sequence[int]]] | None
) -> tuple[list[str], list[int], list[int], list[int], list[int] | None]:
    """The writer's Python path: _flat_postings, then sorted by (term, doc) as _field_postings sorts."""
    vocabulary, term_of, doc_of, tf_of = segment_writer._flat_postings(term_maps, no_pause)
    order = np.lexsort((doc_of, term_of))
    offsets = np.zeros(len(vocabulary) + 1, dtype=np.int64)
    np.cumsum(np.bincount(term_of, minlength=len(vocabulary)), out=offsets[1:])
    positions = None
    if position_maps is not None:
        flat = segment_writer._flat_positions(term_maps, position_maps)
        starts = np.zeros(tf_of.shape[0] + 1, dtype=np.int64)
        np.cumsum(tf_of, out=starts[1:])
        positions = [int(p) for i in order for p in flat[starts[i] : starts[i + 1]]]
    return vocabulary, offsets.tolist(), doc_of[order].tolist(), tf_of[order].tolist(), positions


def test_the_compiled_inversion_is_built_and_used() -> None:
    assert isinstance(inversion._compiled, ModuleType)
    assert inversion.invert([{"b": 1, "a": 2}]) is not None
    # ``import weftsearch`` hands it to the segment writer (storage does not import native).
    assert segment_writer._inversion is inversion.invert


def test_the_self_check_refuses_a_module_that_disagrees() -> None:
    class Wrong:
        UnsupportedInputError = ValueError

        class Inverter:
            def add(self, maps: object, positions: object) -> None:
                pass

            def finish(self) -> tuple[list[str], bytearray, bytearray, bytearray, None]:
                return [], bytearray(8), bytearray(), bytearray(), None

    assert inversion._compiled is not None and inversion._agrees(inversion._compiled)
    assert not inversion._agrees(Wrong)  # type: ignore[arg-type]


term_maps_strategy = st.lists(
    st.dictionaries(
        st.text(alphabet="ab\u00e9\U0001f600_", min_size=1, max_size=4), st.integers(1, 5), max_size=6
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(term_maps=term_maps_strategy, with_positions=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_invert_matches_the_python_path(
    term_maps: list[dict[str, int]], with_positions: bool, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    position_maps = None
    if with_positions:
        position_maps = [
            {term: sorted(rng.choice(1000, size=tf, replace=False).tolist()) for term, tf in terms.items()}
            for terms in term_maps
        ]
    got = inversion.invert(term_maps, position_maps)
    assert got is not None
    vocabulary, offsets, ids, tfs, positions = python_inversion(term_maps, position_maps)
    assert got.vocabulary == vocabulary
    assert got.offsets.tolist() == offsets
    assert got.ids.tolist() == ids
    assert got.tfs.tolist() == tfs
    assert (None if got.positions is None else got.positions.tolist()) == positions


def test_invert_spans_several_calls_and_a_large_term_table() -> None:
    # More documents than one add() takes and more terms than the first hash table holds.
    term_maps = [
        {f"t{(i * 7 + j) % 5000}": 1 + j % 3 for j in range(12)}
        for i in range(3 * inversion.DOCUMENTS_PER_CALL)
    ]
    got = inversion.invert(term_maps)
    assert got is not None
    vocabulary, offsets, ids, tfs, _ = python_inversion(term_maps, None)
    assert got.vocabulary == vocabulary and got.offsets.tolist() == offsets
    assert got.ids.tolist() == ids and got.tfs.tolist() == tfs


class Mapped(Mapping[str, int]):
    """A mapping that is not a dict: left to the Python path."""

    def __init__(self, data: dict[str, int]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> int:
        return self._data[key]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


class CountsWithOwnValues(dict[str, int]):
    """A dict subclass whose values() the Python path would read: left to it."""

    def values(self):  # type: ignore[no-untyped-def]
        return [1 for _ in self]


class Named(str):
    """A str subclass: left to the Python path."""


@pytest.mark.parametrize(
    ("term_maps", "position_maps"),
    [
        ([Mapped({"a": 1})], None),
        ([CountsWithOwnValues({"a": 2})], None),
        ([{Named("a"): 1}], None),
        ([{"a": 0}], None),
        ([{"a": -1}], None),
        ([{"a": 2**32}], None),
        ([{"a": 1.0}], None),
        ([{"a": True}], None),
        ([{"a": 2}], [{"a": [0]}]),  # a run shorter than its tf
        ([{"a": 1}], [{}]),  # a term without positions
        ([{"a": 1}], [{"a": ["0"]}]),
        ([{"a": 1}], [{"a": [2**63]}]),
        ([{"a": 1}], [Mapped({"a": 1})]),
        ([{"\ud800": 1}], None),  # a lone surrogate: not UTF-8
    ],
)
def test_input_the_compiled_path_does_not_take_is_left_to_python(
    term_maps: list[Mapping[str, int]], position_maps: list[Mapping[str, Sequence[int]]] | None
) -> None:
    assert inversion.invert(term_maps, position_maps) is None


def test_a_counter_is_inverted_as_its_dict() -> None:
    counted = inversion.invert([Counter("abca"), Counter("b")])
    assert counted is not None
    assert counted.vocabulary == ["a", "b", "c"] and counted.ids.tolist() == [0, 0, 1, 0]


def test_without_the_module_invert_returns_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inversion, "_compiled", None)
    assert inversion.invert([{"a": 1}]) is None


def files_of(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir()) if path.is_file()}


def build(directory: Path, batches: list[list[Document]], deletes: list[str]) -> dict[str, bytes]:
    with Index.create(directory, schema=SCHEMA, index_id="7" * 32) as index:
        for batch in batches:
            index.add_many(batch, workers=1)
            index.commit()
        if deletes:
            index.delete_many(deletes)
            index.commit()
        index.merge()  # the merge of sources the compiled path wrote
        index.commit()
    return files_of(directory)


words = st.lists(st.sampled_from(WORDS), max_size=12).map(" ".join)
document_strategy = st.builds(
    lambda key, text, title, tags, labels: Document(
        key=f"k{key}",
        text=text,
        text_fields={
            **({"title": title} if title is not None else {}),
            **({"tags": tags} if tags is not None else {}),
        },
        fields={"labels": labels} if labels else {},
    ),
    st.integers(0, 60),
    words,
    st.none() | words,
    st.none() | words,
    st.lists(st.sampled_from(["x", "y", "\u00e9"]), max_size=3),
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=st.lists(
        st.lists(document_strategy, max_size=25, unique_by=lambda d: d.key), min_size=1, max_size=3
    ),
    deletes=st.lists(st.integers(0, 60).map(lambda i: f"k{i}"), max_size=5, unique=True),
)
def test_an_index_built_in_c_has_the_python_paths_bytes(
    monkeypatch: pytest.MonkeyPatch, batches: list[list[Document]], deletes: list[str]
) -> None:
    taken: list[bool] = []

    def counted(*args: Any) -> segment_writer.InvertedPostings | None:
        result = inversion.invert(*args)
        taken.append(result is not None)
        return result

    with tempfile.TemporaryDirectory() as tmp:
        with monkeypatch.context() as patch:
            patch.setattr(segment_writer, "_inversion", counted)
            compiled = build(Path(tmp) / "compiled", batches, deletes)
        # every field of every segment written went through C
        assert all(taken) and (bool(taken) or not any(batches))
        with monkeypatch.context() as patch:
            patch.setattr(segment_writer, "_inversion", None)
            patch.setattr(postings, "_packing", None)
            python = build(Path(tmp) / "python", batches, deletes)
    assert compiled.keys() == python.keys()
    for name, data in compiled.items():
        assert data == python[name], name


# ---------------------------------------------------------------- block encoding


def numpy_pack(
    ids: NDArray[np.uint32], tfs: NDArray[np.uint32], offsets: NDArray[np.uint64], lengths: NDArray[np.uint32]
) -> postings.PackedPostings:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(postings, "_packing", None)
        return postings.pack_postings(ids, tfs, offsets, lengths)


def test_the_compiled_packing_is_handed_to_the_writer() -> None:
    assert postings._packing is inversion.pack


@settings(max_examples=200, deadline=None)
@given(
    n_docs=st.integers(1, 3000),
    sizes=st.lists(st.integers(0, 400), max_size=8),
    big_tfs=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_pack_matches_numpy(n_docs: int, sizes: list[int], big_tfs: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    terms = [np.sort(rng.choice(n_docs, size=min(size, n_docs), replace=False)) for size in sizes]
    ids = np.concatenate([*terms, np.zeros(0, np.int64)]).astype(np.uint32)
    high = 2**32 if big_tfs else 5
    tfs = np.asarray(rng.integers(1, high, size=ids.shape[0], dtype=np.uint64)).astype(np.uint32)
    lengths = np.asarray(rng.integers(0, 2**32, size=n_docs, dtype=np.uint64)).astype(np.uint32)
    offsets = np.zeros(len(terms) + 1, dtype=np.uint64)
    np.cumsum([t.shape[0] for t in terms], out=offsets[1:])
    got = inversion.pack(ids, tfs, offsets, lengths)
    assert got is not None
    want = numpy_pack(ids, tfs, offsets, lengths)
    for name in ("block_offsets", "blocks", "data_offsets", "data"):
        mine, theirs = getattr(got, name), getattr(want, name)
        assert mine.dtype == theirs.dtype and mine.tobytes() == theirs.tobytes(), name


def test_pack_spans_every_width_of_an_id_gap() -> None:
    # One term whose gaps need 0 .. 22 bits (lengths has 2**22 + 1 documents).
    gaps = [0, *(2**w - 1 for w in range(1, 23))]
    ids = (np.cumsum(np.array(gaps, dtype=np.int64) + 1) - 1).astype(np.uint32)
    n = int(ids[-1]) + 1
    lengths = np.ones(n, dtype=np.uint32)
    tfs = np.ones(ids.shape[0], dtype=np.uint32)
    offsets = np.array([0, ids.shape[0]], dtype=np.uint64)
    got = inversion.pack(ids, tfs, offsets, lengths)
    assert got is not None
    assert got.data.tobytes() == numpy_pack(ids, tfs, offsets, lengths).data.tobytes()


U32, U64 = np.uint32, np.uint64


@pytest.mark.parametrize(
    ("ids", "tfs", "offsets", "n_docs"),
    [
        (np.array([1, 1], U32), np.array([1, 1], U32), np.array([0, 2], U64), 3),  # not strictly ascending
        (np.array([2, 1], U32), np.array([1, 1], U32), np.array([0, 2], U64), 3),
        (np.array([0, 3], U32), np.array([1, 1], U32), np.array([0, 2], U64), 3),  # past the documents
        (np.array([0, 1], U32), np.array([1, 0], U32), np.array([0, 2], U64), 3),  # a tf of 0
        (np.array([0, 1], U32), np.array([1, 1], U32), np.array([1, 2], U64), 3),  # offsets not from 0
        (np.array([0, 1], U32), np.array([1, 1], U32), np.array([0, 3], U64), 3),  # past the postings
        (np.array([0, 1], U32), np.array([1, 1], U32), np.array([0, 2, 1], U64), 3),  # descending
        (np.array([0, 1], np.int64), np.array([1, 1], U32), np.array([0, 2], U64), 3),  # another dtype
        (np.array([0, 1], U32), np.array([1, 1], np.float32), np.array([0, 2], U64), 3),
        (np.array([0, 1], U32), np.array([1], U32), np.array([0, 2], U64), 3),  # lengths differ
    ],
)
def test_postings_the_compiled_packing_does_not_take_are_left_to_numpy(
    ids: NDArray[Any], tfs: NDArray[Any], offsets: NDArray[Any], n_docs: int
) -> None:
    assert inversion.pack(ids, tfs, offsets, np.ones(n_docs, dtype=np.uint32)) is None


def test_the_switch_leaves_inversion_and_packing_to_python(tmp_path: Path) -> None:
    """``WEFTSEARCH_NO_COMPILED_INVERSION=1``: neither is handed over, and an index still builds."""
    script = (
        "from weftsearch import Document, Index\n"
        "from pathlib import Path\n"
        "from weftsearch.storage import SegmentReader, postings, segment_writer\n"
        "assert segment_writer._inversion is None and postings._packing is None\n"
        f"path = Path({str(tmp_path / 'index')!r})\n"
        "with Index.create(path) as index:\n"
        "    index.add_many([Document('a', 'graph ranking'), Document('b', 'graph')])\n"
        "    index.commit()\n"
        "(segment,) = path.glob('seg-*.wseg')\n"
        "assert list(SegmentReader(segment).terms()) == ['graph', 'rank']\n"
    )
    env = dict(os.environ, WEFTSEARCH_NO_COMPILED_INVERSION="1")
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_an_inverter_whose_add_failed_cannot_be_finished() -> None:
    """A document half added (its second term refused) leaves nothing to finish: no half-built postings."""
    module = inversion._compiled
    assert module is not None
    inverter = module.Inverter()
    inverter.add([{"a": 1}], [{"a": [0]}])
    with pytest.raises(module.UnsupportedInputError):
        inverter.add([{"b": 2, "c": 1}], [{"b": [0, 1], "c": []}])  # c's run is shorter than its tf
    with pytest.raises(RuntimeError, match="finished or failed"):
        inverter.finish()
    with pytest.raises(RuntimeError, match="finished or failed"):
        inverter.add([{"a": 1}], [{"a": [0]}])
    spent = module.Inverter()
    spent.add([{"a": 1}], None)
    assert spent.finish()[0] == ["a"]
    with pytest.raises(RuntimeError):
        spent.finish()


# A positions dict whose key collides with the term "a" (same hash): looking "a" up runs the key's
# __eq__, Python code in the middle of add(). Each script's mutation once read freed or
# unreserved memory (a crash, hence the subprocess); now add() refuses with a RuntimeError.
_MUTATING_LOOKUP = (
    "from weftsearch.native import inversion\n"
    "module = inversion._compiled\n"
    "armed = []\n"
    "class Collides:\n"
    "    def __hash__(self):\n"
    "        return hash('a')\n"
    "    def __eq__(self, other):\n"
    "        if armed:\n"
    "            armed.clear()\n"
    "            MUTATE\n"
    "        return False\n"
    "maps = [{'a': 1}] + [{'w' + str(i) * 50: 1} for i in range(200)]\n"
    "positions = [{Collides(): [0], 'a': [0]}] + [{t: [0] for t in m} for m in maps[1:]]\n"
    "armed.append(True)\n"
    "try:\n"
    "    module.Inverter().add(maps, positions)\n"
    "except RuntimeError as error:\n"
    "    print('refused:', error)\n"
)


@pytest.mark.parametrize(
    "mutate",
    [
        "maps.clear(); positions.clear()",  # the document lists shrink, the maps they held are freed
        "positions.clear()",  # only the positions list shrinks
        # the document being read grows (its positions too, so each new term is found)
        "maps[0].update({str(i): 1 for i in range(5000)}); "
        "positions[0].update({str(i): [0] for i in range(5000)})",
    ],
)
def test_python_code_run_by_a_lookup_cannot_make_add_read_or_write_out_of_bounds(mutate: str) -> None:
    """Lists shrunk or a map grown by a key's ``__eq__`` during add(): a RuntimeError, never a crash."""
    script = _MUTATING_LOOKUP.replace("MUTATE", mutate)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "refused: " in done.stdout and "changed during inversion" in done.stdout


_RACING_OFFSETS = """
import threading, time
import numpy as np
from weftsearch.native import inversion
module = inversion._compiled
n = 1_000_000
ids, tfs, lengths = (np.arange(n, dtype=np.uint32), np.ones(n, dtype=np.uint32), np.ones(n, dtype=np.uint32))
offsets = np.array([0, n], dtype=np.uint64)
stop = time.monotonic() + 1.5
def flip():
    while time.monotonic() < stop:
        offsets[1] = n + 400_000_000
        time.sleep(0.0005)
        offsets[1] = n
        time.sleep(0.0005)
flipper = threading.Thread(target=flip)
flipper.start()
while time.monotonic() < stop:
    try:
        module.pack(ids, tfs, offsets, lengths)
    except module.UnsupportedInputError:
        pass
flipper.join()
print("survived")
"""


def test_offsets_written_by_another_thread_while_pack_runs_never_reach_out_of_range() -> None:
    """pack() runs without the GIL: offsets changed after its check must not index past the arrays.

    It checks and uses its own copy of the offsets (before, a racing write crashed it).
    """
    done = subprocess.run(
        [sys.executable, "-c", _RACING_OFFSETS], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "survived" in done.stdout, (done.returncode, done.stderr[-2000:])


_REENTRANT = """
from weftsearch.native import inversion
module = inversion._compiled
inverter = module.Inverter()
armed, seen = [], []
class Collides:
    def __hash__(self):
        return hash("a")
    def __eq__(self, other):
        if armed:
            armed.clear()
            for call in (inverter.finish, lambda: inverter.add([{"b": 1}], [{"b": [0]}])):
                try:
                    call()
                except RuntimeError as error:
                    seen.append(str(error))
        return False
maps = [{"a": 1, "z": 1}]
positions = [{Collides(): [0], "a": [0], "z": [5]}]
armed.append(True)
inverter.add(maps, positions)
vocabulary, offsets, ids, tfs, found = inverter.finish()
assert vocabulary == ["a", "z"] and bytes(ids) == bytes(8), vocabulary
print(seen)
"""


def test_an_inverter_cannot_be_finished_or_added_to_from_inside_its_own_add() -> None:
    """Python code run by add() (a positions key's ``__eq__``) calling back in: a RuntimeError.

    Before, finish() from there freed the tables the running add() then wrote to (a crash).
    """
    done = subprocess.run([sys.executable, "-c", _REENTRANT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.count("in use") == 2, done.stdout


# ------------------------------------------------------------------ stored records' JSON strings

JSON_TEXTS = [
    "",
    "plain ascii text",
    'quote " backslash \\ slash / controls \x00\x01\x08\x0c\x0a\x0d\x09\x1b\x1f del \x7f',
    "\u00e9t\u00e9 \xa0 \x85 latin-1",
    "\u6771\u4eac \x01 \u2028 \u2029",
    "\U0001f600 astral \"",
    "\ud800 lone surrogate \udfff",
]


def test_the_compiled_json_strings_are_used_where_built() -> None:
    compiled = inversion._compiled
    if compiled is None:
        pytest.skip("weftsearch.native._inversion is not built")
    assert segment_writer._encode_json_string is compiled.json_string


@settings(max_examples=400, deadline=None)
@given(text=st.one_of(st.text(), st.text(st.characters(max_codepoint=0x7F)), st.sampled_from(JSON_TEXTS)))
def test_json_string_is_encode_basestring(text: str) -> None:
    import json

    compiled = inversion._compiled
    if compiled is None:
        pytest.skip("weftsearch.native._inversion is not built")
    assert compiled.json_string(text) == json.encoder.encode_basestring(text)


def test_json_string_refuses_what_is_not_a_str() -> None:
    compiled = inversion._compiled
    if compiled is None:
        pytest.skip("weftsearch.native._inversion is not built")
    for bad in (b"bytes", None, 3):
        with pytest.raises(TypeError, match="json_string\\(\\) takes a str"):
            compiled.json_string(bad)


def test_stored_records_are_those_of_json_dumps(monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    documents = [
        Document(key=f"k{i}", text=text, fields={"t": text, "n": i}, time=None if i % 2 else 1.5 * i)
        for i, text in enumerate(JSON_TEXTS[:-1])  # a lone surrogate cannot be stored (no UTF-8)
    ]
    compiled = [segment_writer.stored_record(document) for document in documents]
    for document, record in zip(documents, compiled, strict=True):
        expected = json.dumps(
            {"fields": dict(document.fields), "text": document.text, "time": document.timestamp},
            ensure_ascii=False,
            sort_keys=True,
            separators=(",", ":"),
        ).encode("utf-8")
        assert record == expected
    monkeypatch.setattr(segment_writer, "_encode_json_string", json.encoder.encode_basestring)
    assert [segment_writer.stored_record(document) for document in documents] == compiled
