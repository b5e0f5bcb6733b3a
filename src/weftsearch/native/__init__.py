"""Every compiled part of weftsearch and its binding, over plain arrays.

Five C sources live here, each optional (where one cannot be built, or is
switched off, the same results come from numpy or Python, to the bit):

``_scan.c`` (:mod:`weftsearch.native.scan`)
    The vector scorer's per-block scan: rank the IVF lists, score the probed
    rows with faiss's own row kernel, keep the k best and their ties.
``_bm25.c`` (:mod:`weftsearch.native.bm25`)
    BM25 top-k with block-max MaxScore over packed postings.
``_boolean.c`` (:mod:`weftsearch.native.boolean`)
    BM25 top-k of a query tree's conjunction (must, should and must_not terms,
    phrases verified on the documents that pass), skipping by block last ids.
``_analysis.c`` (``weftsearch.native._analysis``, used by :mod:`weftsearch.analysis`)
    The english analyzer's inner loop (a CPython extension module).
``_inversion.c`` (:mod:`weftsearch.native.inversion`, used by the segment writer)
    A segment's term counts (and positions) inverted into postings sorted by
    term and document (a term table built in C, a counting sort without the
    GIL), and postings packed into blocks as ``storage.postings.pack_postings``
    packs them (a CPython extension module).

``heap.h`` is the binary heap the C kernels select with. :mod:`weftsearch.native.loader`
is the one way a compiled part is found, switched off and checked.

Switches: set one of these environment variables to anything but ``""`` or
``"0"`` before the part is first used, and that part runs its pure Python or
numpy path instead (:data:`~weftsearch.native.loader.SWITCHES` lists them):

- ``WEFTSEARCH_NO_COMPILED_SCAN``: the vector scan.
- ``WEFTSEARCH_NO_COMPILED_BM25``: the BM25 top-k.
- ``WEFTSEARCH_NO_COMPILED_BOOLEAN``: the query trees' conjunctions and phrases.
- ``WEFTSEARCH_NO_COMPILED_ANALYSIS``: the analyzer's inner loop.
- ``WEFTSEARCH_NO_COMPILED_INVERSION``: the segment writer's inversion.

A compiled part is used only after a self-check on load finds it agrees with
the reference path in every bit; a disagreement turns it off.

Nothing here knows an index, a snapshot or a scorer: the callers lay out
arrays (:mod:`weftsearch.scorers.bm25` for the postings lists, the vector
scorer for its blocks) and this package runs the kernels over them.
"""
