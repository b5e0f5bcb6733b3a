"""Judged test collections, verified byte for byte before they are read.

Four collections are known: ``scifact`` (BEIR layout), ``cacm``, ``cisi`` and
``cranfield`` (the SMART format of the Glasgow IR group's distribution).
:func:`load_collection` returns a :class:`Collection`: documents as
:class:`~weftsearch.documents.Document` values, queries, relevance
judgements, splits where the collection has them, alternative link sets, and
the manifest of the files it was built from.

Integrity
    Every file a loader reads is checked against the size and SHA-256 compiled
    into this module (:data:`PINS`, copied from each collection's
    ``SOURCE.md``) before any of it is parsed. The bytes are read once,
    hashed, and parsed from memory, so what was verified is what is used. A
    mismatch raises :class:`~weftsearch.errors.DatasetIntegrityError` naming
    the file, the expected and the actual hash. ``any_snapshot=True`` loads the
    copy anyway and sets :attr:`Collection.publishable` to ``False``: every
    number made from it must be marked unpublishable.

    Data nobody pinned is another matter (:func:`provenance_of`): a folder of
    your own loaded with :func:`load_beir`, or vectors read by
    :func:`load_vector_folder`, has nothing public to differ from. It loads
    as it is, its provenance is ``"unpinned"`` (publishable, and reports say
    no public pin exists), and its manifest records every file's SHA-256 so
    numbers can be tied to those exact bytes. ``"mismatched"`` (a pinned file
    that differs, or a pinned collection holding an unpinned file) is what
    makes numbers unpublishable.

Text rules
    They are the rules the frozen vectors were embedded with (their
    ``record.json`` states them), so vectors and texts line up, and
    :func:`load_frozen_vectors` checks this by hashing the texts.

    * SMART files: a record starts at ``.I <id>``; a line that holds only a
      field marker (``.T``, ``.W``, ...; trailing blanks allowed) starts that
      field, and a field given twice in one record is concatenated. A trailing
      CR is removed from every line (CISI and ``cran.qry`` have CRLF line
      ends). A field's text is its lines, each stripped, empty ones dropped,
      joined by one space. Document text is ``.T + " " + .W`` (the title alone
      when there is no ``.W``).
    * SciFact: document text is ``title.strip() + " " + text.strip()`` (the
      stripped text alone when the title is empty); query text is the
      ``text`` field exactly as stored.

CACM
    * ``.B`` ("CACM December, 1958") gives :attr:`Document.time`: the **first
      day of that month, 00:00 UTC** (the source gives only year and month),
      and ``fields["year"]`` / ``fields["month"]``.
    * ``.X`` lines are ``other <TAB> type <TAB> this``. Type 5 ("links": X
      cites Y or Y cites X; the direction is not recorded, every link is
      listed from both ends) becomes :attr:`Document.links`, self-links
      dropped. All three types are in :attr:`Collection.link_sets`:
      ``"links"`` (type 5), ``"coupling"`` (type 4, bibliographic coupling)
      and ``"cocitation"`` (type 6); a weight is the number of times the line
      is repeated, which for types 4 and 6 is the number of shared references
      or citing documents.
    * ``query.text`` ends with an empty ``.I 0`` record, which is skipped.
      ``qrels.text`` pads query ids (``01``); ids are compared as integers and
      written without padding, as ``query.text`` writes them.

CISI
    ``.X`` lines are ``other <TAB> weight <TAB> this``: a symmetric, weighted
    association (co-citation or coupling counts; the archive does not say).
    The neighbours become :attr:`Document.links` (self entries dropped) and
    the weights are kept in ``link_sets["associations"]``. A line repeated
    with the same weight counts once.

Cranfield
    ``cran.qry`` numbers its queries ``001`` ... ``365`` with gaps, but
    ``cranqrel`` numbers them ``1`` ... ``225`` in file order: query ids here
    are those ordinals, and :attr:`Collection.query_file_ids` keeps the
    ``.I`` value as written. ``cranqrel``'s codes are mapped to grades by
    ``cranfield_grades``:

    ``"cleverdon"`` (the default)
        code 1 -> grade 4, 2 -> 3, 3 -> 2, 4 -> 1: lower codes are more
        relevant. Reasons: (1) ``cranqrel.readme``, shipped with the file,
        quotes Cleverdon's scale, 1 = "a complete answer to the question" ...
        4 = "of minimum interest"; (2) an independent check agrees: ranking
        all 1,400 documents by cosine with the frozen all-MiniLM-L6-v2
        vectors, the judged documents' median rank is 10.5 for code 1, 19 for
        code 2, 24.5 for code 3 and 47 for code 4 (in the top 10: 50 %, 39 %,
        35 %, 23 %), monotone in the readme's direction; (3) code 1 is the
        rarest (128 of 1,612), as the strictest grade should be.
    ``"ir_datasets"``
        code c -> grade c (4 = complete answer), the reading of the
        ir_datasets loader, for comparison with tools that use it.
    ``"binary"``
        codes 1-4 -> grade 1; the direction does not matter.

    Under every mapping code -1 becomes grade 0 (judged, not relevant). Each
    query has exactly one -1 document, unexplained by the readme; it is the
    document closest to the query by cosine (median rank 4), consistent
    with it being the paper the question was written from.

Frozen vectors
    :func:`load_frozen_vectors` reads ``<collection folder>/vectors/<variant>/``
    (``corpus.npy``, ``corpus_ids.txt``, ``queries.npy``, ``queries_ids.txt``,
    ``record.json``), verifies them against the pins and against the hashes in
    ``record.json``, checks the model name, width, the source files' hashes
    and the hash of the input texts against the collection, and returns the
    rows in the collection's order. ``any_snapshot`` waives file-hash
    mismatches (and marks the vectors unpublishable) but never query texts:
    query vectors embedded from other texts belong to other queries, and are
    a :class:`~weftsearch.errors.PairingError`.

Fetching
    :func:`fetch` downloads a collection's files from the public upstream named
    in its pins (raw files at a fixed commit of a public repository, or a
    pinned archive whose members are extracted), with the same size and
    SHA-256 checks, writing each file atomically (temporary file, then
    rename). Frozen vectors have no upstream and are not fetched.

The code is split by concept: :mod:`weftsearch.eval.pins` (the pinned
files), :mod:`weftsearch.eval.collection` (a loaded collection, its vectors
and manifest, and reading files checked against pins),
:mod:`weftsearch.eval.judged` (the SMART-format collections),
:mod:`weftsearch.eval.beir` (BEIR folders and :func:`load_collection`),
:mod:`weftsearch.eval.vectors` (frozen and user vectors) and
:mod:`weftsearch.eval.fetching` (downloads). This module gathers their
public names.
"""

from __future__ import annotations

from weftsearch.eval.beir import beir_splits, load_beir, load_collection
from weftsearch.eval.collection import (
    DEV_SPLIT,
    Collection,
    CollectionVectors,
    DerivedSplit,
    FileRecord,
    collection_folder,
    derive_split,
    provenance_of,
    sha256_bytes,
)
from weftsearch.eval.fetching import FetchResult, fetch
from weftsearch.eval.pins import (
    COLLECTIONS,
    CRANFIELD_GRADES,
    DEFAULT_VECTORS,
    FROZEN_MODEL,
    PINS,
    ArchivePin,
    CollectionPins,
    CranfieldGrades,
    FilePin,
    Judgements,
    Provenance,
)
from weftsearch.eval.vectors import load_frozen_vectors, load_vector_folder

__all__ = [
    "COLLECTIONS",
    "CRANFIELD_GRADES",
    "DEV_SPLIT",
    "DEFAULT_VECTORS",
    "FROZEN_MODEL",
    "PINS",
    "ArchivePin",
    "Collection",
    "CollectionPins",
    "CollectionVectors",
    "CranfieldGrades",
    "DerivedSplit",
    "FetchResult",
    "FilePin",
    "FileRecord",
    "Judgements",
    "collection_folder",
    "derive_split",
    "fetch",
    "load_beir",
    "load_collection",
    "load_frozen_vectors",
    "load_vector_folder",
    "beir_splits",
    "provenance_of",
    "Provenance",
    "sha256_bytes",
]
