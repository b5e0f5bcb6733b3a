"""Merging segments: the live documents of several segments as one segment's columns.

:func:`merge_columns` moves postings, lengths, times and vectors as arrays and
copies stored records as bytes, term range by term range; the writer
(:mod:`weftsearch.storage.segment_writer`) turns its columns into the bytes a
fresh build of the same documents gives.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from weftsearch.errors import CorruptIndexError
from weftsearch.storage.codec import checksum
from weftsearch.storage.fields import FieldIndex
from weftsearch.storage.pausing import (
    SLICE,
    Pause,
    no_pause,
    slices,
    sorted_in_slices,
    strings_array,
)
from weftsearch.storage.postings import (
    BLOCK_ROWS,
    PostingsDecodeError,
    unpack_positions,
    unpack_postings,
)
from weftsearch.storage.segment import SegmentReader
from weftsearch.storage.segment_writer import FieldColumns, PostingsBuilder, SegmentColumns

__all__ = ["MERGE_CHUNK_POSTINGS", "merge_columns"]


#: Postings a merge decodes, gathers, sorts and re-encodes at a time (bounds its temporaries).
MERGE_CHUNK_POSTINGS = 1 << 19


#: Records a merge reads between two releases of the sources' pages (:meth:`SegmentReader.release_pages`).
_RELEASE_EVERY = 1 << 16


#: Compressed bytes a merge copies whole from its sources between two releases of their pages.
_RELEASE_COPIED = 64 << 20


class _GatheredRecords(Sequence[bytes]):
    """The stored records of merged documents, read (and checked) from the sources when asked.

    Holds two integers a document, never the records: a merge's
    :func:`segment_sections` reads them a slice at a time, or copies a
    source's compressed block whole where the merged block holds exactly its
    records (:class:`~weftsearch.storage.docstore.WholeBlocks`).
    """

    __slots__ = ("_copied", "_local", "_read", "_readers", "_source")

    def __init__(
        self, readers: Sequence[SegmentReader], source: NDArray[np.int32], local: NDArray[np.int64]
    ) -> None:
        self._readers = readers
        self._source = source
        self._local = local
        self._read = 0
        self._copied = 0

    def record_lengths_and_crcs(self) -> tuple[NDArray[np.int64], NDArray[np.uint32]]:
        """Every merged record's length and CRC32C, from the sources' record tables."""
        lengths = np.zeros(len(self), dtype=np.int64)
        crcs = np.zeros(len(self), dtype=np.uint32)
        for number, reader in enumerate(self._readers):
            mine = self._source == number
            source_lengths, source_crcs = reader.record_lengths_and_crcs()
            lengths[mine] = source_lengths[self._local[mine]]
            crcs[mine] = source_crcs[self._local[mine]]
        return lengths, crcs

    def whole_block(self, start: int, end: int) -> tuple[bytes, int, int] | None:
        """A source's compressed block if merged records ``start ..< end`` are exactly its records."""
        sources = self._source[start:end]
        number = int(sources[0])
        first = int(self._local[start])
        # One source, consecutive local ids (a deleted document in between breaks the run).
        if int(sources.min()) != number or int(sources.max()) != number:
            return None
        if int(self._local[end - 1]) - first != end - start - 1:
            return None
        reader = self._readers[number]
        found = reader.whole_stored_block(first, first + end - start)
        if found is not None:
            self._copied += len(found[0])
            if self._copied >= _RELEASE_COPIED:
                self._copied = 0
                for each in self._readers:
                    each.release_pages()
        return found

    def __len__(self) -> int:
        return int(self._source.shape[0])

    def __getitem__(self, item: Any) -> Any:
        if isinstance(item, slice):
            readers = self._readers
            sources = self._source[item]
            pairs = zip(sources.tolist(), self._local[item].tolist(), strict=True)
            records = [readers[source].record(local) for source, local in pairs]
            self._read += len(records)
            if self._read >= _RELEASE_EVERY:
                self._read = 0
                for source in np.unique(sources).tolist():
                    readers[source].release_pages()
            return records
        return self._readers[int(self._source[item])].record(int(self._local[item]))


def merge_columns(
    sources: Sequence[tuple[SegmentReader, NDArray[np.bool_]]],
    *,
    pause: Pause = no_pause,
    spill: Path | None = None,
) -> SegmentColumns:
    """The live documents of several segments as one segment's columns.

    ``sources`` pairs each reader with its live mask. Keys must be unique
    across the live documents (the index guarantees it). Postings, lengths,
    times and vectors move as arrays; stored records are copied as bytes,
    never re-encoded, so a merged document is byte-for-byte what was stored.
    ``pause`` is called between slices of work; it never changes the result.

    Memory (the merge is term by term, never whole columns of Python objects):
    O(D) arrays for D documents (keys, lengths, times, where each comes
    from), the merged vocabulary, O(V + P/128) postings tables
    (:class:`PostingsBuilder`) and temporaries of :data:`MERGE_CHUNK_POSTINGS`
    postings (each source's range decoded, gathered, sorted and re-encoded:
    some 150 bytes a posting at the peak). The merged postings themselves
    (their packed words) go to an unlinked temporary file in the folder
    ``spill`` (``None``: they stay in memory), and stored records are read from the sources'
    memory maps a slice at a time when the segment is written
    (:func:`write_columns`), never held together; pages of the sources read
    are unmapped as the merge goes (:meth:`SegmentReader.release_pages`).
    O(P log C + D log D) for P postings in chunks of C.

    Raises:
        CorruptIndexError: a source fails its checks (a merge never launders damage).

    """
    readers = [reader for reader, _ in sources]
    dims = {reader.vector_dim for reader in readers} - {None}
    if len(dims) > 1:
        raise CorruptIndexError(f"segments disagree on the vector width: {sorted(dims)}")  # type: ignore[type-var]
    vector_dim = dims.pop() if dims else None
    dim = vector_dim or 0
    locals_ = [np.flatnonzero(live).astype(np.int64) for _, live in sources]
    counts = [int(local.shape[0]) for local in locals_]
    n = sum(counts)
    key_parts = [reader.keys()[local] for reader, local in zip(readers, locals_, strict=True)]
    all_keys = np.concatenate(key_parts) if key_parts else np.zeros(0, np.str_)
    del key_parts
    order = np.argsort(all_keys, kind="stable")
    sorted_keys = all_keys[order]
    del all_keys
    if n > 1:
        repeated = np.flatnonzero(sorted_keys[1:] <= sorted_keys[:-1])
        if repeated.shape[0]:
            # Two sources hold the same live key: a substituted or duplicated
            # file. Refused here, so a merge never makes that permanent.
            names = ", ".join(str(reader.path) for reader in readers)
            key = str(sorted_keys[int(repeated[0]) + 1])
            raise CorruptIndexError(f"merging {names}: key {key!r} is live in more than one segment")
    position_of = np.empty(n, dtype=np.int64)
    position_of[order] = np.arange(n, dtype=np.int64)
    source_of = np.repeat(np.arange(len(sources), dtype=np.int32), counts)[order]
    local_of = (np.concatenate(locals_) if locals_ else np.zeros(0, np.int64))[order]
    new_index: list[NDArray[np.int64]] = []
    first = 0
    for reader, local, count in zip(readers, locals_, counts, strict=True):
        mapping = np.full(reader.n_docs, -1, dtype=np.int64)
        mapping[local] = position_of[first : first + count]
        new_index.append(mapping)
        first += count
    del position_of
    lengths = np.zeros(n, dtype=np.uint32)
    times = np.zeros(n, dtype=np.float64)
    link_counts = np.zeros(n, dtype=np.int64)
    vector_rows = np.full(n, -1, dtype=np.int32)
    for s, (reader, mapping) in enumerate(zip(readers, new_index, strict=True)):
        local = locals_[s]
        where = mapping[local]
        lengths[where] = reader.doc_lengths()[local]
        times[where] = reader.times()[local]
        link_offsets = reader._array("links.doc", "<u8", reader.n_docs + 1)
        link_counts[where] = np.diff(link_offsets.astype(np.int64))[local]
        rows = reader.vector_rows()[local]
        vector_rows[where[rows >= 0]] = 0  # marked here, numbered below
    link_targets: list[str] = []
    linked = np.flatnonzero(link_counts).tolist()
    for start, end in slices(len(linked)):
        for position in linked[start:end]:
            targets = readers[int(source_of[position])].links(int(local_of[position]))
            if len(targets) != int(link_counts[position]):
                raise CorruptIndexError(
                    f"{readers[int(source_of[position])].path}: link offsets are inconsistent"
                )
            link_targets.extend(targets)
        pause()
    # Vectors follow the documents into key order.
    present = vector_rows >= 0
    vector_rows[present] = np.arange(int(present.sum()), dtype=np.int32)
    # The sources' common type: float16 stays float16 only if every source holds float16.
    dtype = np.result_type(*[reader.vector_matrix().dtype for reader in readers]) if readers else np.float32
    matrix = np.zeros((int(present.sum()), dim), dtype=dtype)
    for s, (reader, mapping) in enumerate(zip(readers, new_index, strict=True)):
        local = locals_[s]
        rows = reader.vector_rows()[local]
        has = rows >= 0
        if has.any():
            block = reader.vector_matrix()[rows[has]]
            matrix[vector_rows[mapping[local[has]]]] = block.reshape(block.shape[0], dim)
    keeps = {reader.has_positions for reader in readers}
    if len(keeps) > 1:
        raise CorruptIndexError("the segments disagree on whether the text field keeps positions")
    builder = PostingsBuilder(lengths, spill, positions=keeps == {True})
    vocabulary = _merge_postings(sources, new_index, builder, pause)
    text_fields = _merge_text_fields(sources, new_index, locals_, n, spill, pause)
    return SegmentColumns(
        keys=sorted_keys.tolist(),
        lengths=lengths,
        times=times,
        records=_GatheredRecords(readers, source_of, local_of),
        link_counts=link_counts,
        link_targets=link_targets,
        vector_rows=vector_rows,
        matrix=matrix if dim else np.zeros((0, 0), np.float32),
        vector_dim=vector_dim,
        vocabulary=vocabulary,
        term_of_posting=np.zeros(0, np.int64),
        doc_of_posting=np.zeros(0, np.int64),
        tf_of_posting=np.zeros(0, np.uint32),
        post_sections=builder.sections(),
        spill=spill,
        text_fields=text_fields,
        # The sources' field indexes renumbered (no stored record decoded); a source whose
        # field index is damaged fails here, as its postings or records would.
        field_index=FieldIndex.merge(
            [(reader.field_index(), mapping) for reader, mapping in zip(readers, new_index, strict=True)], n
        ),
    )


def _merge_text_fields(
    sources: Sequence[tuple[SegmentReader, NDArray[np.bool_]]],
    new_index: Sequence[NDArray[np.int64]],
    locals_: Sequence[NDArray[np.int64]],
    n: int,
    spill: Path | None,
    pause: Pause,
) -> tuple[FieldColumns, ...]:
    """The named text fields' merged columns: each merges as the default field does, through its views.

    Raises:
        CorruptIndexError: the sources disagree on their text fields (one index has one schema).

    """
    readers = [reader for reader, _ in sources]
    named = {reader.text_field_names for reader in readers}
    if len(named) > 1:
        raise CorruptIndexError(
            f"merging {', '.join(str(r.path) for r in readers)}: the segments disagree on their text fields"
        )
    merged = []
    for name in (named.pop() if named else ("text",))[1:]:
        views: list[SegmentReader] = []
        lengths = np.zeros(n, dtype=np.uint32)
        for reader, mapping, local in zip(readers, new_index, locals_, strict=True):
            view = reader.text_field(name)
            assert isinstance(view, SegmentReader)
            lengths[mapping[local]] = view.doc_lengths()[local]
            views.append(view)
        keeps = {view.has_positions for view in views}
        if len(keeps) > 1:
            raise CorruptIndexError(f"the segments disagree on whether text field {name!r} keeps positions")
        builder = PostingsBuilder(lengths, spill, positions=keeps == {True})
        vocabulary = _merge_postings(
            [(view, live) for view, (_, live) in zip(views, sources, strict=True)], new_index, builder, pause
        )
        merged.append(
            FieldColumns(
                name=name,
                lengths=lengths,
                vocabulary=vocabulary,
                term_of_posting=np.zeros(0, np.int64),
                doc_of_posting=np.zeros(0, np.int64),
                tf_of_posting=np.zeros(0, np.uint32),
                post_sections=builder.sections(),  # pos.* among them when kept
            )
        )
    return tuple(merged)


def _merge_postings(
    sources: Sequence[tuple[SegmentReader, NDArray[np.bool_]]],
    new_index: Sequence[NDArray[np.int64]],
    builder: PostingsBuilder,
    pause: Pause,
) -> list[str]:
    """The merged vocabulary; its postings go to ``builder``, a range of terms at a time.

    Terms only deleted documents held do not survive (a fresh build of the
    same documents would not have them either). Merged terms are taken in
    ranges of about :data:`MERGE_CHUNK_POSTINGS` postings: each source's
    postings of a range are one contiguous slice (both vocabularies are
    sorted), so a range is gathered, renumbered and sorted by (term, doc) on
    its own.
    """
    tables = []
    used_terms: set[str] = set()
    for reader, live in sources:
        _, _, offsets, _ = reader._term_tables()
        term_postings = _TermPostings(reader)
        bounds = offsets.astype(np.int64)
        if bool(np.any(bounds[1:] <= bounds[:-1])):
            raise CorruptIndexError(f"{reader.path}: a term has no postings")
        live_postings = np.zeros(reader.n_terms, dtype=np.int64)
        for start, end in _term_ranges(bounds, 64 * SLICE):
            low = int(bounds[start])
            part, _ = term_postings(start, end)
            if part.shape[0] and int(part.max()) >= reader.n_docs:
                raise CorruptIndexError(f"{reader.path}: a posting names a document past the end")
            alive = live[part].astype(np.int64)
            live_postings[start:end] = np.add.reduceat(alive, bounds[start:end] - low) if end > start else 0
            del part, alive
            reader.release_pages()
            pause()
        terms = reader.terms()
        used = np.flatnonzero(live_postings).tolist()
        for start, end in slices(len(used), 16 * SLICE):
            used_terms.update([terms[t] for t in used[start:end]])
            pause()
        tables.append((terms, bounds, term_postings, live_postings))
        reader.release_pages()
    vocabulary = sorted_in_slices(list(used_terms), None, pause)
    del used_terms
    merged = strings_array(vocabulary, pause)
    size = len(vocabulary)
    df = np.zeros(size, dtype=np.int64)
    remaps = []
    for terms, _, _, live_postings in tables:
        remap = (
            np.searchsorted(merged, strings_array(terms, pause)).astype(np.int64)
            if terms
            else np.zeros(0, np.int64)
        )
        holds = live_postings > 0
        df[remap[holds]] += live_postings[holds]
        remaps.append(remap)
    del merged
    term_offsets = np.zeros(size + 1, dtype=np.uint64)
    np.cumsum(df, out=term_offsets[1:])
    cumulative = term_offsets.astype(np.int64)
    del term_offsets
    a = 0
    while a < size:
        # The next range of merged terms: about MERGE_CHUNK_POSTINGS postings, at least one term.
        b = int(np.searchsorted(cumulative, cumulative[a] + MERGE_CHUNK_POSTINGS, side="right")) - 1
        b = min(max(b, a + 1), size)
        doc_parts, tf_parts, term_parts, pos_parts = [], [], [], []
        for (_, bounds, term_postings, _), remap, mapping, (_, live) in zip(
            tables, remaps, new_index, sources, strict=True
        ):
            # Source terms are sorted, so those landing in [a, b) are one range; unused ones
            # (only deleted documents) land anywhere but have no live posting to contribute.
            sa = int(np.searchsorted(remap, a, side="left"))
            sb = int(np.searchsorted(remap, b, side="left"))
            if sb <= sa:
                continue
            part, part_tfs = term_postings(sa, sb)
            keep = live[part]
            term_of = np.repeat(remap[sa:sb] - a, np.diff(bounds[sa : sb + 1]))[keep]
            doc_parts.append(mapping[part[keep]])
            tf_parts.append(part_tfs[keep])
            term_parts.append(term_of)
            if term_postings.positions:
                found = term_postings.positions_of(sa, sb, part, part_tfs)
                pos_parts.append(found[np.repeat(keep, part_tfs.astype(np.int64))])
        docs = np.concatenate(doc_parts)
        key = np.concatenate(term_parts) * (int(docs.max()) + 1 if docs.shape[0] else 1) + docs
        # Each source's keys come in ascending order (its terms and its documents' new ids both
        # keep its order), so the keys are a few sorted runs: a stable sort (timsort) merges them
        # in O(P log sources), several times faster than quicksort's O(P log P). Keys are unique,
        # so every sort gives the same permutation.
        sort = np.argsort(key, kind="stable")
        low, high = int(cumulative[a]), int(cumulative[b])
        if sort.shape[0] != high - low:  # cannot happen: counted above from the same arrays
            raise CorruptIndexError("a merge's postings do not add up")
        all_tfs = np.concatenate(tf_parts)
        positions = None
        if pos_parts:
            # Each posting's run of positions follows it into (term, doc) order.
            flat_tf = all_tfs.astype(np.int64)
            run_start = np.cumsum(flat_tf) - flat_tf
            sorted_tf = flat_tf[sort]
            shift = np.repeat(run_start[sort] - (np.cumsum(sorted_tf) - sorted_tf), sorted_tf)
            positions = np.concatenate(pos_parts)[np.arange(int(sorted_tf.sum()), dtype=np.int64) + shift]
        builder.add(
            docs[sort].astype(np.uint32),
            all_tfs[sort].astype(np.uint32),
            (cumulative[a : b + 1] - low).astype(np.uint64),
            positions,
        )
        a = b
        for reader, _ in sources:  # what was read is not needed again: out of the resident set
            reader.release_pages()
        pause()
    return vocabulary


def _term_ranges(bounds: NDArray[np.int64], most_terms: int) -> Iterator[tuple[int, int]]:
    """Consecutive ranges of terms: at most ``most_terms`` terms, about :data:`MERGE_CHUNK_POSTINGS` postings.

    At least one term a range, so what a range decodes stays bounded however the postings fall.
    """
    count = bounds.shape[0] - 1
    start = 0
    while start < count:
        end = int(np.searchsorted(bounds, bounds[start] + MERGE_CHUNK_POSTINGS, side="right")) - 1
        end = min(max(end, start + 1), start + most_terms, count)
        yield start, end
        start = end


class _TermPostings:
    """The postings of a range of a source segment's terms, as (local ids, frequencies).

    It decodes the range's packed blocks (the sections' checksums are
    verified first, and :func:`~weftsearch.storage.postings.unpack_postings`
    checks every width, size and id). O(postings of the range).
    """

    def __init__(self, reader: SegmentReader) -> None:
        self._reader = reader
        self.positions = reader.has_positions
        _, _, offsets, _ = reader._term_tables()
        self._offsets = offsets
        self._block_offsets, self._table, self._data_offsets = reader._packed_tables()
        self._data = reader._array("post.data", "<u4", int(reader._meta_cache["words"]))

    def __call__(self, start: int, end: int) -> tuple[NDArray[np.uint32], NDArray[np.uint32]]:
        reader = self._reader
        offsets = self._offsets
        block_offsets, data_offsets = self._block_offsets, self._data_offsets
        try:
            return unpack_postings(
                self._data[int(data_offsets[start]) : int(data_offsets[end])],
                offsets[start : end + 1],
                block_offsets[start : end + 1],
                self._table[BLOCK_ROWS * int(block_offsets[start]) : BLOCK_ROWS * int(block_offsets[end])],
                data_offsets[start : end + 1],
                reader.n_docs,
            )
        except PostingsDecodeError as exc:
            raise CorruptIndexError(f"{reader.path}: postings do not decode ({exc})") from None

    def positions_of(
        self, start: int, end: int, ids: NDArray[np.uint32], tfs: NDArray[np.uint32]
    ) -> NDArray[np.int64]:
        """The positions of terms ``start ..< end`` (their postings ``ids``/``tfs``), in posting order.

        Each term's words are checked against their CRC32C and decoded with
        every check (:func:`~weftsearch.storage.postings.unpack_positions`).
        """
        reader = self._reader
        data_offsets, crcs = reader._positions_tables()
        data = reader._positions_data()
        first, last = int(data_offsets[start]), int(data_offsets[end])
        bounds = data_offsets[start : end + 1].astype(np.int64).tolist()
        for term, (low, high) in enumerate(itertools.pairwise(bounds), start=start):
            if checksum(data[low:high].tobytes()) != int(crcs[term]):
                raise CorruptIndexError(f"{reader.path}: positions of term {term} fail their checksum")
        term_offsets = self._offsets[start : end + 1].astype(np.int64)
        try:
            _, positions = unpack_positions(
                data[first:last],
                tfs,
                reader.doc_lengths()[ids],
                term_offsets - term_offsets[0],
                np.asarray(bounds, dtype=np.int64) - first,
            )
        except PostingsDecodeError as exc:
            raise CorruptIndexError(f"{reader.path}: positions do not decode ({exc})") from None
        return positions.astype(np.int64)
