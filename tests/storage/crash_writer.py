"""The writer that ``test_crash.py`` runs in a subprocess and kills with SIGKILL.

Usage::

    python -m tests.storage.crash_writer DIRECTORY SEED RUN

Run 0 creates the index; a later run opens it (after the previous run was
killed) and continues. The writer performs a deterministic sequence of rounds
(the sequence depends on SEED and RUN only): add a batch of new documents,
upsert some, delete some, commit, merge. It reports on stdout, one flushed line
at a time (each line is one ``write`` of fewer than PIPE_BUF bytes, so a line is
either wholly in the pipe or absent)::

    ready <generation> <digest> <documents> <total length>
    add <round>                                                   (adds, upserts, deletes begin)
    pending commit|merge <round> <generation> <digest> <documents> <total length>
    committed commit|merge <round> <generation> <digest> <documents> <total length>

``pending`` is written just before ``commit()`` (or ``merge()``, which publishes
the committed documents, merged, as the next generation) is called, with the
state it would publish; ``committed`` as soon as it returned, with the state now
current (for a merge that found nothing to merge, the unchanged one).

The digest is the SHA-256 of the sorted (key, text) pairs of the writer's own
model of the index (a dict it updates alongside each write), so it is ground
truth independent of what the index stores; the total length is the sum of the
analysed lengths of the live documents (what avgdl is derived from).
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from weftsearch import Document, Index
from weftsearch.engine.merge_policy import MergePolicy

#: Segments per tier before the policy merges them: small, so merges happen often.
MERGE_FACTOR = 3
#: The writer gives up (exit status 3) if nobody killed it after this many seconds.
SAFETY_SECONDS = 120.0
ANALYZER = "english"
VOCABULARY = [f"w{i:03d}" for i in range(300)]
#: Every document holds this token, so its document frequency is the document count.
COMMON = "common"


def digest(model: Mapping[str, tuple[str, int]]) -> str:
    """SHA-256 of the sorted (key, text) pairs."""
    pairs = sorted((key, text) for key, (text, _) in model.items())
    return hashlib.sha256(json.dumps(pairs, separators=(",", ":")).encode("utf-8")).hexdigest()


def state(generation: int, model: Mapping[str, tuple[str, int]]) -> str:
    """``<generation> <digest> <documents> <total length>``."""
    total = sum(length for _, length in model.values())
    return f"{generation} {digest(model)} {len(model)} {total}"


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def make_text(rng: random.Random, version: int) -> str:
    words = rng.choices(VOCABULARY, k=rng.randint(4, 40))
    return " ".join([COMMON, f"v{version}", *words])


def main(argv: list[str]) -> int:
    directory, seed, run = Path(argv[0]), int(argv[1]), int(argv[2])
    policy = MergePolicy(factor=MERGE_FACTOR)
    if run == 0:
        index = Index.create(directory, ANALYZER, merge_policy=policy)
    else:
        index = Index.open(directory, merge_policy=policy)
    # Odd seeds commit through a forked encoder (the path large commits take),
    # so kills also land while a child process writes the segment.
    if seed % 2:
        index._fork_encode_min = 100
    analyzer = index.analyzer
    model: dict[str, tuple[str, int]] = {}
    stored = index.keys()
    for key in stored:
        text = index.get(key).text
        model[key] = (text, len(analyzer.analyze(text)))
    say(f"ready {state(index.generation, model)}")
    rng = random.Random(f"crash-writer/{seed}/{run}")
    started = time.monotonic()
    serial = 0
    round_ = 0
    while time.monotonic() - started < SAFETY_SECONDS:
        say(f"add {round_}")
        batch = []
        for _ in range(rng.randint(40, 250)):
            key = f"r{run}-{serial:06d}"
            serial += 1
            batch.append(Document(key, make_text(rng, round_)))
        index.add_many(batch, progress=False)
        for document in batch:
            model[document.key] = (document.text, len(analyzer.analyze(document.text)))
        existing = sorted(model)
        if existing:
            upserts = rng.sample(existing, k=min(len(existing), rng.randint(0, 30)))
            replaced = [Document(key, make_text(rng, round_ + 1000)) for key in upserts]
            index.add_many(replaced, progress=False)
            for document in replaced:
                model[document.key] = (document.text, len(analyzer.analyze(document.text)))
            doomed = rng.sample(existing, k=min(len(existing), rng.randint(0, 25)))
            index.delete_many(doomed)
            for key in doomed:
                model.pop(key, None)
        if model and rng.random() < 0.5:
            single = rng.choice(sorted(model))
            index.delete(single)
            del model[single]
        before = state(index.generation, model)
        say(f"pending commit {round_} {before}")
        generation = index.commit()
        after = state(generation, model)
        say(f"committed commit {round_} {after}")
        # A merge that publishes anything publishes the next generation (the same documents).
        say(f"pending merge {round_} {state(generation + 1, model)}")
        index.merge(force=round_ % 4 == 3)
        say(f"committed merge {round_} {state(index.generation, model)}")
        round_ += 1
    return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
