"""Benchmark: the query classes of tantivy's search-benchmark-game, weft-search beside tantivy.

Run with ``PYTHONPATH=src .venv/bin/python bench/boolean_queries.py [--synthetic 100000]
[--scifact ../shared/datasets/scifact] [--queries 200] [--passes 3]``.
A script that prints figures, not a test: nothing here asserts a speed.

Classes (each top-10 and top-100), with terms drawn from the corpus itself so
that intersections and phrases match something:

* ``union``: 2-4 terms, OR. weft: plain query text (``Query("a b")``, the
  compiled block-max disjunction of ``_bm25.c``) and, on its own row, the
  parsed ``a OR b`` (a should-only tree of plain terms: the same one-call
  kernel, its terms in clause order);
* ``intersection``: 2-4 terms, AND (``Query.parse("+a +b")``: ``_boolean.c``);
* ``phrase``: 2-3 adjacent words of a document (``Query.parse('"a b"')``:
  ``_boolean.c`` with phrase verification).

weft-search is timed at the scorer (``BM25Scorer.score(snapshot, query, k)``,
queries parsed beforehand) and tantivy at ``searcher.search(query, k)``
(queries parsed beforehand), both one thread, in alternating passes (weft,
tantivy, weft, ...); each query's best time over the passes is kept and the
mean over queries printed, in microseconds. Both indexes hold positions, one
segment each; BM25 k1 = 1.2, b = 0.75 for both. The analyzers differ (weft's
english analyzer drops stopwords; tantivy's ``en_stem`` does not), so the
figures compare engines on the same words, not identical result lists: the
agreement of the top-10 keys is printed as a sanity check.

The load average is printed before and after: on a shared machine the figures
are indicative only.
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_variable] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synthetic_corpus import zipf_corpus  # noqa: E402

from weftsearch import BM25Scorer, Document, Index, Query, Schema, TextField, get_analyzer  # noqa: E402
from weftsearch.native import boolean  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "datasets" / "scifact"
WORD = re.compile(r"^[a-z][a-z0-9]+$")


def load_scifact(data: Path) -> tuple[list[str], list[str]]:
    """SciFact's keys and texts (title, then abstract)."""
    keys, texts = [], []
    with (data / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                record = json.loads(line)
                keys.append(str(record["_id"]))
                texts.append(f"{record.get('title', '')} {record.get('text', '')}")
    return keys, texts


def draw_queries(texts: list[str], n: int, seed: int) -> dict[str, list[str]]:
    """Per class, ``n`` queries of words from the documents (plain words both analyzers keep)."""
    rng = np.random.default_rng(seed)
    english = get_analyzer("english")

    def plain(word: str) -> bool:
        return bool(WORD.match(word)) and len(english.analyze(word)) == 1

    terms: list[str] = []
    phrases: list[str] = []
    union: list[str] = []
    while len(terms) < n or len(phrases) < n or len(union) < n:
        words = texts[int(rng.integers(len(texts)))].lower().split()
        if len(words) < 8:
            continue
        count = int(rng.integers(2, 5))
        picked = [w for w in rng.choice(words, min(len(words), 12), replace=False).tolist() if plain(w)]
        picked = list(dict.fromkeys(picked))[:count]
        if len(picked) >= 2:
            if len(terms) < n:
                terms.append(" ".join(picked))
            elif len(union) < n:
                union.append(" ".join(picked))
        length = int(rng.integers(2, 4))
        start = int(rng.integers(0, len(words) - length))
        run = words[start : start + length]
        if len(phrases) < n and all(plain(w) for w in run):
            phrases.append(" ".join(run))
    return {"union": union, "intersection": terms, "phrase": phrases}


def weft_queries(cls: str, texts: list[str]) -> dict[str, list[Query]]:
    """weft's queries of a class: its arms (name -> parsed queries)."""
    if cls == "union":
        return {
            "union": [Query(text) for text in texts],
            "union (parsed OR)": [Query.parse(" OR ".join(text.split())) for text in texts],
        }
    if cls == "intersection":
        return {"intersection": [Query.parse(" ".join("+" + w for w in text.split())) for text in texts]}
    return {"phrase": [Query.parse(f'"{text}"') for text in texts]}


def tantivy_queries(index: Any, cls: str, texts: list[str]) -> list[Any]:
    """tantivy's parsed queries of a class (its query parser: OR by default, ``+`` must, quotes)."""
    if cls == "union":
        return [index.parse_query(" OR ".join(text.split()), ["text"]) for text in texts]
    if cls == "intersection":
        return [index.parse_query(" ".join("+" + w for w in text.split()), ["text"]) for text in texts]
    return [index.parse_query(f'"{text}"', ["text"]) for text in texts]


def build_weft(keys: list[str], texts: list[str]) -> Index:
    """One segment, positions kept, the english analyzer."""
    index = Index(schema=Schema((TextField("text", positions=True),)))
    index.add_many([Document(key, text) for key, text in zip(keys, texts, strict=True)])
    index.snapshot()
    return index


def build_tantivy(keys: list[str], texts: list[str], tokenizer: str, path: str) -> Any:
    """One segment, positions kept (``index_option="position"``), ``en_stem`` or ``default``."""
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("key", stored=True, tokenizer_name="raw")
    builder.add_text_field("text", stored=False, tokenizer_name=tokenizer, index_option="position")
    index = tantivy.Index(builder.build(), path=path)
    writer = index.writer(heap_size=1_000_000_000, num_threads=1)
    for key, text in zip(keys, texts, strict=True):
        writer.add_document(tantivy.Document(key=key, text=text))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    return index


def best_times(run: Callable[[int], object], count: int, times: list[float]) -> None:
    """Time each of ``count`` queries once; keep each one's best so far in ``times``."""
    for i in range(count):
        start = time.perf_counter()
        run(i)
        elapsed = time.perf_counter() - start
        if elapsed < times[i]:
            times[i] = elapsed


def bench(name: str, keys: list[str], texts: list[str], tokenizer: str, n_queries: int, passes: int) -> None:
    """Build both indexes over ``texts`` and print each class's figures."""
    print(f"\n## {name}: {len(texts):,d} documents, {n_queries} queries per class, best of {passes} passes")
    started = time.perf_counter()
    weft = build_weft(keys, texts)
    print(f"weft index built in {time.perf_counter() - started:.0f} s")
    snapshot = weft.snapshot()
    scorer = BM25Scorer(1.2, 0.75)
    have_tantivy = True
    try:
        import tantivy  # noqa: F401
    except ImportError:
        have_tantivy = False
    scratch = tempfile.TemporaryDirectory()
    searcher = tantivy_index = None
    if have_tantivy:
        started = time.perf_counter()
        tantivy_index = build_tantivy(keys, texts, tokenizer, scratch.name)
        searcher = tantivy_index.searcher()
        print(f"tantivy index built in {time.perf_counter() - started:.0f} s")
    queries = draw_queries(texts, n_queries, seed=7)
    print(f"load average before: {os.getloadavg()}")
    print("| class | k | weft µs/query | tantivy µs/query | tantivy / weft | top-10 keys shared |")
    print("|---|---|---:|---:|---:|---:|")
    for cls, words in queries.items():
        theirs = tantivy_queries(tantivy_index, cls, words) if tantivy_index is not None else []
        for arm, ours in weft_queries(cls, words).items():
            for k in (10, 100):
                for query in ours[:3]:  # warm: caches of terms and positions, as a running service has
                    scorer.score(snapshot, query, k)
                mine = [float("inf")] * len(ours)
                other = [float("inf")] * len(theirs)
                for _ in range(passes):
                    best_times(lambda i: scorer.score(snapshot, ours[i], k), len(ours), mine)  # noqa: B023
                    if searcher is not None:
                        best_times(lambda i: searcher.search(theirs[i], k), len(theirs), other)  # noqa: B023
                shared = ""
                if searcher is not None and k == 10:
                    agree = []
                    for query, theirs_query in zip(ours, theirs, strict=True):
                        got = set(snapshot.keys_of(scorer.score(snapshot, query, 10).ids))
                        hits = searcher.search(theirs_query, 10).hits
                        want = {searcher.doc(address)["key"][0] for _, address in hits}
                        if want:
                            agree.append(len(got & want) / len(want))
                    shared = f"{np.mean(agree):.2f}" if agree else "-"
                weft_us = 1e6 * float(np.mean(mine))
                if other:
                    tantivy_us = 1e6 * float(np.mean(other))
                    print(
                        f"| {arm} | {k} | {weft_us:.0f} | {tantivy_us:.0f} "
                        f"| {tantivy_us / weft_us:.2f} | {shared} |"
                    )
                else:
                    print(f"| {arm} | {k} | {weft_us:.0f} | - | - | - |")
    print(f"load average after: {os.getloadavg()}")
    scratch.cleanup()


def main() -> None:
    """Parse the arguments and run the two corpora."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scifact", type=Path, default=DEFAULT_DATA, help="BEIR SciFact folder")
    parser.add_argument("--synthetic", type=int, default=100_000, help="synthetic documents (0: none)")
    parser.add_argument("--queries", type=int, default=200, help="queries per class")
    parser.add_argument("--passes", type=int, default=3, help="alternating timed passes")
    args = parser.parse_args()
    print(f"compiled conjunctions: {boolean.compiled_boolean() is not None}; cpus: {os.cpu_count()}")
    if (args.scifact / "corpus.jsonl").is_file():
        keys, texts = load_scifact(args.scifact)
        bench("SciFact", keys, texts, "en_stem", args.queries, args.passes)
    else:
        print(f"no SciFact at {args.scifact}: skipped")
    if args.synthetic:
        corpus = zipf_corpus(args.synthetic, 0)
        texts = [" ".join(tokens) for tokens in corpus.doc_tokens]
        bench(
            f"synthetic (Zipf, {args.synthetic:,d})",
            corpus.doc_keys,
            texts,
            "default",
            args.queries,
            args.passes,
        )


if __name__ == "__main__":
    main()
