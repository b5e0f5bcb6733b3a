"""Compressed postings (format version 3): blocks of 128, delta-coded ids, bit-packed.

Layout (docs/FORMAT.md, "Compressed postings"). A term's postings are cut into
blocks of :data:`POSTINGS_BLOCK` (the last block of a term may be shorter).
Per block the table ``post.blocks`` holds four ``<u4`` values, stored per term
as four runs (all lasts, all max tfs, all min lengths, all widths): the last
local id, the largest tf, the smallest document length, and the two bit widths
``w_id | w_tf << 8`` (each 0..32, the other bits zero). ``post.data`` (``<u4``
words) holds, block after block, ``ceil(c * w_id / 32)`` words of id gaps
(``id - previous id - 1``; the previous id of a term's first posting is -1, so
a block's base is the previous block's last id, its frame of reference) then
``ceil(c * w_tf / 32)`` words of ``tf - 1``, value ``i`` of a run at bits
``i * w ..< (i + 1) * w`` counted from the low bit of the first word (a value
may straddle two words). ``c`` is the block's postings (128 but for a term's
last block). The widths are the smallest that hold the block's values, so a
writer has one encoding only (deterministic bytes) and a reader can re-derive
the whole table from the decoded postings and compare it bit for bit.

A full block's runs are ``4 * w`` words: every block starts on a word, so a
block is decoded without its neighbours (the compiled BM25 decodes only the
blocks it scores, and finds a block's words from the widths of the blocks
before it in the term). The last, partial block uses the same packing with
fewer values (the "simpler coding" it could have had would save at most a
word, and one decoder serves every block).

Why not a codec from PyPI: the maintained SIMD codecs (FastPFor, streamvbyte)
are C++ or C libraries whose Python bindings are sdists (no wheels for this
platform) exposing whole-array calls to Python only; the BM25 kernel must
decode one block in C without the GIL and without a second native dependency,
and the numpy path must decode without a compiler. Frame-of-reference
bit-packing per block of 128 is the scheme those codecs vectorise (BP128); the
loops here and in ``_bm25.c`` are plain, and the compiler unrolls the
fixed-width ones.

Everything here is vectorised numpy: no Python runs per posting or per block.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from weftsearch.storage.pausing import Pause, no_pause, slices

__all__ = [
    "POSTINGS_BLOCK",
    "PackedPositions",
    "pack_positions",
    "positions_chunks",
    "join_offsets",
    "split_offsets",
    "position_codes",
    "unpack_positions",
    "BLOCK_ROWS",
    "PackedPostings",
    "PostingsDecodeError",
    "unpack_checked",
    "use_unpacking",
    "bit_widths",
    "derive_blocks",
    "pack_postings",
    "Packing",
    "use_packing",
    "unpack_postings",
]

#: Postings per block (the compiled BM25's WEFT_BLOCK is the same number; see
#: ``native/bm25.py`` for why 128).
POSTINGS_BLOCK = 128

#: Values per block in ``post.blocks``: last id, max tf, min length, widths.
BLOCK_ROWS = 4

#: Blocks handled per slice (bounds the temporaries: about 2M postings, some 100 MB
#: of int64 scratch at most, and lets a pausing writer pause between slices).
_BLOCK_SLICE = 16_384


class PostingsDecodeError(ValueError):
    """Compressed postings that do not decode (the reader turns it into ``CorruptIndexError``)."""


@dataclass(frozen=True, slots=True)
class PackedPostings:
    """One segment's postings as format version 3 stores them.

    Attributes:
        block_offsets: ``<u8`` x (V + 1): term t's blocks are ``block_offsets[t] ..< block_offsets[t+1]``.
        blocks: ``<u4`` x 4B: per term, at ``4 * block_offsets[t]``, its blocks' last ids,
            max tfs, min lengths and widths (``w_id | w_tf << 8``).
        data_offsets: ``<u8`` x (V + 1): term t's words are ``data[data_offsets[t] ..< data_offsets[t+1]]``.
        data: ``<u4`` x W: the packed blocks.

    """

    block_offsets: NDArray[np.uint64]
    blocks: NDArray[np.uint32]
    data_offsets: NDArray[np.uint64]
    data: NDArray[np.uint32]


def bit_widths(values: NDArray[Any]) -> NDArray[np.int64]:
    """Bits needed for each non-negative integer below 2^53 (0 for 0): ``int.bit_length`` elementwise.

    ``frexp`` gives ``x = m * 2^e`` with ``0.5 <= m < 1`` for an exactly
    representable ``x > 0``, so ``e`` is the bit length, exactly.
    """
    return np.frexp(np.asarray(values, dtype=np.float64))[1].astype(np.int64)


def _block_geometry(offsets: NDArray[Any]) -> tuple[NDArray[np.int64], ...]:
    """Per-term block counts and first blocks; per block (global order): term, index in term, start, end."""
    bounds = offsets.astype(np.int64)
    per_term = (np.diff(bounds) + (POSTINGS_BLOCK - 1)) // POSTINGS_BLOCK
    first_block = np.zeros(per_term.shape[0] + 1, dtype=np.int64)
    np.cumsum(per_term, out=first_block[1:])
    total = int(first_block[-1])
    term_of = np.repeat(np.arange(per_term.shape[0], dtype=np.int64), per_term)
    within = np.arange(total, dtype=np.int64) - first_block[:-1][term_of]
    starts = bounds[:-1][term_of] + POSTINGS_BLOCK * within
    ends = np.minimum(starts + POSTINGS_BLOCK, bounds[1:][term_of])
    return per_term, first_block, term_of, within, starts, ends


def _gaps(ids: NDArray[Any], low: int, high: int, term_firsts: NDArray[np.int64]) -> NDArray[np.int64]:
    """Gaps ``id - previous id - 1`` of postings ``low ..< high``; -1 precedes ``term_firsts`` (absolute)."""
    part = ids[low:high].astype(np.int64)
    previous = np.empty_like(part)
    previous[1:] = part[:-1]
    previous[:1] = -1
    previous[term_firsts - low] = -1
    return part - previous - 1


def derive_blocks(
    ids: NDArray[Any],
    tfs: NDArray[Any],
    offsets: NDArray[Any],
    lengths: NDArray[Any],
    pause: Pause = no_pause,
) -> tuple[NDArray[np.uint64], NDArray[np.uint32]]:
    """The block table of postings laid out as a segment lays them out (four rows per block).

    Term ``t``'s postings ``offsets[t] ..< offsets[t+1]`` of ``ids`` (local
    ids, ascending within a term, each ``< len(lengths)``) and ``tfs`` (>= 1)
    are cut into blocks of :data:`POSTINGS_BLOCK`. Returns ``block_offsets``
    and ``blocks`` as :class:`PackedPostings` holds them: per term its last
    ids, max tfs, min lengths, then widths (``w_id | w_tf << 8``, the
    smallest that hold the block's id gaps and ``tf - 1``).

    The writer, the reader's first-use check and scrub all call this one
    function. Vectorised (``reduceat`` over block starts), slice by slice. O(P + V).
    """
    per_term, first_block, term_of, within, starts, ends = _block_geometry(offsets)
    total = int(first_block[-1])
    block_offsets = first_block.astype(np.uint64)
    blocks = np.empty(BLOCK_ROWS * total, dtype=np.uint32)
    if not total:
        return block_offsets, blocks
    at_last = BLOCK_ROWS * first_block[:-1][term_of] + within
    stride = per_term[term_of]
    for start, end in slices(total, _BLOCK_SLICE):
        # Blocks tile the postings (terms back to back), so blocks start ..< end are
        # exactly postings starts[start] ..< ends[end - 1], cut at their starts.
        low, high = int(starts[start]), int(ends[end - 1])
        cuts = starts[start:end] - low
        where = at_last[start:end]
        step = stride[start:end]
        # A slice starts on a block, so its first posting's gap needs the posting before it.
        gaps = _gaps(ids, low, high, starts[start:end][within[start:end] == 0])
        if low > 0 and within[start] != 0:
            gaps[0] -= int(ids[low - 1]) + 1
        max_tf = np.maximum.reduceat(tfs[low:high], cuts)
        blocks[where] = ids[ends[start:end] - 1]
        blocks[where + step] = max_tf
        blocks[where + 2 * step] = np.minimum.reduceat(lengths[ids[low:high]], cuts)
        width_id = bit_widths(np.maximum.reduceat(gaps, cuts))
        width_tf = bit_widths(max_tf.astype(np.int64) - 1)
        blocks[where + 3 * step] = (width_id | (width_tf << 8)).astype(np.uint32)
        pause()
    return block_offsets, blocks


def _block_words(counts: NDArray[np.int64], width_id: NDArray[np.int64], width_tf: NDArray[np.int64]) -> Any:
    """Words of each block's id run and of its tf run."""
    return (counts * width_id + 31) // 32, (counts * width_tf + 31) // 32


def _block_columns(
    block_offsets: NDArray[Any],
    blocks: NDArray[np.uint32],
    per_term: NDArray[np.int64],
    term_of: NDArray[np.int64],
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Per block in global order: last id, id width, tf width (read out of the per-term layout)."""
    first = block_offsets.astype(np.int64)[:-1]
    within = np.arange(term_of.shape[0], dtype=np.int64) - first[term_of]
    at_last = BLOCK_ROWS * first[term_of] + within
    stride = per_term[term_of]
    lasts = blocks[at_last].astype(np.int64)
    widths = blocks[at_last + 3 * stride].astype(np.int64)
    return lasts, widths & 0xFF, widths >> 8


#: Postings (ids, tfs, offsets, lengths) to their :class:`PackedPostings`, or ``None`` where the
#: numpy path must run (:func:`use_packing`).
Packing = Callable[[NDArray[Any], NDArray[Any], NDArray[Any], NDArray[Any]], "PackedPostings | None"]

#: The compiled packing, when one was given (:func:`use_packing`).
_packing: Packing | None = None


def use_packing(packing: Packing | None) -> None:
    """Pack postings with ``packing`` first (``None``: numpy alone).

    :mod:`weftsearch.native.inversion` gives its compiled one when it is
    imported (``import weftsearch`` does): storage does not import native.
    Whatever it is, it must give the bytes the numpy path gives.
    """
    global _packing
    _packing = packing


def pack_postings(
    ids: NDArray[Any],
    tfs: NDArray[Any],
    offsets: NDArray[Any],
    lengths: NDArray[Any],
    pause: Pause = no_pause,
) -> PackedPostings:
    """Compress postings laid out as :func:`derive_blocks` takes them. Deterministic. O(P + V).

    In C where it was given (:func:`use_packing`); else numpy: each value's
    bits are placed by a float64 ``bincount`` over word indices: the bit
    fields of one word are disjoint and the word is below 2^32, so the sum is
    exact and equals their OR.
    """
    if _packing is not None:
        compiled = _packing(ids, tfs, offsets, lengths)
        if compiled is not None:
            return compiled
    block_offsets, blocks = derive_blocks(ids, tfs, offsets, lengths, pause)
    per_term, first_block, term_of, within, starts, ends = _block_geometry(offsets)
    total = int(first_block[-1])
    _, width_id, width_tf = _block_columns(block_offsets, blocks, per_term, term_of)
    counts = ends - starts
    id_words, tf_words = _block_words(counts, width_id, width_tf)
    word_start = np.zeros(total + 1, dtype=np.int64)
    np.cumsum(id_words + tf_words, out=word_start[1:])
    words = int(word_start[-1])
    data = np.zeros(words, dtype=np.uint32)
    data_offsets = word_start[first_block].astype(np.uint64)
    for start, end in slices(total, _BLOCK_SLICE):
        low, high = int(starts[start]), int(ends[end - 1])
        if high == low:
            continue
        base = int(word_start[start])
        size = int(word_start[end]) - base
        block = np.repeat(np.arange(start, end, dtype=np.int64), counts[start:end])
        position = np.arange(low, high, dtype=np.int64) - starts[block]
        gaps_signed = _gaps(ids, low, high, starts[start:end][within[start:end] == 0])
        if low > 0 and within[start] != 0:
            gaps_signed[0] -= int(ids[low - 1]) + 1
        gaps = gaps_signed.astype(np.uint64)
        id_bits = (word_start[block] - base) * 32 + position * width_id[block]
        tf_bits = (word_start[block] + id_words[block] - base) * 32 + position * width_tf[block]
        packed = np.zeros(size + 1, dtype=np.float64)
        for values, bits in ((gaps, id_bits), (tfs[low:high].astype(np.uint64) - 1, tf_bits)):
            word = bits >> 5
            shift = (bits & 31).astype(np.uint64)
            low_part = (values << shift) & np.uint64(0xFFFFFFFF)
            high_part = values >> (np.uint64(32) - shift)  # 0 unless the value straddles two words
            packed += np.bincount(word, weights=low_part.astype(np.float64), minlength=size + 1)[: size + 1]
            packed += np.bincount(word + 1, weights=high_part.astype(np.float64), minlength=size + 2)[
                : size + 1
            ]
        data[base : base + size] = packed[:size].astype(np.uint32)
        pause()
    return PackedPostings(block_offsets, blocks, data_offsets, data)


#: A compiled :func:`unpack_postings` (its arguments, then ``lengths`` or ``None``): ``(ids, tfs,
#: agrees)`` with ``agrees`` as :func:`unpack_checked` gives it (``None`` without lengths), or
#: ``None`` where numpy must run. Raises :class:`PostingsDecodeError` as numpy does.
Unpacking = Callable[..., "tuple[NDArray[np.uint32], NDArray[np.uint32], bool | None] | None"]

#: The compiled decoding, when one was given (:func:`use_unpacking`).
_unpacking: Unpacking | None = None


def use_unpacking(unpacking: Unpacking | None) -> None:
    """Decode postings with ``unpacking`` first (``None``: numpy alone).

    :mod:`weftsearch.native.inversion` gives its compiled one when it is
    imported, as for :func:`use_packing`. Whatever it is, it must accept and
    refuse what the numpy path does, with the same message, and give the same
    postings.
    """
    global _unpacking
    _unpacking = unpacking


def unpack_checked(
    data: NDArray[np.uint32],
    offsets: NDArray[Any],
    block_offsets: NDArray[Any],
    blocks: NDArray[np.uint32],
    data_offsets: NDArray[Any],
    n_docs: int,
    lengths: NDArray[np.uint32],
) -> tuple[NDArray[np.uint32], NDArray[np.uint32], bool]:
    """:func:`unpack_postings`, and whether ``blocks`` equals :func:`derive_blocks` of the result.

    The reader's first-use check of a term and scrub's: a table that decodes but
    whose max tfs, min lengths (``lengths``: each local document's, at least
    ``n_docs``) or widths are not the postings' would let the block-max walk
    skip a block it must score. In C where it was given (one pass, no GIL),
    else numpy. O(postings).

    Raises:
        PostingsDecodeError: the postings do not decode as their table says.

    """
    if _unpacking is not None:
        compiled = _unpacking(data, offsets, block_offsets, blocks, data_offsets, n_docs, lengths)
        if compiled is not None:
            return compiled[0], compiled[1], bool(compiled[2])
    ids, tfs = _unpack_numpy(data, offsets, block_offsets, blocks, data_offsets, n_docs)
    rebased = np.asarray(offsets, dtype=np.int64) - int(offsets[0])
    derived = derive_blocks(ids, tfs, rebased, lengths)[1]
    return ids, tfs, bool(np.array_equal(blocks, derived))


def unpack_postings(
    data: NDArray[np.uint32],
    offsets: NDArray[Any],
    block_offsets: NDArray[Any],
    blocks: NDArray[np.uint32],
    data_offsets: NDArray[Any],
    n_docs: int,
) -> tuple[NDArray[np.uint32], NDArray[np.uint32]]:
    """Decode the postings of consecutive terms: their local ids and term frequencies.

    In C where it was given (:func:`use_unpacking`), else numpy: the same
    checks, messages and results (see :func:`_unpack_numpy`). O(postings).

    Raises:
        PostingsDecodeError: the postings do not decode as their table says.

    """
    if _unpacking is not None:
        compiled = _unpacking(data, offsets, block_offsets, blocks, data_offsets, n_docs, None)
        if compiled is not None:
            return compiled[0], compiled[1]
    return _unpack_numpy(data, offsets, block_offsets, blocks, data_offsets, n_docs)


def _unpack_numpy(
    data: NDArray[np.uint32],
    offsets: NDArray[Any],
    block_offsets: NDArray[Any],
    blocks: NDArray[np.uint32],
    data_offsets: NDArray[Any],
    n_docs: int,
) -> tuple[NDArray[np.uint32], NDArray[np.uint32]]:
    """Decode the postings of consecutive terms: their local ids and term frequencies.

    ``offsets``, ``block_offsets`` and ``data_offsets`` are (T + 1)-long cuts
    of the terms (each may start above 0: they are rebased), ``blocks`` and
    ``data`` the matching slices of ``post.blocks`` and ``post.data``. Every
    width, size and id is checked before it is used: widths above 32 or with
    stray bits, a term whose blocks need other than its words, ids that run
    past ``n_docs`` or past 2^32, a block whose last id is not the stored one,
    a tf of 2^32: :class:`PostingsDecodeError`, never a read out of range.
    The rest of the table (max tf, min length, exact widths) is the caller's
    to compare against :func:`derive_blocks` of the result. O(postings).

    Raises:
        PostingsDecodeError: the postings do not decode as their table says.

    """
    offsets = offsets.astype(np.int64) - int(offsets[0])
    block_offsets = block_offsets.astype(np.int64) - int(block_offsets[0])
    data_offsets = data_offsets.astype(np.int64) - int(data_offsets[0])
    if bool(np.any(np.diff(offsets) < 0)):
        # A term of fewer than 0 postings would round up to 0 blocks and pass as empty.
        raise PostingsDecodeError("block offsets disagree with the postings counts")
    per_term, first_block, term_of, _, starts, ends = _block_geometry(offsets)
    if not np.array_equal(first_block, block_offsets):
        raise PostingsDecodeError("block offsets disagree with the postings counts")
    total = int(first_block[-1])
    if blocks.shape[0] != BLOCK_ROWS * total or int(data_offsets[-1]) != data.shape[0]:
        raise PostingsDecodeError("the block table or the data has the wrong size")
    count = int(offsets[-1])
    if not total:
        return np.empty(0, np.uint32), np.empty(0, np.uint32)
    lasts, width_id, width_tf = _block_columns(block_offsets.astype(np.uint64), blocks, per_term, term_of)
    widths_raw = np.asarray(width_id | (width_tf << 8))
    if int(width_id.max()) > 32 or int(width_tf.max()) > 32 or bool(np.any(widths_raw >> 16)):
        raise PostingsDecodeError("a block's bit width is above 32")
    counts = ends - starts
    id_words, tf_words = _block_words(counts, width_id, width_tf)
    word_start = np.zeros(total + 1, dtype=np.int64)
    np.cumsum(id_words + tf_words, out=word_start[1:])
    if not np.array_equal(word_start[first_block], data_offsets):
        raise PostingsDecodeError("a term's blocks do not fill its words")
    # Bits past a run's last value (in its last word) are zero: the writer leaves them so, and
    # a reader that let them vary would accept a file that scrub cannot tell from the original.
    for run_start, run_words, width in (
        (word_start[:-1], id_words, width_id),
        (word_start[:-1] + id_words, tf_words, width_tf),
    ):
        used = (counts * width) & 31
        ragged = np.flatnonzero((run_words > 0) & (used > 0))
        if ragged.shape[0]:
            tail = data[run_start[ragged] + run_words[ragged] - 1].astype(np.uint64)
            if bool(np.any(tail >> used[ragged].astype(np.uint64))):
                raise PostingsDecodeError("bits past a block's last value are not zero")
    padded = np.zeros(data.shape[0] + 2, dtype=np.uint64)  # a 0-bit run at the end reads 2 past
    padded[: data.shape[0]] = data
    block = np.repeat(np.arange(total, dtype=np.int64), counts)
    position = np.arange(count, dtype=np.int64) - starts[block]

    def unpack(bits: NDArray[np.int64], width: NDArray[np.int64]) -> NDArray[np.uint64]:
        word = bits >> 5
        shift = (bits & 31).astype(np.uint64)
        value = (padded[word] >> shift) | (
            (padded[word + 1] << (np.uint64(32) - shift)) & np.uint64(0xFFFFFFFF)
        )
        masked: NDArray[np.uint64] = value & ((np.uint64(1) << width.astype(np.uint64)) - np.uint64(1))
        return masked

    gaps = unpack(word_start[block] * 32 + position * width_id[block], width_id[block]).astype(np.int64)
    tf_less = unpack((word_start[block] + id_words[block]) * 32 + position * width_tf[block], width_tf[block])
    # ids = running sum of (gap + 1) within each term, from -1.
    steps = np.cumsum(gaps + 1)
    present = per_term > 0
    term_first = offsets[:-1][present]
    base = np.where(term_first > 0, steps[np.maximum(term_first - 1, 0)], 0)
    ids = steps - np.repeat(base, np.diff(offsets)[present]) - 1
    if int(ids.max()) >= min(n_docs, 1 << 32) or not np.array_equal(ids[ends - 1], lasts):
        raise PostingsDecodeError("ids run past the documents or past their blocks' last ids")
    if int(tf_less.max()) >= 0xFFFFFFFF:
        raise PostingsDecodeError("a term frequency is 2^32")
    return ids.astype(np.uint32), (tf_less + np.uint64(1)).astype(np.uint32)


# ---------------------------------------------------------------------------- positions
#
# A term's positions (docs/FORMAT.md, "Positions"), in posting order: per posting its tf
# positions, ascending, coded as the first position itself, then each gap less one
# (``p_i - p_(i-1) - 1``). A term's values are cut into chunks of POSTINGS_BLOCK (across
# posting boundaries; the last chunk of a term shorter), each bit-packed at the smallest width
# that holds its values, exactly as a block's id run is. A term's words hold its chunks from
# its first word (a full chunk is 4 * width words, so every chunk starts on a word), then zero
# bits, then its chunks' widths, one byte each, as the term's last bytes: the term takes the
# fewest words that hold both. Its chunk count is ceil(positions / 128), and its positions are
# the sum of its postings' tfs, so nothing but the term's first word (``pos.data_offsets``) and
# its CRC32C (``pos.crc``) is stored beside the words.


def _pack_runs(
    values: NDArray[np.uint64],
    starts: NDArray[np.int64],
    ends: NDArray[np.int64],
    widths: NDArray[np.int64],
    run_word: NDArray[np.int64],
    words: int,
) -> NDArray[np.uint32]:
    """``words`` words holding runs ``values[starts[r]:ends[r]]`` at ``widths[r]`` bits, from ``run_word[r]``.

    Runs must not overlap (words between them stay zero). The float64
    ``bincount`` of :func:`pack_postings`: the bit fields of one word are
    disjoint and below 2^32, so the sum is exact and equals their OR.
    """
    counts = ends - starts
    data = np.zeros(words, dtype="<u4")  # little-endian: its bytes are the file's (the widths are bytes)
    for low_run, high_run in slices(counts.shape[0], _BLOCK_SLICE):
        low, high = int(starts[low_run]), int(ends[high_run - 1])
        if high == low:
            continue
        base = int(run_word[low_run])
        size = int(run_word[high_run - 1] + (counts[high_run - 1] * widths[high_run - 1] + 31) // 32) - base
        run = np.repeat(np.arange(low_run, high_run, dtype=np.int64), counts[low_run:high_run])
        bits = (run_word[run] - base) * 32 + (np.arange(low, high, dtype=np.int64) - starts[run]) * widths[
            run
        ]
        word = bits >> 5
        shift = (bits & 31).astype(np.uint64)
        part = values[low:high]
        packed = np.bincount(
            word, weights=((part << shift) & np.uint64(0xFFFFFFFF)).astype(np.float64), minlength=size + 1
        )[: size + 1]
        packed += np.bincount(
            word + 1, weights=(part >> (np.uint64(32) - shift)).astype(np.float64), minlength=size + 2
        )[: size + 1]
        data[base : base + size] |= packed[:size].astype(np.uint32)
    return data


def _unpack_runs(
    data: NDArray[np.uint32],
    starts: NDArray[np.int64],
    ends: NDArray[np.int64],
    widths: NDArray[np.int64],
    run_word: NDArray[np.int64],
) -> NDArray[np.uint64]:
    """The values :func:`_pack_runs` packed (sizes checked by the caller). O(values)."""
    counts = ends - starts
    total = int(ends[-1] - starts[0]) if counts.shape[0] else 0
    padded = np.zeros(data.shape[0] + 2, dtype=np.uint64)
    padded[: data.shape[0]] = data
    run = np.repeat(np.arange(counts.shape[0], dtype=np.int64), counts)
    bits = run_word[run] * 32 + (np.arange(total, dtype=np.int64) + starts[0] - starts[run]) * widths[run]
    word = bits >> 5
    shift = (bits & 31).astype(np.uint64)
    value = (padded[word] >> shift) | ((padded[word + 1] << (np.uint64(32) - shift)) & np.uint64(0xFFFFFFFF))
    masked: NDArray[np.uint64] = value & ((np.uint64(1) << widths[run].astype(np.uint64)) - np.uint64(1))
    return masked


@dataclass(frozen=True, slots=True)
class PackedPositions:
    """One text field's positions as a segment stores them (docs/FORMAT.md, "Positions").

    Attributes:
        data_offsets: ``<u8`` x (V + 1): term t's words are ``data[data_offsets[t] ..< data_offsets[t+1]]``.
        data: ``<u4`` x W: per term its packed chunks, then its chunks' widths as its last bytes.

    """

    data_offsets: NDArray[np.uint64]
    data: NDArray[np.uint32]


def position_codes(positions: NDArray[Any], tfs: NDArray[Any]) -> NDArray[np.int64]:
    """Positions (runs of ``tfs``, ascending within a run) as stored: first of a run itself, then gap - 1."""
    values = np.asarray(positions, dtype=np.int64)
    codes = np.empty_like(values)
    if values.shape[0]:
        codes[0] = values[0]
        codes[1:] = values[1:] - values[:-1] - 1
        firsts = np.cumsum(np.asarray(tfs, dtype=np.int64)) - np.asarray(tfs, dtype=np.int64)
        codes[firsts] = values[firsts]
    return codes


def _term_words(chunk_bits: NDArray[np.int64], chunks: NDArray[np.int64], term_of: NDArray[np.int64]) -> Any:
    """Per term: the bits of its chunks, and the fewest words holding them then one byte per chunk."""
    bits = np.bincount(term_of, weights=chunk_bits.astype(np.float64), minlength=chunks.shape[0]).astype(
        np.int64
    )
    return bits, ((bits + 7) // 8 + chunks + 3) // 4


def _chunk_words(
    counts: NDArray[np.int64],
    widths: NDArray[np.int64],
    term_of: NDArray[np.int64],
    term_word: NDArray[np.int64],
) -> NDArray[np.int64]:
    """Each chunk's first word: its term's first word plus the words of the term's chunks before it."""
    words = (counts * widths + 31) // 32
    before = np.cumsum(words) - words  # words of every chunk before, in all terms
    first = np.flatnonzero(np.r_[True, term_of[1:] != term_of[:-1]]) if term_of.shape[0] else term_of
    into: NDArray[np.int64] = before - np.repeat(before[first], np.diff(np.r_[first, term_of.shape[0]]))
    return term_word[term_of] + into


def pack_positions(positions: NDArray[Any], tfs: NDArray[Any], term_offsets: NDArray[Any]) -> PackedPositions:
    """Compress the positions of postings laid out as :func:`derive_blocks` takes them. Deterministic.

    ``positions`` holds, posting after posting (term t's postings are
    ``term_offsets[t] ..< term_offsets[t+1]``), each posting's ``tf``
    positions, ascending. O(positions), vectorised.

    Raises:
        PostingsDecodeError: positions not ascending within a posting.

    """
    codes = position_codes(positions, tfs)
    if codes.shape[0] and int(codes.min()) < 0:
        raise PostingsDecodeError("positions are not ascending within a posting")
    cut = np.zeros(np.asarray(tfs).shape[0] + 1, dtype=np.int64)
    np.cumsum(np.asarray(tfs, dtype=np.int64), out=cut[1:])
    per_term = cut[np.asarray(term_offsets, dtype=np.int64)]  # cumulative positions at each term's start
    chunks, _, term_of, within, starts, ends = _block_geometry(per_term)
    widths = bit_widths(np.maximum.reduceat(codes, starts)) if starts.shape[0] else np.zeros(0, np.int64)
    counts = ends - starts
    _, term_words = _term_words(counts * widths, chunks, term_of)
    term_word = np.zeros(chunks.shape[0] + 1, dtype=np.int64)
    np.cumsum(term_words, out=term_word[1:])
    data = _pack_runs(
        codes.astype(np.uint64),
        starts,
        ends,
        widths,
        _chunk_words(counts, widths, term_of, term_word),
        int(term_word[-1]),
    )
    # The widths, as each term's last bytes (the chunks' bits end before them: _term_words).
    data.view(np.uint8)[4 * term_word[1:][term_of] - chunks[term_of] + within] = widths.astype(np.uint8)
    return PackedPositions(term_word.astype(np.uint64), data)


def positions_chunks(
    words: NDArray[np.uint32], positions: int
) -> tuple[NDArray[np.uint32], NDArray[np.uint8]]:
    """One term's packed chunks and their widths (views), from its words and its count of positions.

    For a term whose words :func:`unpack_positions` has accepted (so the
    layout holds): its ``ceil(positions / 128)`` widths are its last bytes,
    and the chunks take the words up to the last one's last value. O(chunks).
    """
    chunks = (positions + POSTINGS_BLOCK - 1) // POSTINGS_BLOCK
    raw = words.view(np.uint8)
    widths = raw[raw.shape[0] - chunks :]
    if not chunks:
        return words[:0], widths
    last = positions - POSTINGS_BLOCK * (chunks - 1)
    used = 4 * int(widths[:-1].astype(np.int64).sum()) + (last * int(widths[-1]) + 31) // 32
    return words[:used], widths


def unpack_positions(
    data: NDArray[np.uint32],
    tfs: NDArray[Any],
    lengths: NDArray[Any],
    term_offsets: NDArray[Any] | None = None,
    word_offsets: NDArray[Any] | None = None,
) -> tuple[NDArray[np.uint64], NDArray[np.uint32]]:
    """Decode the positions of consecutive terms: ``(starts, positions)`` for postings of ``tfs``.

    ``data`` is the terms' words (term t's ``word_offsets[t] ..<
    word_offsets[t+1]``, from 0), ``tfs`` their postings' frequencies (term
    t's postings ``term_offsets[t] ..< term_offsets[t+1]``, from 0; both
    ``None``: one term), ``lengths`` the field length of each posting's
    document. Posting j's positions are ``positions[starts[j]:starts[j+1]]``.
    Checked before use: every tf at most its document's length (which bounds
    what is allocated), widths at most 32, each term's words the fewest that
    hold its chunks and widths, zero bits between them, every position below
    its document's length. O(positions).

    Raises:
        PostingsDecodeError: the positions do not decode as their table says.

    """
    tf = np.asarray(tfs, dtype=np.int64)
    limit_of = np.asarray(lengths, dtype=np.int64)
    if limit_of.shape[0] != tf.shape[0] or bool(np.any(tf > limit_of)):
        raise PostingsDecodeError("a posting has more positions than its document has terms")
    starts = np.zeros(tf.shape[0] + 1, dtype=np.int64)
    np.cumsum(tf, out=starts[1:])
    total = int(starts[-1])
    cuts = (
        np.array([0, tf.shape[0]], np.int64) if term_offsets is None else np.asarray(term_offsets, np.int64)
    )
    bounds = (
        np.array([0, data.shape[0]], np.int64) if word_offsets is None else np.asarray(word_offsets, np.int64)
    )
    if bounds.shape[0] != cuts.shape[0] or int(bounds[0]) != 0 or int(bounds[-1]) != data.shape[0]:
        raise PostingsDecodeError("the terms' words do not cover the positions data")
    term_words = np.diff(bounds)
    chunks, _, term_of, within, chunk_starts, chunk_ends = _block_geometry(starts[cuts])
    if bool(np.any(term_words < 0)) or bool(np.any(4 * term_words < chunks)):
        raise PostingsDecodeError("a term's words cannot hold its chunks' widths")
    width = data.view(np.uint8)[4 * bounds[1:][term_of] - chunks[term_of] + within].astype(np.int64)
    if width.shape[0] and int(width.max()) > 32:
        raise PostingsDecodeError("a chunk's bit width is above 32")
    counts = chunk_ends - chunk_starts
    bits, expected = _term_words(counts * width, chunks, term_of)
    if not np.array_equal(expected, term_words):
        raise PostingsDecodeError("the chunks of positions do not fill their words")
    # Bits between a term's last value and its widths are zero: the writer leaves them so, and a
    # reader that let them vary would accept a file that scrub cannot tell from the original.
    gap_start = 32 * bounds[:-1] + bits
    gap = 32 * term_words - 8 * chunks - bits  # 0 ..< 32 (the fewest words)
    padded = np.zeros(data.shape[0] + 2, dtype=np.uint64)
    padded[: data.shape[0]] = data
    word, shift = gap_start >> 5, (gap_start & 31).astype(np.uint64)
    window = (padded[word] | (padded[word + 1] << np.uint64(32))) >> shift
    if bool(np.any(window & ((np.uint64(1) << gap.astype(np.uint64)) - np.uint64(1)))):
        raise PostingsDecodeError("bits between a term's last position and its widths are not zero")
    if not total:
        return starts.astype(np.uint64), np.empty(0, np.uint32)
    run_word = _chunk_words(counts, width, term_of, bounds)
    codes = _unpack_runs(data, chunk_starts, chunk_ends, width, run_word).astype(np.int64)
    steps = codes + 1
    present = tf > 0
    firsts = starts[:-1][present]
    steps[firsts] = codes[firsts]
    running = np.cumsum(steps)
    before = np.where(firsts > 0, running[np.maximum(firsts - 1, 0)], 0)
    # Each posting's run restarts from its own first position.
    positions = running - np.repeat(before, tf[present])
    limit = np.repeat(limit_of, tf)
    if bool(np.any(positions >= limit)):
        raise PostingsDecodeError("a position is at or past its document's length")
    return starts.astype(np.uint64), positions.astype(np.uint32)


# A field's term offsets into its positions words are stored as their low 32 bits, one ``<u4`` a
# term (``pos.data_offsets``), and the high part as the terms at which it grows (``pos.data_wraps``,
# ``<u8``: entry k is the first term at or past (k + 1) * 2^32 words), so a segment below 16 GiB of
# positions per field (all of them in practice) pays 4 bytes a term, and none has a limit.

#: The low part's modulus.
_WRAP = 1 << 32


def split_offsets(offsets: NDArray[Any]) -> tuple[NDArray[np.uint32], NDArray[np.uint64]]:
    """Non-decreasing word offsets as stored: ``(low 32 bits, the terms where the high part grows)``."""
    values = np.asarray(offsets, dtype=np.uint64)
    wraps = int(values[-1]) >> 32 if values.shape[0] else 0
    targets = np.arange(1, wraps + 1, dtype=np.uint64) << np.uint64(32)
    return (values & np.uint64(_WRAP - 1)).astype(np.uint32), np.searchsorted(values, targets).astype(
        np.uint64
    )


def join_offsets(low: NDArray[Any], wraps: NDArray[Any]) -> NDArray[np.uint64]:
    """The offsets :func:`split_offsets` split (the caller checks that they never decrease). O(V).

    Raises:
        PostingsDecodeError: the wrap points are not non-decreasing term numbers from 1 to ``len(low) - 1``.

    """
    points = np.asarray(wraps, dtype=np.uint64)
    if points.shape[0] and (
        int(points[0]) < 1 or int(points[-1]) >= low.shape[0] or bool(np.any(points[1:] < points[:-1]))
    ):
        raise PostingsDecodeError("the positions offsets' wrap points are not terms in order")
    high = np.searchsorted(points, np.arange(low.shape[0], dtype=np.uint64), side="right").astype(np.uint64)
    joined: NDArray[np.uint64] = np.asarray(low, dtype=np.uint64) + (high << np.uint64(32))
    return joined
