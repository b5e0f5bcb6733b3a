"""A segment's postings inverted in C (``_inversion.c``): term counts to postings sorted by (term, doc).

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

from collections.abc import Callable, Mapping, Sequence
from types import ModuleType

import numpy as np

from weftsearch.native.loader import load_extension
from weftsearch.storage.segment_writer import InvertedPostings, use_inversion

__all__ = ["invert", "DOCUMENTS_PER_CALL"]

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


# The segment writer inverts with this from now on (storage cannot import native: see use_inversion).
use_inversion(invert if _compiled is not None else None)
