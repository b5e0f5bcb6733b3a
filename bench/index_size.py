"""Index size on disk, by section, for SciFact and a synthetic corpus (issue 14, item 7).

Builds each corpus into a fresh on-disk index (one segment: add, commit, merge) with the
weftsearch found first on ``PYTHONPATH``, so the same script measures any version, and prints
the bytes of each group of sections (postings, block table, stored documents, terms, the
rest) and the total. ``--no-store-text`` builds with ``store_text=False`` (format version 3
on; older code refuses it). Run, for example::

    PYTHONPATH=src python bench/index_size.py --scifact ../shared/datasets/scifact
    PYTHONPATH=src python bench/index_size.py --scifact ../shared/datasets/scifact --no-store-text
    PYTHONPATH=src python bench/index_size.py --synthetic 100000
    PYTHONPATH=src python bench/index_size.py --scifact ../shared/datasets/scifact --positions
    PYTHONPATH=src python bench/index_size.py --scifact ../shared/datasets/scifact --tantivy

``--positions`` keeps the text's positions (format version 4 on: a schema whose ``text``
field has ``positions=True``). ``--tantivy`` also builds the same documents into a tantivy
index (the ``tantivy`` Python package) with positions (``index_option="position"``,
tokenizer ``en_stem``), with and without the text stored, one segment, and prints its size by
file suffix (``.pos`` positions, ``.idx`` postings, ``.term`` terms, ``.store`` stored fields)
and the ratio to weft-search's index beside the build that stores the same.

The synthetic corpus is ``bm25_vs_bm25s.synthetic`` (Zipfian vocabulary, seed 20240601),
indexed through the ``simple`` analyzer (its tokens survive it unchanged).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from weftsearch import Document, Index
from weftsearch.storage import SectionFile

GROUPS = {
    "post.ids": "postings",
    "post.tfs": "postings",
    "post.data": "postings",
    "post.crc": "postings",
    "post.offsets": "postings",
    "post.data_offsets": "postings",
    "post.block_offsets": "block table",
    "post.blocks": "block table",
    "stored.blob": "stored documents",
    "stored.offsets": "stored documents",
    "stored.crc": "stored documents",
    "stored.blocks": "stored documents",
    "stored.block_crc": "stored documents",
    "terms.blob": "terms",
    "terms.offsets": "terms",
    "pos.data_offsets": "positions",
    "pos.data_wraps": "positions",
    "pos.data": "positions",
    "pos.crc": "positions",
}


def documents_scifact(path: Path) -> list[Document]:
    """SciFact's corpus (title + text), as the eval harness indexes it."""
    out = []
    with (path / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                record = json.loads(line)
                out.append(
                    Document(str(record["_id"]), f"{record.get('title', '')} {record.get('text', '')}")
                )
    return out


def documents_synthetic(count: int) -> list[Document]:
    """The benchmark's synthetic corpus, tokens joined by spaces."""
    from bm25_vs_bm25s import synthetic

    workload = synthetic(count, 1)
    return [
        Document(key, " ".join(tokens))
        for key, tokens in zip(workload.doc_keys, workload.doc_tokens, strict=True)
    ]


def measure(
    documents: list[Document], analyzer: str, store_text: bool, positions: bool = False
) -> dict[str, int]:
    """Bytes per section group of the one-segment index of ``documents``."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "index"
        # Older code has no store_text (nor schema): pass them only when they are not the default.
        if positions:
            from weftsearch import Schema, TextField

            schema = Schema((TextField("text", analyzer=analyzer, stored=store_text, positions=True),))
            created = Index.create(path, analyzer, store_text=store_text, schema=schema)
        else:
            created = (
                Index.create(path, analyzer) if store_text else Index.create(path, analyzer, store_text=False)
            )
        with created as index:
            index.add_many(documents, progress=False)
            index.commit()
            if index.segment_count > 1:
                index.merge(force=True)
        sizes: dict[str, int] = defaultdict(int)
        for file in sorted(path.iterdir()):
            if file.name.endswith(".wseg"):
                sections = SectionFile(file)
                used = 0
                for name in sections.names:
                    size = sections.size(name)
                    sizes[GROUPS.get(name, "other sections")] += size
                    used += size
                sizes["headers and padding"] += file.stat().st_size - used
            else:
                sizes["manifest and other files"] += file.stat().st_size
        sizes["total"] = sum(os.path.getsize(f) for f in path.iterdir())
        return dict(sizes)


def measure_tantivy(documents: list[Document], stored: bool) -> dict[str, int]:
    """Bytes on disk of a one-segment tantivy index of ``documents`` with positions, by file suffix.

    ``.pos`` holds the positions, ``.idx`` the postings (with their skip data), ``.term``
    the term dictionary, ``.store`` the stored fields; ``"total"`` is the sum.
    """
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("key", stored=True, tokenizer_name="raw")
    builder.add_text_field("text", stored=stored, tokenizer_name="en_stem", index_option="position")
    schema = builder.build()
    with tempfile.TemporaryDirectory() as scratch:
        index = tantivy.Index(schema, path=scratch)
        writer = index.writer(heap_size=500_000_000, num_threads=1)
        for document in documents:
            writer.add_document(tantivy.Document(key=document.key, text=document.text))
        writer.commit()
        writer.wait_merging_threads()
        writer = index.writer(heap_size=500_000_000, num_threads=1)
        segments = index.searcher().num_segments
        if segments > 1:
            raise RuntimeError(f"tantivy wrote {segments} segments; raise the heap size")
        sizes: dict[str, int] = defaultdict(int)
        for file in Path(scratch).rglob("*"):
            if file.is_file():
                sizes[file.suffix or file.name] += file.stat().st_size
        sizes["total"] = sum(sizes.values())
        return dict(sizes)


def main() -> int:
    """Parse the arguments, build, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scifact", type=Path, help="BEIR SciFact folder")
    parser.add_argument("--synthetic", type=int, help="documents of the synthetic corpus")
    parser.add_argument("--no-store-text", action="store_true", help="build with store_text=False")
    parser.add_argument("--positions", action="store_true", help="keep the text's positions (version 4 on)")
    parser.add_argument("--tantivy", action="store_true", help="also measure tantivy with positions")
    args = parser.parse_args()
    if (args.scifact is None) == (args.synthetic is None):
        parser.error("give exactly one of --scifact and --synthetic")
    started = time.perf_counter()
    if args.scifact is not None:
        documents, analyzer, label = documents_scifact(args.scifact), "english", "scifact"
    else:
        documents, analyzer, label = (
            documents_synthetic(args.synthetic),
            "simple",
            f"synthetic {args.synthetic}",
        )
    import weftsearch.storage.codec as codec

    sizes = measure(documents, analyzer, not args.no_store_text, args.positions)
    print(
        f"{label}: {len(documents)} documents, format version {codec.FORMAT_VERSION}, "
        f"store_text={not args.no_store_text}, positions={args.positions}, "
        f"load average {os.getloadavg()[0]:.2f} "
        f"({time.perf_counter() - started:.1f} s)"
    )
    for group, size in sorted(sizes.items(), key=lambda item: -item[1]):
        print(f"  {group:26s} {size:>14,d} bytes  {size / sizes['total']:6.1%}")
    if args.tantivy:
        for stored in (False, True):
            found = measure_tantivy(documents, stored)
            # The ratio only beside the tantivy build that stores what weft-search's did.
            ratio = f" (weft-search / tantivy {sizes['total'] / found['total']:.3f})"
            print(
                f"tantivy {tantivy_version()} with positions, text stored={stored}: "
                f"{found['total']:,d} bytes{ratio if stored != args.no_store_text else ''}"
            )
            for suffix, size in sorted(found.items(), key=lambda item: -item[1]):
                if suffix != "total" and size:
                    print(f"  {suffix:26s} {size:>14,d} bytes")
    return 0


def tantivy_version() -> str:
    """The installed tantivy package's version."""
    from importlib.metadata import version

    return version("tantivy")


if __name__ == "__main__":
    sys.exit(main())
