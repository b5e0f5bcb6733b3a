r"""Trials: frozen ranking profiles compared through a live server, from a plan pinned before the run.

A trial has two steps, each a file:

1. **The plan** (:func:`write_plan`, ``weft-search trial plan``): the methods to
   compare (stored profiles at a fixed version, or inline specs), the queries
   (ids and texts, copied in), the SHA-256 of the query, judgement and
   query-vector files they came from, the seed, the concurrency and the
   budgets (``k``, ``depth``, a per-request timeout, a bound on the whole
   run). A plan is never overwritten.
2. **The run** (:func:`run_trial`, ``weft-search trial run``): the plan's bytes are
   read once and their SHA-256 recorded; a plan whose input files changed
   since it was written, or whose own file changed during the run, is refused
   (:class:`~weftsearch.errors.PlanChangedError`). One warm-up request per
   method goes first (the plan's first query; validated, timed, not scored),
   then one request per (query, method) in a seeded shuffled order over all
   methods (``numpy`` PCG64), at most ``concurrency`` in flight. Every
   response is checked: each (query, method) answered with 200; the expected
   profile and version (or spec); no key twice; at most ``k`` hits; the index
   generation of the first response on every other; the query vector's model
   the plan expects. A violation fails the run
   (:class:`~weftsearch.errors.TrialValidationError`) after the report (marked
   ``"valid": false``) is written.

The report (JSON, and a Markdown summary beside it) holds every ranking with
its raw per-signal scores, ranks and contributions (the requests ask for
``explain``), the latency of every request, the per-query values of the
measures (default ``nDCG@10`` and ``R@10``, from the plan's judgements with
trec_eval's rules: unjudged documents count as not relevant, and
``judgments_complete`` is ``false`` since pooled judgements never are),
pairwise wins/losses/ties with every losing query, paired bootstrap intervals
of each method against the baseline, and the server process's CPU time and
memory over the run. The evaluation goes through the same code as
``weft-search eval``: each method's rankings become an
:class:`~weftsearch.eval.runs.ArmRun`, evaluated by
:func:`~weftsearch.eval.harness.arm_result`, and each interval is
:func:`~weftsearch.eval.stats.paired_bootstrap` of the method minus the
baseline with the plan's seed and resamples, as
:func:`~weftsearch.eval.harness.compare` computes it.

**Process figures** come from ``/proc`` (Linux) for the server's process and
its descendants, sampled every 0.1 s: user + system CPU seconds over the run
and resident memory (start, end, sampled peak, and the kernel's ``VmHWM``
high-water mark). The process is the one given (``server_pid``) or, for a
loopback URL, the process listening on its port (found through
``/proc/net/tcp``). The server's ``/metrics`` is not used: its registry
holds request counters and latency, not process figures.

**Client-cycle latency** (``cycle=True``): one serial warm client (the
concurrency is 1), each request timed from the query text to the parsed
response, the query embedded by the server (``embed="server"``: no vector
sent; the server must run with ``--vectors-record``) or by this process with
the offline model (``embed="client"``: :class:`weftsearch.embed.Encoder`,
timed inside the cycle). When the plan has frozen query vectors, the
regenerated ones (the client's; in server mode, regenerated here after the
timed loop, since the API does not return the server's vector) are compared
with them: how many rows are bit-equal, the largest absolute difference, and
how many are within :data:`VECTOR_TOLERANCE`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from weftsearch._atomic import write_atomic
from weftsearch.corpus import load_qrels
from weftsearch.embed import read_texts_file
from weftsearch.errors import (
    InvalidParameterError,
    PlanChangedError,
    ReportExistsError,
    TrialValidationError,
)
from weftsearch.eval.harness import arm_result, code_version
from weftsearch.eval.http import Answer, SearchClient
from weftsearch.eval.metrics import Evaluation, parse_measure
from weftsearch.eval.runs import ArmRun, tied_slots
from weftsearch.eval.stats import paired_bootstrap
from weftsearch.ranking.profiles import check_profile_name

__all__ = [
    "PLAN_FORMAT",
    "REPORT_FORMAT",
    "VECTOR_TOLERANCE",
    "Method",
    "Plan",
    "load_plan",
    "parse_method",
    "run_trial",
    "summary_markdown",
    "write_plan",
]

PLAN_FORMAT = "weft-search trial plan 1"
REPORT_FORMAT = "weft-search trial report 1"
#: Largest absolute difference between a regenerated and a frozen query vector component that still
#: counts as "within tolerance": off AVX-512 the offline model differs in the last bits (about 1e-7).
VECTOR_TOLERANCE = 1e-6
DEFAULT_MEASURES = ("nDCG@10", "R@10")
_SAMPLE_SECONDS = 0.1


@dataclass(frozen=True, slots=True)
class Method:
    """One ranking a trial compares: a stored profile at a fixed version, or an inline spec.

    Attributes:
        name: the label in the report (the profile's ``NAME:VERSION``, or the label given to a spec).
        profile: the profile's name, or ``None`` for a spec.
        version: the profile's version, or ``None`` for a spec.
        spec: the inline spec, or ``None`` for a profile.

    """

    name: str
    profile: str | None = None
    version: int | None = None
    spec: str | None = None

    def record(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"name": self.name, "profile": self.profile, "version": self.version, "spec": self.spec}

    def request(self) -> dict[str, Any]:
        """The ranking part of a search request."""
        if self.profile is not None:
            return {"profile": {"name": self.profile, "version": self.version}}
        return {"spec": self.spec}


def parse_method(text: str) -> Method:
    """``NAME:VERSION`` (a stored profile) or ``LABEL=SPEC`` (an inline spec) as a :class:`Method`.

    Raises:
        InvalidParameterError: neither form, a bad profile name, or a version that is not an integer >= 1.

    """
    if "=" in text:
        label, _, spec = text.partition("=")
        if not label.strip() or not spec.strip():
            raise InvalidParameterError(f"a spec method is LABEL=SPEC with both parts, got {text!r}")
        return Method(name=label.strip(), spec=spec.strip())
    name, sep, version = text.rpartition(":")
    if not sep:
        raise InvalidParameterError(
            f"a method is a profile with its version, NAME:VERSION (a trial compares fixed versions), "
            f"or LABEL=SPEC; got {text!r}"
        )
    check_profile_name(name)
    if not version.isdigit() or int(version) < 1:
        raise InvalidParameterError(f"a profile version is an integer >= 1, got {version!r} in {text!r}")
    return Method(name=f"{name}:{int(version)}", profile=name, version=int(version))


@dataclass(frozen=True, slots=True)
class Plan:
    """A trial plan as read back (see the module docstring); :attr:`record` is what the file holds."""

    record: dict[str, Any]
    path: Path
    sha256: str

    @property
    def methods(self) -> list[Method]:
        """The methods, baseline first."""
        return [Method(**m) for m in self.record["methods"]]

    @property
    def queries(self) -> list[tuple[str, str]]:
        """``(id, text)`` of each query, in the plan's order."""
        return [(q["id"], q["text"]) for q in self.record["queries"]]


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _vector_files(path: Path) -> tuple[Path, Path]:
    if path.suffix != ".npy":
        raise InvalidParameterError(f"query vectors are a .npy file with NAME_ids.txt beside it, got {path}")
    return path, path.with_name(f"{path.stem}_ids.txt")


def _load_vectors(path: Path) -> dict[str, np.ndarray[Any, np.dtype[np.float32]]]:
    npy, ids_file = _vector_files(path)
    matrix = np.load(npy, allow_pickle=False)
    ids = ids_file.read_text(encoding="utf-8").splitlines()
    if matrix.ndim != 2 or matrix.shape[0] != len(ids) or matrix.dtype != np.float32:
        raise InvalidParameterError(
            f"{npy}: expected a float32 matrix with one row per id of {ids_file.name} ({len(ids)}), "
            f"got {matrix.dtype} {matrix.shape}"
        )
    return {qid: matrix[i] for i, qid in enumerate(ids)}


def _refuse_existing(*paths: Path) -> None:
    for path in paths:
        if path.exists():
            raise ReportExistsError(f"{path} already exists: a trial never overwrites a plan or a report")


def write_plan(
    path: str | os.PathLike[str],
    *,
    methods: Sequence[Method],
    queries: str | os.PathLike[str],
    qrels: str | os.PathLike[str],
    query_vectors: str | os.PathLike[str] | None = None,
    vector_model: str | None = None,
    baseline: str | None = None,
    seed: int = 0,
    concurrency: int = 4,
    k: int = 10,
    depth: int | None = None,
    timeout_seconds: float = 30.0,
    max_seconds: float = 3600.0,
    measures: Sequence[str] = DEFAULT_MEASURES,
    resamples: int = 10_000,
) -> Plan:
    """Write a trial plan to ``path`` (never over an existing file) and return it with its SHA-256.

    Args:
        path: the plan file (JSON).
        methods: at least two methods with distinct names.
        queries: a ``.jsonl`` (BEIR ``queries.jsonl``) or ``.txt`` file of queries; only the
            queries the judgements cover are kept (the count left out is recorded).
        qrels: the judgements (any format :func:`weftsearch.corpus.load_qrels` reads).
        query_vectors: a ``.npy`` of frozen query vectors with ``<stem>_ids.txt`` beside it:
            sent with each query (and the reference of ``cycle`` runs). Every kept query needs a row.
        vector_model: the query vector model every response must report (and sent as
            ``vector_model`` with the vectors); ``None``: not checked.
        baseline: the method every other is compared with (default: the first).
        seed: the seed of the shuffled order and of the bootstrap.
        concurrency: requests in flight at most.
        k: hits per request.
        depth: candidates per scorer (``None``: the ranking's own).
        timeout_seconds: per request.
        max_seconds: bound on the whole run; requests not sent by then are unanswered (a violation).
        measures: measure names (the first is the headline).
        resamples: bootstrap resamples.

    Raises:
        ReportExistsError: ``path`` exists.
        InvalidParameterError: fewer than two methods, repeated names, an unknown baseline, a bad
            number, no judged query, or a query without a frozen vector.

    """
    target = Path(path)
    _refuse_existing(target)
    if len(methods) < 2:
        raise InvalidParameterError(f"a trial compares at least two methods, got {len(methods)}")
    names = [m.name for m in methods]
    if len(set(names)) != len(names):
        raise InvalidParameterError(f"method names must be distinct, got {names}")
    baseline = names[0] if baseline is None else baseline
    if baseline not in names:
        raise InvalidParameterError(f"baseline {baseline!r} is not one of the methods {names}")
    ordered = [m for m in methods if m.name == baseline] + [m for m in methods if m.name != baseline]
    for what, value in (("seed", seed), ("concurrency", concurrency), ("k", k), ("resamples", resamples)):
        if isinstance(value, bool) or not isinstance(value, int) or value < (0 if what == "seed" else 1):
            raise InvalidParameterError(
                f"{what} must be an integer >= {0 if what == 'seed' else 1}, got {value!r}"
            )
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise InvalidParameterError(f"depth must be an integer >= 1, got {depth!r}")
    for what, number in (("timeout_seconds", timeout_seconds), ("max_seconds", max_seconds)):
        if not (isinstance(number, int | float) and math.isfinite(number) and number > 0):
            raise InvalidParameterError(f"{what} must be a positive number of seconds, got {number!r}")
    wanted = [str(parse_measure(m)) for m in measures]
    if not wanted:
        raise InvalidParameterError("a trial needs at least one measure")
    queries_path, qrels_path = Path(queries), Path(qrels)
    ids, texts = read_texts_file(queries_path)
    judged = load_qrels(qrels_path)
    kept = [(qid, text) for qid, text in zip(ids, texts, strict=True) if qid in judged]
    if not kept:
        raise InvalidParameterError(f"no query of {queries_path} is judged in {qrels_path}")
    vectors: dict[str, Any] | None = None
    if query_vectors is not None:
        npy, ids_file = _vector_files(Path(query_vectors))
        rows = _load_vectors(npy)
        missing = [qid for qid, _ in kept if qid not in rows]
        if missing:
            raise InvalidParameterError(f"{npy}: no vector for {len(missing)} queries, e.g. {missing[:5]}")
        vectors = {
            "file": str(npy.resolve()),
            "sha256": _sha256_file(npy),
            "ids_file": str(ids_file.resolve()),
            "ids_sha256": _sha256_file(ids_file),
            "dims": int(next(iter(rows.values())).shape[0]),
        }
    record = {
        "format": PLAN_FORMAT,
        "created": time.time(),
        "methods": [m.record() for m in ordered],
        "baseline": baseline,
        "queries": [{"id": qid, "text": text} for qid, text in kept],
        "queries_file": {"file": str(queries_path.resolve()), "sha256": _sha256_file(queries_path)},
        "unjudged_queries_left_out": len(ids) - len(kept),
        "qrels": {"file": str(qrels_path.resolve()), "sha256": _sha256_file(qrels_path)},
        "query_vectors": vectors,
        "vector_model": vector_model,
        "seed": seed,
        "concurrency": concurrency,
        "budgets": {
            "k": k,
            "depth": depth,
            "timeout_seconds": float(timeout_seconds),
            "max_seconds": float(max_seconds),
        },
        "measures": wanted,
        "resamples": resamples,
        "confidence": 0.95,
    }
    data = (json.dumps(record, ensure_ascii=False, indent=1, allow_nan=False) + "\n").encode("utf-8")
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("xb") as file:  # "x": another writer racing us does not get overwritten either
        file.write(data)
    return Plan(record, target, hashlib.sha256(data).hexdigest())


def load_plan(path: str | os.PathLike[str]) -> Plan:
    """Read a plan and check that its input files are those it was written from.

    Raises:
        PlanChangedError: a queries, judgements or vectors file's SHA-256 differs from the plan's.
        InvalidParameterError: not a plan (bad JSON, another format).
        OSError: a file cannot be read.

    """
    target = Path(path)
    data = target.read_bytes()
    try:
        record = json.loads(data)
    except ValueError as exc:
        raise InvalidParameterError(f"{target}: not a trial plan (bad JSON: {exc})") from None
    if not isinstance(record, dict) or record.get("format") != PLAN_FORMAT:
        raise InvalidParameterError(f"{target}: not a trial plan (format is not {PLAN_FORMAT!r})")
    pinned = [
        (record["queries_file"]["file"], record["queries_file"]["sha256"]),
        (record["qrels"]["file"], record["qrels"]["sha256"]),
    ]
    if record.get("query_vectors"):
        vectors = record["query_vectors"]
        pinned += [(vectors["file"], vectors["sha256"]), (vectors["ids_file"], vectors["ids_sha256"])]
    for file, expected in pinned:
        actual = _sha256_file(Path(file))
        if actual != expected:
            raise PlanChangedError(
                f"{file} changed since the plan {target} was written (SHA-256 {actual}, the plan pins "
                f"{expected}); write a new plan"
            )
    return Plan(record, target, hashlib.sha256(data).hexdigest())


# ----------------------------------------------------------------------------- the server process


def _listening_pid(url: str) -> int | None:
    """The process listening on a loopback URL's port (Linux ``/proc``), or ``None``."""
    parts = urlsplit(url)
    if parts.hostname not in ("127.0.0.1", "localhost", "::1") or parts.port is None:
        return None
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == parts.port:
                inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return None
    owners: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for fd in (entry / "fd").iterdir():
                if os.readlink(fd) in inodes:
                    owners.append(int(entry.name))
                    break
        except OSError:
            continue
    return min(owners) if owners else None  # several workers share the socket: the oldest is the parent


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        node = todo.pop()
        found.append(node)
        todo.extend(children.get(node, []))
    return found


def _cpu_and_rss(pids: Sequence[int]) -> tuple[float, int, int]:
    """User + system CPU seconds, resident bytes and ``VmHWM`` bytes summed over ``pids``."""
    ticks = os.sysconf("SC_CLK_TCK")
    cpu, rss, hwm = 0.0, 0, 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue  # it ended between the listing and the read
        cpu += (int(fields[11]) + int(fields[12])) / ticks
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                rss += int(line.split()[1]) * 1024
            elif line.startswith("VmHWM:"):
                hwm += int(line.split()[1]) * 1024
    return cpu, rss, hwm


class _ProcessSampler:
    """CPU and memory of a process tree over the run, sampled in a thread."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        self._stop = threading.Event()
        self._peak = 0
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.pid is None or not Path(f"/proc/{self.pid}").is_dir():
            self.pid = None
            return
        self._start_cpu, self._start_rss, _ = _cpu_and_rss(_tree(self.pid))
        self._peak = self._start_rss
        self._started = time.perf_counter()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        assert self.pid is not None
        while not self._stop.wait(_SAMPLE_SECONDS):
            self._peak = max(self._peak, _cpu_and_rss(_tree(self.pid))[1])

    def stop(self) -> dict[str, Any]:
        if self.pid is None or self._thread is None:
            return {
                "source": None,
                "reason": "no local server process found (give --server-pid, Linux /proc)",
            }
        self._stop.set()
        self._thread.join()
        pids = _tree(self.pid)
        cpu, rss, hwm = _cpu_and_rss(pids)
        seconds = time.perf_counter() - self._started
        self._peak = max(self._peak, rss)
        return {
            "source": "/proc (the process and its descendants)",
            "pid": self.pid,
            "processes": len(pids),
            "wall_seconds": seconds,
            "cpu_seconds": cpu - self._start_cpu,
            "cpu_utilisation": (cpu - self._start_cpu) / seconds if seconds > 0 else None,
            "rss_bytes_start": self._start_rss,
            "rss_bytes_end": rss,
            "rss_bytes_peak_sampled": self._peak,
            "vm_hwm_bytes": hwm,
            "sample_seconds": _SAMPLE_SECONDS,
        }


# ----------------------------------------------------------------------------- validation


def _violation(kind: str, method: str, query: str | None, detail: str) -> dict[str, Any]:
    return {"kind": kind, "method": method, "query": query, "detail": detail}


def _check(
    answer: Answer,
    method: Method,
    qid: str,
    plan: Plan,
    *,
    embed_source: str | None,
) -> list[dict[str, Any]]:
    """The violations of one response (the generation is checked across responses, later)."""
    if answer.body is None or answer.status != 200:
        return [_violation("unanswered", method.name, qid, answer.error or f"HTTP {answer.status}")]
    body = answer.body
    problems: list[dict[str, Any]] = []
    ranking = body.get("ranking") or {}
    if method.profile is not None:
        got = (ranking.get("profile"), ranking.get("version"))
        if got != (method.profile, method.version):
            problems.append(
                _violation(
                    "profile",
                    method.name,
                    qid,
                    f"expected profile {method.profile!r} version {method.version}, "
                    f"the response ran {got[0]!r} version {got[1]!r}",
                )
            )
    elif ranking.get("profile") is not None or not ranking.get("spec"):
        problems.append(_violation("profile", method.name, qid, f"expected the inline spec, got {ranking}"))
    hits = body.get("hits")
    if not isinstance(hits, list):
        return [*problems, _violation("malformed", method.name, qid, "no hits list")]
    keys = [hit.get("key") for hit in hits if isinstance(hit, dict)]
    if len(keys) != len(hits) or not all(isinstance(key, str) for key in keys):
        problems.append(_violation("malformed", method.name, qid, "a hit without a string key"))
    counts = Counter(key for key in keys if isinstance(key, str))
    twice = sorted(key for key, count in counts.items() if count > 1)
    if twice:
        problems.append(
            _violation("duplicate", method.name, qid, f"keys returned more than once: {twice[:5]}")
        )
    k = plan.record["budgets"]["k"]
    if len(hits) > k:
        problems.append(_violation("malformed", method.name, qid, f"{len(hits)} hits, more than k={k}"))
    if not all(isinstance(h.get("score"), int | float) for h in hits if isinstance(h, dict)):
        problems.append(_violation("malformed", method.name, qid, "a hit without a numeric score"))
    if not isinstance(body.get("generation"), int):
        problems.append(_violation("generation", method.name, qid, "no generation in the response"))
    vector = body.get("query_vector") or {}
    source = vector.get("source")
    expected = plan.record.get("vector_model")
    if source != "none":
        # The server names a model two ways (VectorModel.accepts): the model and its vector set
        # (sentence-transformers/all-MiniLM-L6-v2, all-minilm-l6-v2-int8); a text it embeds is
        # reported by the model's name even when the plan gave the set's.
        named = {str(vector.get(f)).strip().lower() for f in ("model", "vectors") if vector.get(f)}
        if expected is not None and expected.strip().lower() not in named:
            problems.append(
                _violation(
                    "vector_model",
                    method.name,
                    qid,
                    f"expected query vectors of {expected!r}, the response says "
                    f"{vector.get('model')!r} (source {source!r})",
                )
            )
        if embed_source is not None and source != embed_source:
            problems.append(
                _violation(
                    "vector_model",
                    method.name,
                    qid,
                    f"expected the query vector to come from the {embed_source}, it came from {source!r}",
                )
            )
    return problems


# ----------------------------------------------------------------------------- the run


def _order(plan: Plan) -> list[tuple[str, str]]:
    """Every (query, method) pair in the seeded shuffled order."""
    pairs = [(qid, m.name) for qid, _ in plan.queries for m in plan.methods]
    permutation = np.random.Generator(np.random.PCG64(plan.record["seed"])).permutation(len(pairs))
    return [pairs[int(i)] for i in permutation]


def _latency(seconds: Sequence[float]) -> dict[str, float | int | None]:
    if not seconds:
        return {"count": 0, "mean_ms": None, "p50_ms": None, "p95_ms": None, "p99_ms": None, "max_ms": None}
    ms = np.asarray(seconds, dtype=np.float64) * 1000.0
    return {
        "count": int(ms.size),
        "mean_ms": float(ms.mean()),
        "p50_ms": float(np.percentile(ms, 50)),
        "p95_ms": float(np.percentile(ms, 95)),
        "p99_ms": float(np.percentile(ms, 99)),
        "max_ms": float(ms.max()),
    }


def _arm_run(method: Method, qids: Sequence[str], bodies: Mapping[str, dict[str, Any]], k: int) -> ArmRun:
    keys = {qid: tuple(str(h["key"]) for h in bodies[qid]["hits"]) for qid in qids}
    scores = {
        qid: np.asarray([float(h["score"]) for h in bodies[qid]["hits"]], dtype=np.float64) for qid in qids
    }
    for array in scores.values():
        array.setflags(write=False)
    first = bodies[qids[0]] if qids else {}
    return ArmRun(
        arm=method.name,
        k=k,
        qids=tuple(qids),
        keys=keys,
        scores=scores,
        tied={qid: tied_slots(scores[qid], k) for qid in qids},
        stream_tied={qid: () for qid in qids},
        signals=tuple(first.get("signals") or ()),
        description={**method.record(), "served_by": "HTTP"},
    )


def _pairwise(
    methods: Sequence[str], evaluations: Mapping[str, Evaluation], measures: Sequence[str]
) -> list[dict[str, Any]]:
    out = []
    for i, a in enumerate(methods):
        for b in methods[i + 1 :]:
            for measure in measures:
                va, vb = evaluations[a].per_query(measure), evaluations[b].per_query(measure)
                qids = sorted(va)
                out.append(
                    {
                        "a": a,
                        "b": b,
                        "measure": measure,
                        "wins": sum(va[q] > vb[q] for q in qids),
                        "losses": sum(va[q] < vb[q] for q in qids),
                        "ties": sum(va[q] == vb[q] for q in qids),
                        "a_loses": [{"query": q, "a": va[q], "b": vb[q]} for q in qids if va[q] < vb[q]],
                        "b_loses": [{"query": q, "a": va[q], "b": vb[q]} for q in qids if vb[q] < va[q]],
                    }
                )
    return out


def _vector_check(
    plan: Plan, regenerated: Mapping[str, np.ndarray[Any, np.dtype[np.float32]]], how: str
) -> dict[str, Any]:
    frozen = _load_vectors(Path(plan.record["query_vectors"]["file"]))
    qids = [qid for qid, _ in plan.queries]
    bit_equal, within, largest = 0, 0, 0.0
    for qid in qids:
        a, b = regenerated[qid], frozen[qid]
        if a.shape != b.shape:
            raise InvalidParameterError(
                f"query {qid!r}: regenerated width {a.shape} differs from frozen {b.shape}"
            )
        difference = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0
        bit_equal += int(a.tobytes() == b.tobytes())
        within += int(difference <= VECTOR_TOLERANCE)
        largest = max(largest, difference)
    return {
        "regenerated_by": how,
        "queries": len(qids),
        "bit_equal": bit_equal,
        "within_tolerance": within,
        "tolerance": VECTOR_TOLERANCE,
        "max_abs_difference": largest,
    }


def _intervals(
    names: list[str], record: dict[str, Any], evaluations: dict[str, Evaluation], measures: list[str]
) -> list[dict[str, Any]]:
    """Every method's seeded paired bootstrap against the plan's baseline, per measure (eval's function)."""
    intervals: list[dict[str, Any]] = []
    baseline = record["baseline"]
    for name in names[1:]:
        for measure in measures:
            boot = paired_bootstrap(
                evaluations[name].per_query(measure),
                evaluations[baseline].per_query(measure),
                resamples=int(record["resamples"]),
                seed=int(record["seed"]),
                confidence=float(record["confidence"]),
            )
            intervals.append(
                {
                    "method": name,
                    "baseline": baseline,
                    "measure": measure,
                    "mean_difference": boot.mean_difference,
                    "low": boot.low,
                    "high": boot.high,
                    "p_value": boot.p_value,
                    "resamples": boot.resamples,
                    "seed": boot.seed,
                    "confidence": boot.confidence,
                    "queries": boot.queries,
                }
            )
    return intervals


def _cycle_vector_check(
    plan: Plan,
    has_frozen: bool,
    embed: str,
    regenerated: Mapping[str, np.ndarray[Any, np.dtype[np.float32]]],
    encoder: Callable[[Sequence[str]], Any] | None,
    texts: list[str],
    qids: list[str],
) -> dict[str, Any]:
    """``--cycle``'s check of regenerated query vectors against the plan's frozen ones."""
    if not has_frozen:
        return {"checked": False, "reason": "the plan has no frozen query vectors"}
    if embed == "client":
        return _vector_check(plan, regenerated, "the client's offline model, inside the cycle")
    try:
        if encoder is None:
            from weftsearch.embed import Encoder

            encoder = Encoder().encode
        rows = np.asarray(encoder(texts), dtype=np.float32)
    except ImportError as exc:
        return {"checked": False, "reason": f"the embed extra is missing here: {exc}"}
    return _vector_check(
        plan,
        {q: rows[i] for i, q in enumerate(qids)},
        "this client's offline model after the timed loop (the API does not return the server's vector)",
    )


def _validate_answers(
    order: Sequence[tuple[str, str]],
    answers: Sequence[Answer | None],
    methods: Mapping[str, Method],
    plan: Plan,
    qids: Sequence[str],
    embed_source: str | None,
    violations: list[dict[str, Any]],
) -> tuple[dict[str, dict[str, dict[str, Any]]], list[dict[str, Any]], dict[int, int]]:
    """Check every answer, adding what fails to ``violations``.

    Returns the usable bodies by method and query, one record a request, and each index
    generation seen with the first request that saw it.
    """
    bodies: dict[str, dict[str, dict[str, Any]]] = {name: {} for name in methods}
    requests = []
    generations: dict[int, int] = {}
    for seq, ((qid, name), sent) in enumerate(zip(order, answers, strict=True)):
        if sent is None:
            violations.append(
                _violation("unanswered", name, qid, "not sent: the run's max_seconds budget ran out")
            )
            requests.append({"seq": seq, "query": qid, "method": name, "status": None, "latency_ms": None})
            continue
        answer = sent
        requests.append(
            {
                "seq": seq,
                "query": qid,
                "method": name,
                "status": answer.status,
                "latency_ms": answer.seconds * 1000.0,
            }
        )
        found = _check(answer, methods[name], qid, plan, embed_source=embed_source)
        violations.extend(found)
        if answer.body is not None and answer.status == 200:
            generation = answer.body.get("generation")
            if isinstance(generation, int):
                generations.setdefault(generation, seq)
            if not any(v["kind"] in ("unanswered", "malformed") for v in found):
                bodies[name][qid] = answer.body
    if len(generations) > 1:
        violations.append(
            _violation(
                "generation",
                "*",
                None,
                "the index generation changed during the run: "
                + ", ".join(
                    f"{g} from request {s}" for g, s in sorted(generations.items(), key=lambda x: x[1])
                ),
            )
        )
    for name in methods:
        missing = [qid for qid in qids if qid not in bodies[name]]
        if missing:
            violations.append(
                _violation(
                    "coverage",
                    name,
                    None,
                    f"{len(missing)} of {len(qids)} queries without a usable answer, e.g. {missing[:5]}",
                )
            )
    return bodies, requests, generations


@dataclass(frozen=True, slots=True)
class _Evaluated:
    """A run's measures: per method, and between methods (empty when a violation voids the run)."""

    measures: list[str]
    evaluations: dict[str, Evaluation]
    served: dict[str, dict[str, float]]
    pairwise: list[dict[str, Any]]
    intervals: list[dict[str, Any]]


def _evaluate(
    plan: Plan,
    methods: Mapping[str, Method],
    bodies: Mapping[str, Mapping[str, dict[str, Any]]],
    qids: Sequence[str],
    k: int,
    *,
    complete: bool,
) -> _Evaluated:
    """Each method's rankings through eval's code (:func:`arm_result`), then wins/losses and intervals."""
    measures = list(plan.record["measures"])
    if not complete:
        return _Evaluated(measures, {}, {}, [], [])
    qrels = load_qrels(plan.record["qrels"]["file"])
    judged = {qid: qrels[qid] for qid in qids}
    evaluations: dict[str, Evaluation] = {}
    served: dict[str, dict[str, float]] = {}
    for name, method in methods.items():
        result = arm_result(_arm_run(method, qids, bodies[name], k), judged, measures)
        evaluations[name] = result.evaluation
        served[name] = result.served.means if result.served is not None else {}
    names = list(methods)
    return _Evaluated(
        measures,
        evaluations,
        served,
        _pairwise(names, evaluations, measures),
        _intervals(names, plan.record, evaluations, measures),
    )


def _report(
    plan: Plan,
    server: str,
    *,
    mode: str,
    concurrency: int,
    timing: tuple[float, float],
    generations: Mapping[int, int],
    violations: list[dict[str, Any]],
    warmup: list[dict[str, Any]],
    requests: list[dict[str, Any]],
    order: Sequence[tuple[str, str]],
    answers: Sequence[Answer | None],
    evaluated: _Evaluated,
    bodies: Mapping[str, Mapping[str, dict[str, Any]]],
    qids: Sequence[str],
    process: dict[str, Any],
    vector_check: dict[str, Any] | None,
) -> dict[str, Any]:
    """The report's JSON object (its keys are :data:`REPORT_FORMAT`'s; see :func:`run_trial`)."""
    names = list(bodies)
    latency_by_method = {
        name: _latency(
            [a.seconds for (q, n), a in zip(order, answers, strict=True) if n == name and a is not None]
        )
        for name in names
    }
    measures, evaluations = evaluated.measures, evaluated.evaluations
    return {
        "format": REPORT_FORMAT,
        "valid": not violations,
        "plan": {"file": str(plan.path.resolve()), "sha256": plan.sha256, "record": plan.record},
        "server": server,
        "mode": mode,
        "concurrency": concurrency,
        "started": timing[0],
        "seconds": timing[1],
        "generation": min(generations, key=lambda g: generations[g]) if generations else None,
        "violations": violations,
        "warmup": warmup,
        "requests": requests,
        "latency": {
            "unit": "ms",
            "all": _latency([a.seconds for a in answers if a is not None]),
            "by_method": latency_by_method,
        },
        "measures": measures,
        "judgments_complete": False,
        "judgments_note": "qrels-based: unjudged documents count as not relevant (pooled judgements "
        "are incomplete, so R@k is judged recall)",
        "means": {name: e.means for name, e in evaluations.items()},
        "served_means": evaluated.served,
        "per_query": {name: {m: e.per_query(m) for m in measures} for name, e in evaluations.items()},
        "pairwise": evaluated.pairwise,
        "intervals": evaluated.intervals,
        "bootstrap": {
            "generator": "numpy PCG64",
            "percentiles": "nearest rank",
            "resamples": plan.record["resamples"],
            "seed": plan.record["seed"],
            "confidence": plan.record["confidence"],
        },
        "rankings": {
            name: {qid: bodies[name][qid].get("hits", []) for qid in qids if qid in bodies[name]}
            for name in names
        },
        "server_process": process,
        "vector_check": vector_check,
        "code": code_version(),
    }


class _Sender:
    """Builds and sends one (query, method) request of a plan; callable as ``send(qid, method_name)``.

    Thread-safe (the pool's threads share it). With client embedding in a cycle, the query is
    embedded here, inside the timed span, and the vector kept in :attr:`regenerated`.
    """

    def __init__(
        self,
        plan: Plan,
        client: SearchClient,
        methods: Mapping[str, Method],
        *,
        cycle: bool,
        embed: str,
        frozen: Mapping[str, np.ndarray[Any, np.dtype[np.float32]]] | None,
        encoder: Callable[[Sequence[str]], Any] | None,
    ) -> None:
        self.plan, self.client, self.methods = plan, client, methods
        self.cycle, self.embed, self.frozen, self.encoder = cycle, embed, frozen, encoder
        self.texts = dict(plan.queries)
        self.k, self.depth = int(plan.record["budgets"]["k"]), plan.record["budgets"]["depth"]
        self.vector_model = plan.record.get("vector_model")
        self.regenerated: dict[str, np.ndarray[Any, np.dtype[np.float32]]] = {}
        self._lock = threading.Lock()

    def body(self, qid: str, method: Method) -> dict[str, Any]:
        """The request: text, k, explain, the method, the depth, and (not in a cycle) the frozen vector."""
        request: dict[str, Any] = {"text": self.texts[qid], "k": self.k, "explain": True, **method.request()}
        if self.depth is not None:
            request["depth"] = self.depth
        if not self.cycle and self.frozen is not None:
            request["vector"] = self.frozen[qid].tolist()
            if self.vector_model is not None:
                request["vector_model"] = self.vector_model
        return request

    def __call__(self, qid: str, name: str) -> Answer:
        method = self.methods[name]
        if self.cycle and self.embed == "client":
            assert self.encoder is not None
            start = time.perf_counter()
            vector = np.asarray(self.encoder([self.texts[qid]]), dtype=np.float32)[0]
            request = {**self.body(qid, method), "vector": vector.tolist()}
            if self.vector_model is not None:
                request["vector_model"] = self.vector_model
            answer = self.client.search(request)
            with self._lock:
                self.regenerated[qid] = vector
            # The cycle is the client's whole wait: its embedding, then the request.
            return Answer(answer.status, answer.body, time.perf_counter() - start, answer.error)
        return self.client.search(self.body(qid, method))


def _invalid(violations: list[dict[str, Any]], report_file: Path) -> TrialValidationError:
    """The error a run with violations raises (its report written): how many, which kinds, the first."""
    kinds = sorted({v["kind"] for v in violations})
    first = violations[0]
    return TrialValidationError(
        f"{len(violations)} response violation(s) ({', '.join(kinds)}); first: "
        f"{first['method']} query {first['query']!r}: {first['detail']}; report: {report_file}",
        violations,
        str(report_file),
    )


def run_trial(
    plan_path: str | os.PathLike[str],
    server: str,
    report_path: str | os.PathLike[str],
    *,
    cycle: bool = False,
    embed: str = "server",
    server_pid: int | None = None,
    api_key: str | None = None,
    transport: Any = None,
    encoder: Callable[[Sequence[str]], Any] | None = None,
) -> dict[str, Any]:
    """Run the plan at ``plan_path`` against ``server``; write the report (JSON and ``.md``); return it.

    Args:
        plan_path: a plan :func:`write_plan` wrote.
        server: the server's base URL (``http://127.0.0.1:8080``).
        report_path: the report's JSON file; the summary goes beside it with the suffix ``.md``.
        cycle: client-cycle latency (see the module docstring): serial, text to response.
        embed: with ``cycle``: ``"server"`` (send text only) or ``"client"`` (embed here, timed).
        server_pid: the server's process for the CPU and memory figures (default: found from a
            loopback URL's port).
        api_key: sent as ``X-API-Key`` (a server that needs a key for reads).
        transport: an ``httpx`` transport (tests forge responses with ``httpx.MockTransport``).
        encoder: texts -> float32 rows, instead of :class:`weftsearch.embed.Encoder` (tests).

    Raises:
        ReportExistsError: the report or its summary exists.
        PlanChangedError: the plan's inputs changed since it was written, or the plan during the run.
        ServerUnreachableError: ``/health`` does not answer 200.
        TrialValidationError: a response broke the plan (the report is written first).
        MissingDependencyError: ``httpx`` (or, for client embedding, the ``embed`` extra) is missing.

    """
    report_file = Path(report_path)
    summary_file = report_file.with_suffix(".md")
    _refuse_existing(report_file, summary_file)
    if embed not in ("server", "client"):
        raise InvalidParameterError(f"embed is 'server' or 'client', got {embed!r}")
    plan = load_plan(plan_path)
    methods = {m.name: m for m in plan.methods}
    budgets = plan.record["budgets"]
    k = int(budgets["k"])
    texts = dict(plan.queries)
    frozen = (
        _load_vectors(Path(plan.record["query_vectors"]["file"])) if plan.record["query_vectors"] else None
    )
    if cycle and embed == "client" and encoder is None:
        from weftsearch.embed import Encoder

        encoder = Encoder().encode
    client = SearchClient(
        server, timeout=float(budgets["timeout_seconds"]), transport=transport, api_key=api_key
    )
    send = _Sender(plan, client, methods, cycle=cycle, embed=embed, frozen=frozen, encoder=encoder)

    embed_source = ("server" if embed == "server" else "request") if cycle else None
    violations: list[dict[str, Any]] = []
    try:
        client.health()
        sampler = _ProcessSampler(server_pid if server_pid is not None else _listening_pid(client.base_url))
        sampler.start()
        started, wall = time.time(), time.perf_counter()
        warm_qid = plan.queries[0][0]
        warmup = []
        for name, method in methods.items():
            answer = send(warm_qid, name)
            violations.extend(_check(answer, method, warm_qid, plan, embed_source=embed_source))
            warmup.append({"method": name, "query": warm_qid, "latency_ms": answer.seconds * 1000.0})
        order = _order(plan)
        deadline = wall + float(budgets["max_seconds"])

        def task(pair: tuple[str, str]) -> Answer | None:
            if time.perf_counter() > deadline:
                return None
            return send(*pair)

        concurrency = 1 if cycle else int(plan.record["concurrency"])
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            answers = list(pool.map(task, order))
        seconds = time.perf_counter() - wall
        process = sampler.stop()
    finally:
        client.close()
    if hashlib.sha256(plan.path.read_bytes()).hexdigest() != plan.sha256:
        raise PlanChangedError(f"the plan {plan.path} changed during the run; its results are not reported")

    qids = [qid for qid, _ in plan.queries]
    bodies, requests, generations = _validate_answers(
        order, answers, methods, plan, qids, embed_source, violations
    )

    evaluated = _evaluate(plan, methods, bodies, qids, k, complete=not violations)
    vector_check = (
        _cycle_vector_check(
            plan, frozen is not None, embed, send.regenerated, encoder, [texts[q] for q in qids], qids
        )
        if cycle
        else None
    )
    report = _report(
        plan,
        client.base_url,
        mode=("cycle, embedded by the " + embed) if cycle else "interleaved",
        concurrency=1 if cycle else int(plan.record["concurrency"]),
        timing=(started, seconds),
        generations=generations,
        violations=violations,
        warmup=warmup,
        requests=requests,
        order=order,
        answers=answers,
        evaluated=evaluated,
        bodies=bodies,
        qids=qids,
        process=process,
        vector_check=vector_check,
    )
    write_atomic(
        report_file, (json.dumps(report, ensure_ascii=False, indent=1, allow_nan=False) + "\n").encode()
    )
    write_atomic(summary_file, summary_markdown(report).encode("utf-8"))
    if violations:
        raise _invalid(violations, report_file)
    return report


def summary_markdown(report: Mapping[str, Any]) -> str:
    """A short Markdown summary of a trial report: means, intervals, wins/losses, latency, process."""
    lines = [f"# Trial against {report['server']} ({report['mode']})", ""]
    lines.append(
        f"Plan SHA-256 `{report['plan']['sha256']}`; generation {report['generation']}; "
        f"{'valid' if report['valid'] else 'INVALID: ' + str(len(report['violations'])) + ' violations'}; "
        f"judgments_complete=false."
    )
    lines.append("")
    measures = report["measures"]
    if report["means"]:
        lines.append("| method | " + " | ".join(measures) + " | p50 ms | p95 ms |")
        lines.append("|---" * (len(measures) + 3) + "|")
        for name, means in report["means"].items():
            lat = report["latency"]["by_method"][name]
            lines.append(
                f"| {name} | "
                + " | ".join(f"{means[m]:.4f}" for m in measures)
                + f" | {lat['p50_ms']:.2f} | {lat['p95_ms']:.2f} |"
            )
        lines.append("")
    for item in report["intervals"]:
        lines.append(
            f"- {item['method']} - {item['baseline']}, {item['measure']}: {item['mean_difference']:+.4f} "
            f"[{item['low']:+.4f}, {item['high']:+.4f}] (p={item['p_value']:.4f})"
        )
    for item in report["pairwise"]:
        lines.append(
            f"- {item['a']} vs {item['b']}, {item['measure']}: {item['wins']} wins, "
            f"{item['losses']} losses, {item['ties']} ties"
        )
    process = report["server_process"]
    if process.get("source"):
        lines.append(
            f"- server process: {process['cpu_seconds']:.2f} CPU s over {process['wall_seconds']:.2f} s, "
            f"peak RSS {process['rss_bytes_peak_sampled'] / 2**20:.1f} MiB ({process['source']})"
        )
    check = report.get("vector_check")
    if check and "bit_equal" in check:
        lines.append(
            f"- query vectors: {check['bit_equal']}/{check['queries']} bit-equal, "
            f"max |difference| {check['max_abs_difference']:.3g} (tolerance {check['tolerance']:g})"
        )
    for violation in report["violations"][:20]:
        lines.append(
            f"- violation {violation['kind']}: {violation['method']} {violation['query']}: "
            f"{violation['detail']}"
        )
    return "\n".join(lines) + "\n"
