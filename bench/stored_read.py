"""Cost of reading one hit's stored record: cold block vs cached block (issue 31, item 4).

Builds SciFact (title + text, as ``bench/index_size.py`` does) into a one-segment index with
the weftsearch found first on ``PYTHONPATH`` (so the same script measures the uncompressed
version 3 too), then times, over random documents, in µs per record:

* ``record cold``: ``SegmentReader.record`` of a document whose block is not cached (the
  reader's block cache emptied before each read; in version 3 there is no cache);
* ``record cached``: the same documents read again, each block already decompressed;
* ``get cold`` / ``get cached``: ``Index.get`` (key lookup, record, vector, links) likewise.

Each is the median of ``--rounds`` rounds; the load average is printed. ``--blocks``
also prints, for the SciFact records, the compressed size and the cold decompression of
one block at several block sizes and zstd levels (the choice in docs/FORMAT.md). Run::

    PYTHONPATH=src python bench/stored_read.py --scifact ../shared/datasets/scifact [--blocks]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from index_size import documents_scifact

from weftsearch import Index
from weftsearch.storage.segment import SegmentReader


def _timed(call: Callable[[int], object], items: list[int], prepare: Callable[[int], object]) -> float:
    """Median over items of one call's µs (perf_counter_ns around each), ``prepare(item)`` untimed first."""
    times = []
    for item in items:
        prepare(item)
        began = time.perf_counter_ns()
        call(item)
        times.append(time.perf_counter_ns() - began)
    return statistics.median(times) / 1000


def _cold(reader: SegmentReader) -> None:
    cache = getattr(reader, "_blocks_cache", None)
    if cache is not None:  # version 4 on; version 3 has no block to decompress
        setattr(reader, "_blocks_cache", type(cache)())  # noqa: B010


def measure(path: Path, rounds: int, sample: int) -> dict[str, float]:
    """Median µs per read of each kind, over ``rounds`` rounds of ``sample`` random documents."""
    index = Index.open(path, readonly=True)
    keys = index.keys()
    [segment] = list(path.glob("seg-*.wseg"))
    reader = SegmentReader(segment)
    reader.record(0)  # tables checked once, as a long-lived reader has
    kinds = ("record cold", "record cached", "get cold", "get cached")
    results: dict[str, list[float]] = {kind: [] for kind in kinds}
    rng = random.Random(31)
    for _ in range(rounds):
        locals_ = rng.sample(range(reader.n_docs), sample)

        results["record cold"].append(_timed(reader.record, locals_, lambda _: _cold(reader)))
        results["record cached"].append(_timed(reader.record, locals_, reader.record))

        def empty_caches(_: int) -> None:
            for segment_reader in _index_readers(index):
                _cold(segment_reader)

        def get(local: int) -> None:
            index.get(keys[local])

        results["get cold"].append(_timed(get, locals_, empty_caches))
        results["get cached"].append(_timed(get, locals_, get))
    return {name: statistics.median(values) for name, values in results.items()}


def _index_readers(index: Index) -> list[SegmentReader]:
    """The open index's segment readers (to empty their block caches)."""
    return [part.reader for part in index.snapshot()._parts]


def blocks_table(records: list[bytes]) -> None:
    """Compressed size and one block's cold decompression at several block sizes and levels."""
    import zstandard

    raw_total = sum(map(len, records))
    print(f"  records: {len(records)}, {raw_total:,d} raw bytes")
    for block_bytes in (4096, 16384, 65536):
        blocks, current = [], b""
        for record in records:
            if current and len(current) + len(record) > block_bytes:
                blocks.append(current)
                current = b""
            current += record
        blocks.append(current)
        for level in (1, 3, 9):
            compressor = zstandard.ZstdCompressor(level=level, write_checksum=False)
            packed = [compressor.compress(block) for block in blocks]
            decompressor = zstandard.ZstdDecompressor()
            sample = packed[:: max(1, len(packed) // 200)]
            began = time.perf_counter()
            for _ in range(5):
                for frame in sample:
                    decompressor.decompress(frame)
            per_block = (time.perf_counter() - began) / (5 * len(sample)) * 1e6
            size = sum(map(len, packed))
            print(
                f"  block {block_bytes // 1024:>3d} KiB level {level}: {size:>10,d} bytes "
                f"(ratio {raw_total / size:4.2f}), decompress one block {per_block:6.1f} µs"
            )


def main() -> int:
    """Build, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scifact", type=Path, required=True, help="BEIR SciFact folder")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sample", type=int, default=500)
    parser.add_argument("--blocks", action="store_true", help="also compare block sizes and levels")
    args = parser.parse_args()
    import weftsearch.storage.codec as codec

    documents = documents_scifact(args.scifact)
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "index"
        with Index.create(path, "english") as index:
            index.add_many(documents, progress=False)
            index.commit()
            if index.segment_count > 1:
                index.merge(force=True)
        results = measure(path, args.rounds, args.sample)
        print(
            f"scifact: {len(documents)} documents, format version {codec.FORMAT_VERSION}, "
            f"load average {os.getloadavg()[0]:.2f}, median of {args.rounds} rounds of {args.sample}"
        )
        for name, value in results.items():
            print(f"  {name:14s} {value:8.1f} µs")
        if args.blocks:
            [segment] = list(path.glob("seg-*.wseg"))
            reader = SegmentReader(segment)
            blocks_table([reader.record(i) for i in range(reader.n_docs)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
