"""A segment's postings inverted in C (``_inversion.c``): term counts to postings sorted by (term, doc).

(And the stored records' JSON strings: ``json_string``, handed to the writer by
:func:`~weftsearch.storage.segment_writer.use_json_string`.)

:func:`invert` takes the documents' term counts (and positions) in local-id
order and returns the vocabulary sorted and the postings grouped by term,
local ids ascending within a term, with each posting's positions in that
order: what the segment writer's Python path (flatten, map to term ids,
argsort by term and doc) gives, with no Python step or object per posting.
``None`` means "use the Python path": the compiled module is not built, is
switched off (``WEFTSEARCH_NO_COMPILED_INVERSION``) or failed its self-check,
or the input holds something it leaves to Python (a mapping that is not a
dict, a term that is not a str, a tf outside 1 .. 2**32 - 1, a positions run
not as long as its tf, a term that is not valid UTF-8, ...), so the Python
path gives its own result or error.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from weftsearch.native.loader import load_extension
from weftsearch.storage.postings import (
    PackedPostings,
    PostingsDecodeError,
    pack_postings,
    unpack_checked,
    use_packing,
    use_unpacking,
)
from weftsearch.storage.segment import use_term_search
from weftsearch.storage.segment_writer import InvertedPostings, use_inversion, use_json_string

__all__ = ["invert", "pack", "unpack", "DOCUMENTS_PER_CALL"]

#: Documents handed to C per call (the caller's ``pause`` runs between calls, so no call holds
#: the GIL long; the sort and the counting sort then run without it).
DOCUMENTS_PER_CALL = 1024


def _reference(
    term_maps: Sequence[Mapping[str, int]], position_maps: Sequence[Mapping[str, Sequence[int]]] | None
) -> tuple[list[str], list[int], list[int], list[int], list[int] | None]:
    """The same inversion, in plain Python (the self-check's reference)."""
    vocabulary = sorted({term for terms in term_maps for term in terms})
    postings = sorted((term, doc, tf) for doc, terms in enumerate(term_maps) for term, tf in terms.items())
    offsets = [0]
    for term in vocabulary:
        offsets.append(offsets[-1] + sum(1 for p in postings if p[0] == term))
    positions = None
    if position_maps is not None:
        positions = [at for term, doc, _ in postings for at in position_maps[doc][term]]
    return vocabulary, offsets, [p[1] for p in postings], [p[2] for p in postings], positions


def _agrees(module: ModuleType) -> bool:
    """The compiled inversion against :func:`_reference` on a sample (non-ASCII terms, an empty document)."""
    term_maps = [
        {"b": 2, "\u00e9t\u00e9": 1, "a": 1},
        {},
        {"a": 3, "z": 1, "B": 1},
        {"\U0001f600": 1, "b": 1},
    ]
    position_maps = [
        {"b": [0, 3], "\u00e9t\u00e9": [1], "a": [2]},
        {},
        {"a": [0, 1, 4], "z": [2], "B": [3]},
        {"\U0001f600": [0], "b": [1]},
    ]
    for positions in (None, position_maps):
        got = _run(module, term_maps, positions, lambda: None)
        want = _reference(term_maps, positions)
        if (
            got.vocabulary != want[0]
            or got.offsets.tolist() != want[1]
            or got.ids.tolist() != want[2]
            or got.tfs.tolist() != want[3]
            or (None if got.positions is None else got.positions.tolist()) != want[4]
        ):
            return False
    return _packs_as_numpy(module)


def _json_strings_agree(module: ModuleType) -> bool:
    """The compiled ``json_string`` against ``json.encoder.encode_basestring`` on samples."""
    if not hasattr(module, "json_string"):
        return False  # built before it existed
    samples = (
        *("", "plain ascii", 'q"b\\s\n\r\t\b\f\x00\x1f\x7f'),
        *("\u00e9t\u00e9\t", "\u6771\x01", '\U0001f600"', "\ud800 lone"),
    )
    return all(module.json_string(text) == json.encoder.encode_basestring(text) for text in samples)


def _sample_postings() -> tuple[
    NDArray[np.uint32], NDArray[np.uint32], NDArray[np.uint64], NDArray[np.uint32]
]:
    """Ids, tfs, offsets and lengths with full and partial blocks and widths 0 to 32 (the self-checks')."""
    rng = np.random.default_rng(20261207)
    lengths = np.asarray(rng.integers(0, 2**32, size=5000, dtype=np.uint64)).astype(np.uint32)
    lengths[-1] = 7
    terms = [
        np.sort(rng.choice(5000, size=size, replace=False)).astype(np.uint32)
        for size in (1, 128, 300, 5000, 2)
    ]
    ids = np.concatenate(terms)
    tfs = np.asarray(rng.integers(1, 4, size=ids.shape[0], dtype=np.uint64)).astype(np.uint32)
    tfs[:200] = np.asarray(rng.integers(1, 2**32, size=200, dtype=np.uint64)).astype(np.uint32)
    offsets = np.zeros(len(terms) + 1, dtype=np.uint64)
    np.cumsum([t.shape[0] for t in terms], out=offsets[1:])
    return ids, tfs, offsets, lengths


def _packs_as_numpy(module: ModuleType) -> bool:
    """The compiled packing against numpy's on a sample: full and partial blocks, widths 0 to 32."""
    ids, tfs, offsets, lengths = _sample_postings()
    want = pack_postings(ids, tfs, offsets, lengths)  # numpy: the packing is not handed over yet
    got = module.pack(ids, tfs, offsets, lengths)
    wanted: tuple[NDArray[Any], ...] = (want.block_offsets, want.blocks, want.data_offsets, want.data)
    return all(
        np.frombuffer(g, dtype=w.dtype).tobytes() == w.tobytes() for g, w in zip(got, wanted, strict=True)
    )


def _decoding_verdict(
    run: Callable[..., tuple[Any, Any, Any]], arguments: tuple[Any, ...], module: ModuleType
) -> object:
    """``run(*arguments)``'s ids and tfs as bytes and its table verdict, or its refusal's message."""
    try:
        ids, tfs, agrees = run(*arguments)
    except (PostingsDecodeError, module.DecodeError) as exc:
        return str(exc)
    return bytes(ids), bytes(tfs), agrees


def _unpacks_as_numpy(module: ModuleType) -> bool:
    """The compiled decoding against numpy's on the packed sample, whole and damaged.

    Same postings and table verdict on the sample, and the same message for
    each of a damaged width, a dirty tail bit, an id past the documents and
    a changed max tf (the table verdict).
    """
    if not hasattr(module, "unpack"):
        return False  # built before it existed
    ids, tfs, offsets, lengths = _sample_postings()
    packed = pack_postings(ids, tfs, offsets, lengths)
    cuts = (
        offsets.astype(np.int64),
        packed.block_offsets.astype(np.int64),
        packed.data_offsets.astype(np.int64),
    )
    cases: list[tuple[NDArray[np.uint32], NDArray[np.uint32], int]] = [(packed.data, packed.blocks, 5000)]
    blocks = packed.blocks.copy()
    blocks[3] |= 1 << 16  # the first term's one block: a stray width bit
    cases.append((packed.data, blocks, 5000))
    blocks = packed.blocks.copy()
    blocks[1] += 1  # its max tf: decodes, but the table disagrees
    cases.append((packed.data, blocks, 5000))
    cases.append((packed.data, packed.blocks, int(ids.max())))  # ids past the documents
    data = packed.data.copy()
    data[-1] |= np.uint32(1 << 31)  # the last run's unused high bit
    cases.append((data, packed.blocks, 5000))
    for words, table, n_docs in cases:
        arguments = (words, *cuts[:2], table, cuts[2], n_docs, lengths)
        # numpy's verdict: the decoding is not handed over yet
        if _decoding_verdict(unpack_checked, arguments, module) != _decoding_verdict(
            module.unpack, arguments, module
        ):
            return False
    return True


def _term_search_agrees(module: ModuleType) -> bool:
    """The compiled ``lower_bound`` against ``bisect`` on a sorted table of UTF-8 terms.

    Needles: every term, each term's prefixes and a byte more, the empty
    needle, one past the last term and one before the first; tables of 0, 1
    and several terms (non-ASCII, a term the prefix of another).
    """
    if not hasattr(module, "lower_bound"):
        return False  # built before it existed
    words = sorted({"", "a", "ab", "abc", "b", "\u00e9t\u00e9", "\u00e9", "z", "zz", "\U0001f600", "\x7f"})
    for terms in ([], ["m"], words):
        raw = [term.encode("utf-8") for term in terms]
        blob = np.frombuffer(b"".join(raw), dtype=np.uint8)
        offsets = np.zeros(len(raw) + 1, dtype=np.uint64)
        np.cumsum([len(term) for term in raw], out=offsets[1:])
        needles = {b"", b"\x00", b"\xff\xff", *(term[:cut] for term in raw for cut in range(len(term) + 1))}
        needles |= {term + b"\x00" for term in raw}
        for needle in needles:
            if module.lower_bound(blob, offsets, needle) != bisect.bisect_left(raw, needle):
                return False
    return True


def _run(
    module: ModuleType,
    term_maps: Sequence[Mapping[str, int]],
    position_maps: Sequence[Mapping[str, Sequence[int]]] | None,
    pause: Callable[[], None],
) -> InvertedPostings:
    inverter = module.Inverter()
    # At least one call, so an empty batch still says whether positions are kept.
    for start in range(0, max(len(term_maps), 1), DOCUMENTS_PER_CALL):
        end = start + DOCUMENTS_PER_CALL
        inverter.add(
            list(term_maps[start:end]), None if position_maps is None else list(position_maps[start:end])
        )
        pause()
    vocabulary, offsets, ids, tfs, positions = inverter.finish()
    return InvertedPostings(
        vocabulary,
        np.frombuffer(offsets, dtype=np.uint64),
        np.frombuffer(ids, dtype=np.uint32),
        np.frombuffer(tfs, dtype=np.uint32),
        None if positions is None else np.frombuffer(positions, dtype=np.int64),
    )


#: The compiled module, or ``None`` (not built, switched off, or its self-check disagreed).
_compiled: ModuleType | None = load_extension("_inversion", _agrees)


def invert(
    term_maps: Sequence[Mapping[str, int]],
    position_maps: Sequence[Mapping[str, Sequence[int]]] | None = None,
    pause: Callable[[], None] = lambda: None,
) -> InvertedPostings | None:
    """The postings of ``term_maps`` (one term -> tf dict per document, local-id order), inverted in C.

    ``position_maps``: per document, term -> its positions (as many as its tf),
    or ``None`` (positions not kept). ``pause`` is called between slices of
    :data:`DOCUMENTS_PER_CALL` documents. Returns ``None`` where the Python
    path must run (see the module docstring). O(P + V log V) for P postings, V terms.
    """
    if _compiled is None:
        return None
    try:
        return _run(_compiled, term_maps, position_maps, pause)
    except _compiled.UnsupportedInputError:
        return None


def pack(
    ids: NDArray[Any], tfs: NDArray[Any], offsets: NDArray[Any], lengths: NDArray[Any]
) -> PackedPostings | None:
    """The postings' blocks packed in C, as :func:`~weftsearch.storage.postings.pack_postings` packs them.

    ``None`` where numpy must run: the module is off, the arrays are not
    ``uint32`` ids, tfs and lengths and ``uint64`` offsets, or they hold what
    the C code leaves to numpy (ids not strictly ascending within a term or
    past ``len(lengths)``, a tf of 0, offsets not from 0 and ascending).
    Runs without the GIL. O(P + V).
    """
    if _compiled is None:
        return None
    arrays = (ids, tfs, offsets, lengths)
    if any(a.dtype != d for a, d in zip(arrays, _PACK_DTYPES, strict=True)) or any(
        a.ndim != 1 for a in arrays
    ):
        return None
    try:
        block_offsets, blocks, data_offsets, data = _compiled.pack(*map(np.ascontiguousarray, arrays))
    except _compiled.UnsupportedInputError:
        return None
    return PackedPostings(
        np.frombuffer(block_offsets, dtype=np.uint64),
        np.frombuffer(blocks, dtype=np.uint32),
        np.frombuffer(data_offsets, dtype=np.uint64),
        np.frombuffer(data, dtype=np.uint32),
    )


_PACK_DTYPES = (np.dtype(np.uint32), np.dtype(np.uint32), np.dtype(np.uint64), np.dtype(np.uint32))


def unpack(
    data: NDArray[Any],
    offsets: NDArray[Any],
    block_offsets: NDArray[Any],
    blocks: NDArray[Any],
    data_offsets: NDArray[Any],
    n_docs: int,
    lengths: NDArray[Any] | None,
) -> tuple[NDArray[np.uint32], NDArray[np.uint32], bool | None] | None:
    """Postings decoded and checked in C, as :func:`~weftsearch.storage.postings.unpack_checked` does.

    ``lengths`` ``None``: :func:`~weftsearch.storage.postings.unpack_postings`
    (the verdict is ``None``). ``None`` where numpy must run: the module is off,
    or the words and table are not ``uint32`` or fewer lengths than ``n_docs``.
    One pass over the postings, without the GIL; the outputs are sized by the
    block table, whose size is checked first. O(postings).

    Raises:
        PostingsDecodeError: the postings do not decode (numpy's message).

    """
    if _unpacking_module is None:
        return None
    if (
        data.dtype != np.uint32
        or blocks.dtype != np.uint32
        or (lengths is not None and lengths.dtype != np.uint32)
    ):
        return None
    cuts = [
        np.ascontiguousarray(np.asarray(cut).astype(np.int64, copy=False))
        for cut in (offsets, block_offsets, data_offsets)
    ]
    try:
        ids, tfs, agrees = _unpacking_module.unpack(
            np.ascontiguousarray(data),
            cuts[0],
            cuts[1],
            np.ascontiguousarray(blocks),
            cuts[2],
            n_docs,
            None if lengths is None else np.ascontiguousarray(lengths),
        )
    except _unpacking_module.UnsupportedInputError:
        return None
    except _unpacking_module.DecodeError as exc:
        raise PostingsDecodeError(str(exc)) from None
    return np.frombuffer(ids, dtype=np.uint32), np.frombuffer(tfs, dtype=np.uint32), agrees


#: The compiled module when its decoding agrees with numpy's (:func:`_unpacks_as_numpy`), else ``None``.
_unpacking_module: ModuleType | None = (
    _compiled if _compiled is not None and _unpacks_as_numpy(_compiled) else None
)

# The segment writer inverts and packs with these from now on (storage cannot import native:
# see use_inversion).
use_inversion(invert if _compiled is not None else None)
use_packing(pack if _compiled is not None else None)
use_unpacking(unpack if _unpacking_module is not None else None)
use_term_search(_compiled.lower_bound if _compiled is not None and _term_search_agrees(_compiled) else None)
use_json_string(_compiled.json_string if _compiled is not None and _json_strings_agree(_compiled) else None)
