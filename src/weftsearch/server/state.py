"""What the routes share: the served index, its profiles, limits, watch, key, metrics and rankings.

One :class:`ServerState` per application, held on ``app.state.weft``; a route
reaches it through the :data:`Served` dependency. It also holds the steps
several routes take alike: adopting the writer's newest commit, running a
search, publishing a write, and turning a request's ranking and queries
into the library's :class:`Arm` and :class:`Query` under the server's limits.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Request

from weftsearch.engine.filters import parse_filter
from weftsearch.engine.index import Index
from weftsearch.engine.query import Query
from weftsearch.engine.search import SearchResults
from weftsearch.engine.snapshot import Snapshot
from weftsearch.errors import IndexStorageError, InvalidVectorError, WeftError
from weftsearch.highlight import HighlightOptions
from weftsearch.ranking.arm import Arm
from weftsearch.ranking.profiles import Profile, ProfileStore, build_arm
from weftsearch.scorers.vector import VectorScorer
from weftsearch.server.embedding import QueryEmbedder
from weftsearch.server.errors import ApiError, about_field, status_of
from weftsearch.server.limits import ServerLimits
from weftsearch.server.logs import redact
from weftsearch.server.metrics import Metrics
from weftsearch.server.models import QueryIn, RankingIn
from weftsearch.server.sharded import ServedIndex

__all__ = ["DEFAULT_SPEC", "DirectoryWatch", "Ranking", "Served", "ServerState", "served", "vector_of"]

LOG = logging.getLogger("weftsearch.server")

#: The ranking of a request that names neither a profile nor a spec.
DEFAULT_SPEC = "rrf(bm25, vector, k=60)@100"


class DirectoryWatch:
    """Notices the index directory deleted or replaced under the server, and then stays lost.

    The server keeps serving what it opened (mapped files outlive their
    names), so without a check searches answered 200 from the old data while
    stats and get answered 500 and ``/health`` said ok. A check is a ``stat``
    of the directory and of its manifest; the manifest is read again only
    when its file changed (a commit), to compare the index id. Once lost,
    the server answers 503 until restarted: it never mixes the old index
    with a new one (docs: README, "Deploy the server").
    """

    def __init__(
        self, path: Path, record: str | None = None, read_id: Callable[[Path], str] | None = None
    ) -> None:
        """Watch ``path``, whose ``record`` file (default ``MANIFEST``) ``read_id`` reads the index id of.

        A sharded index is watched through its ``SHARDS`` record and
        :func:`weftsearch.distributed.sharded.record_index_id`.
        """
        from weftsearch.storage.directory import MANIFEST

        self.path = path
        self._record = MANIFEST if record is None else record
        self._read = _manifest_id if read_id is None else read_id
        opened = path.stat()
        self._directory = (opened.st_dev, opened.st_ino)
        self._manifest: tuple[int, int, int, int] | None = None
        self._index_id = self._read_id()
        self.lost: str | None = None
        self._lock = threading.Lock()

    def _read_id(self) -> str:
        where = self.path / self._record
        seen = where.stat()
        index_id = self._read(self.path)
        self._manifest = (seen.st_ino, seen.st_size, seen.st_mtime_ns, seen.st_ctime_ns)
        return index_id

    def problem(self) -> str | None:
        """Why the index cannot be served any more (and never again), or ``None`` while it can."""
        with self._lock:
            if self.lost is None:
                self.lost = self._check()
                if self.lost is not None:
                    LOG.error("%s: %s", self.path, self.lost)
            return self.lost

    def _check(self) -> str | None:
        restart = "restart the server to serve what is there now"
        try:
            now = self.path.stat()
        except FileNotFoundError:
            return f"the index directory was deleted under the server; {restart}"
        except OSError as exc:
            return f"the index directory cannot be read ({exc.strerror}); {restart}"
        if (now.st_dev, now.st_ino) != self._directory:
            return f"the index directory was replaced under the server (another one is there); {restart}"
        try:
            seen = (self.path / self._record).stat()
        except OSError:
            return f"the index directory lost its {self._record} under the server; {restart}"
        if (seen.st_ino, seen.st_size, seen.st_mtime_ns, seen.st_ctime_ns) == self._manifest:
            return None
        try:
            index_id = self._read_id()
        except (OSError, WeftError) as exc:
            kind = type(exc).__name__
            return f"the index directory's {self._record} is no longer an index's ({kind}); {restart}"
        if index_id != self._index_id:
            return f"the index directory now holds another index (id {index_id}); {restart}"
        return None


def _manifest_id(path: Path) -> str:
    """The index id in the ``MANIFEST`` of the index directory ``path``."""
    from weftsearch.storage.directory import MANIFEST, Manifest
    from weftsearch.storage.files import read_regular

    where = path / MANIFEST
    return Manifest.from_bytes(read_regular(where), where).index_id


@dataclass(frozen=True, slots=True)
class Ranking:
    """A request's ranking: the arm, a profile's default filter, and the label answers carry."""

    arm: Arm
    filter: str | None
    label: dict[str, Any]


class ServerState:
    """What the routes share: the index, its profiles, options, write lock and compiled rankings."""

    def __init__(
        self,
        index: ServedIndex,
        profiles: ProfileStore,
        limits: ServerLimits,
        embedder: QueryEmbedder | None,
        watch: DirectoryWatch | None = None,
        *,
        owned: bool = False,
        api_key: str | None = None,
        read_key_required: bool = False,
        writer_socket: str | None = None,
        metrics_dir: str | PathLike[str] | None = None,
        commit_writes: bool = False,
    ) -> None:
        self.index = index
        self.profiles = profiles
        self.limits = limits
        self.embedder = embedder
        self.watch = watch
        self.owned = owned  # the server closes only what it opened
        self.api_key = api_key
        self.expected_key = None if api_key is None else api_key.encode("utf-8", "surrogateescape")
        self.read_key_required = read_key_required
        self.writer_socket = writer_socket
        self.metrics_dir = metrics_dir
        self.commit_writes = commit_writes
        self.metrics = Metrics(metrics_dir)
        self.writes = threading.Lock()
        self._rankings: OrderedDict[tuple[Any, ...], Ranking] = OrderedDict()
        self._rankings_lock = threading.Lock()

    # ---- rankings

    def _cached(self, key: tuple[Any, ...], make: Callable[[], Ranking]) -> Ranking:
        with self._rankings_lock:
            found = self._rankings.get(key)
            if found is not None:
                self._rankings.move_to_end(key)
                return found
        made = make()
        with self._rankings_lock:
            self._rankings[key] = made
            while len(self._rankings) > 256:
                self._rankings.popitem(last=False)
        return made

    def ranking(self, request: RankingIn, where: str = "") -> Ranking:
        """The arm a request selects (a profile, a spec, or :data:`DEFAULT_SPEC`), built once and cached."""
        if request.profile is not None and request.spec is not None:
            raise ApiError(
                400, "InvalidParameterError", "give a profile or a spec, not both", where + "profile"
            )
        if request.spec is not None:
            spec = request.spec
            self.check_length(spec, where + "spec")
            with about_field(where + "spec"):
                ranking = self._cached(
                    ("spec", spec), lambda: Ranking(build_arm(spec), None, {"spec": spec.strip()})
                )
        elif request.profile is not None:
            ref = request.profile
            name, version = (ref, None) if isinstance(ref, str) else (ref.name, ref.version)
            with about_field(where + "profile"):
                profile = self.profiles.get(name, version)
            ranking = self._cached(
                ("profile", profile.name, profile.version), lambda: self._of_profile(profile)
            )
        else:
            ranking = self._cached(
                ("spec", DEFAULT_SPEC),
                lambda: Ranking(build_arm(DEFAULT_SPEC), None, {"spec": DEFAULT_SPEC}),
            )
        if request.depth is not None:
            if request.depth > self.limits.max_depth:
                raise self.too_large(where + "depth", request.depth, self.limits.max_depth, "max_depth")
            arm = ranking.arm
            ranking = Ranking(
                Arm(arm.name, arm.scorers, arm.fuser, depth=request.depth), ranking.filter, ranking.label
            )
        if ranking.arm.depth > self.limits.max_depth:
            raise self.too_large(where + "depth", ranking.arm.depth, self.limits.max_depth, "max_depth")
        return ranking

    @staticmethod
    def _of_profile(profile: Profile) -> Ranking:
        return Ranking(profile.arm(), profile.filter, {"profile": profile.name, "version": profile.version})

    # ---- limits and queries

    @staticmethod
    def too_large(field: str, value: int, limit: int, option: str | None = None) -> ApiError:
        """The 422 of a request over a limit, naming the limit and the ``serve`` option that sets it."""
        where = f" (weft-search serve --{option.replace('_', '-')})" if option else ""
        return ApiError(
            422, "LimitExceeded", f"{field} is {value}; this server allows at most {limit}{where}", field
        )

    def check_length(self, text: str | None, field: str) -> None:
        """Refuse a text (query, filter, spec) over ``max_query_chars``."""
        if text is not None and len(text) > self.limits.max_query_chars:
            raise self.too_large(field, len(text), self.limits.max_query_chars, "max_query_chars")

    def check_k(self, k: int, field: str = "k") -> None:
        """Refuse a ``k`` over ``max_k``."""
        if k > self.limits.max_k:
            raise self.too_large(field, k, self.limits.max_k, "max_k")

    def check_batch(self, count: int, field: str, limit: str = "max_batch") -> None:
        """Refuse no queries, or more than the limit named ``limit`` (``max_batch``, ``max_queries``)."""
        bound = getattr(self.limits, limit)
        if count > bound:
            raise self.too_large(field, count, bound, limit)
        if count == 0:
            raise ApiError(422, "InvalidParameterError", f"{field} is empty", field)

    def query(self, q: QueryIn, default_filter: str | None, where: str = "") -> Query:
        """The :class:`Query` of ``q``, each part checked under its own field name (no embedding)."""
        self.check_length(q.text, where + "text")
        self.check_length(q.filter, where + "filter")
        if q.vector is not None and len(q.vector) > self.limits.max_vector_dim:
            raise self.too_large(
                where + "vector", len(q.vector), self.limits.max_vector_dim, "max_vector_dim"
            )
        self.check_vector_source(q, where)
        if len(q.seeds) > self.limits.max_seeds:
            raise self.too_large(where + "seeds", len(q.seeds), self.limits.max_seeds, "max_seeds")
        with about_field(where + "text"):
            # No text (a vector-only query) has nothing to parse: no tree, as in plain syntax.
            lucene = q.syntax == "lucene" and bool(q.text.strip())
            tree = Query.parse(q.text).tree if lucene else Query(text=q.text).tree
        with about_field(where + "seeds"):
            Query(seeds=tuple(q.seeds))
        with about_field(where + "time"):
            Query(time=q.time)
        filter_text = q.filter if q.filter is not None else default_filter
        with about_field(where + "filter"):
            parsed = None if filter_text is None else parse_filter(filter_text)
        with about_field(where + "vector"):
            return Query(
                text=q.text,
                vector=vector_of(q.vector),
                seeds=tuple(q.seeds),
                time=q.time,
                filter=parsed,
                tree=tree,
            )

    def check_vector_source(self, q: QueryIn, where: str) -> None:
        """Refuse a vector of another width than the index's, or declared to come from another model."""
        model = self.embedder.model if self.embedder is not None else None
        if q.vector_model is not None:
            if q.vector is None:
                raise ApiError(
                    422,
                    "InvalidParameterError",
                    "vector_model says which model made the vector, and no vector was sent",
                    where + "vector_model",
                )
            if model is not None and not model.accepts(q.vector_model):
                raise ApiError(
                    400,
                    "VectorModelMismatch",
                    f"the query vector was made with {q.vector_model!r} ({len(q.vector)} dims), but "
                    f"this index's vectors were made with {model.describe()}; embed the query with "
                    "that model, or send the text only and let the server embed it",
                    where + "vector_model",
                )
        width = self.index.vector_dim
        if q.vector is not None and width is not None and len(q.vector) != width:
            declared = f"made with {q.vector_model!r}, " if q.vector_model is not None else ""
            made = f"made with {model.describe()}" if model is not None else "of unrecorded model"
            raise ApiError(
                400,
                "VectorModelMismatch",
                f"the query vector ({declared}{len(q.vector)} dims) is not of this index's width: "
                f"its vectors have {width} dims ({made})",
                where + "vector",
            )

    def queries(
        self, items: Sequence[tuple[QueryIn, str]], ranking: Ranking
    ) -> tuple[list[Query], list[dict[str, Any]]]:
        """The :class:`Query` of each ``(query, field prefix)`` and where its vector came from.

        A query without a vector whose ranking needs one (a scorer's
        ``missing_input`` says ``"a query vector"``) and with text gets the
        text embedded with the index's model, when the server knows it; the
        texts of one request are embedded in one batch.
        """
        built = [self.query(q, ranking.filter, where) for q, where in items]
        model = self.embedder.model if self.embedder is not None else None
        sources: list[dict[str, Any]] = []
        for q in (q for q, _ in items):
            if q.vector is None:
                sources.append({"source": "none", "model": None, "vectors": None, "dims": None})
                continue
            named, vectors = q.vector_model, None  # a vector that names no model: only its width is known
            if model is not None and q.vector_model is not None:  # accepted by check_vector_source
                named, vectors = model.name, model.vectors
            sources.append({"source": "request", "model": named, "vectors": vectors, "dims": len(q.vector)})
        needs = any(query.vector is None for query in built) and self.needs_vector(ranking)
        todo = [i for i, query in enumerate(built) if query.vector is None and query.text.strip()]
        if needs and todo and self.embedder is not None:
            self.embed(built, sources, todo, items)
        if needs:
            # Never a silent degrade: a vector stream searched without a query vector is empty,
            # so a hybrid ranking would quietly be its other streams alone (as eval refuses).
            for i, query in enumerate(built):
                if query.vector is None:
                    raise self.missing_vector(ranking, items[i][1])
        return built, sources

    def embed(
        self,
        built: list[Query],
        sources: list[dict[str, Any]],
        todo: list[int],
        items: Sequence[tuple[QueryIn, str]],
    ) -> None:
        """Give the queries at ``todo`` the vector of their text (one batch), and say so in ``sources``."""
        assert self.embedder is not None
        embedder = self.embedder
        with about_field(items[todo[0]][1] + "text"):
            rows = embedder.embed([built[i].text for i in todo])
        for i, row in zip(todo, rows, strict=True):
            query = built[i]
            built[i] = dataclasses.replace(query, vector=row)
            sources[i] = {
                "source": "server",
                "model": embedder.model.name,
                "vectors": embedder.model.vectors,
                "dims": embedder.model.dims,
            }

    def missing_vector(self, ranking: Ranking, where: str) -> ApiError:
        """The 400 of a query without a vector whose ranking needs one, naming what is missing."""
        label = ranking.label.get("spec") or f"profile {ranking.label.get('profile')!r}"
        width = self.index.vector_dim
        send = f"send the query's vector in {where}vector" + (f" ({width} numbers)" if width else "")
        if not isinstance(self.index, Index) and self.embedder is None:
            why = "a server over a sharded index made without an embedder cannot embed query text"
        elif self.embedder is None:
            why = (
                "this server cannot embed query text (it was started without --vectors-record, "
                "the record of the model that made the index's vectors)"
            )
        else:
            why = "the query's text is empty, so the server has nothing to embed"
        return ApiError(
            400,
            "MissingInputError",
            f"the ranking {label} has a vector scorer, which needs a query vector, and the query has "
            f"none: {why}; {send}, or choose a ranking without the vector scorer (spec 'bm25')",
            where + "vector",
        )

    def needs_vector(self, ranking: Ranking) -> bool:
        """Whether a scorer of ``ranking`` lacks a query vector (not merely vectors in the index)."""
        if not isinstance(self.index, Index):
            # No snapshot here (the shards may be Ray actors): the vector scorer needs a query
            # vector wherever the shards hold vectors.
            return self.index.vector_dim is not None and any(
                isinstance(scorer, VectorScorer) for scorer in ranking.arm.scorers
            )
        snapshot = self.index.snapshot()
        probe = Query()
        for scorer in ranking.arm.scorers:
            missing = getattr(scorer, "missing_input", None)
            if callable(missing) and missing(snapshot, probe) == "a query vector":
                return True
        return False

    # ---- reading and writing

    def unavailable(self) -> str | None:
        """Why the index cannot be served (its directory deleted or replaced), or ``None``."""
        return None if self.watch is None else self.watch.problem()

    def unkeyed(self, message: str) -> str:
        """``message`` with the API key blotted out."""
        # Errors echo values (a document key, a path) that a client may have filled with the key.
        return redact(message, [self.api_key]) if self.api_key else message

    def adopt_commits(self) -> None:
        """A read-only server adopts the writer's newest commit before each read (one manifest read)."""
        if self.index.readonly:
            try:
                self.index.refresh()
            except IndexStorageError as exc:
                problem = self.unavailable()  # the directory went between the check and this read
                if problem is not None:
                    raise ApiError(503, "IndexUnavailable", problem) from None
                raise ApiError(status_of(exc), type(exc).__name__, str(exc)) from None

    def run_search(
        self,
        ranking: Ranking,
        queries: list[Query],
        k: int,
        offset: int = 0,
        after: str | None = None,
        *,
        facets: list[str] | None = None,
        facet_k: int = 10,
        highlight: HighlightOptions | None = None,
        snapshot: Snapshot | None = None,
    ) -> list[SearchResults]:
        """Search (callers adopt the newest commit first, before building the queries).

        ``snapshot`` (a single index's, one query): search it rather than the current one.

        ``offset``/``after`` page one query (:mod:`weftsearch.engine.pages`);
        ``facets`` (one query only): the fields counted into ``results.facets``;
        ``highlight`` (one query): the hits' snippets (a sharded index reads
        each hit's from its shard).

        """
        arm = ranking.arm
        if len(queries) == 1:
            depth = max(arm.depth, k)
            return [
                self.index.search(
                    queries[0],
                    k,
                    arm.fuser,
                    *arm.scorers,
                    depth=depth,
                    offset=offset,
                    after=after,
                    facets=facets,
                    facet_k=facet_k,
                    highlight=highlight,
                    **({} if snapshot is None else {"snapshot": snapshot}),
                )
            ]
        return list(
            self.index.search_many(
                queries,
                k,
                arm.fuser,
                *arm.scorers,
                depth=max(arm.depth, k),
                threads=self.limits.search_threads,
            )
        )

    def check_writable(self) -> None:
        """Refuse a write on a read-only server (409)."""
        if self.index.readonly:
            raise ApiError(409, "ReadOnly", "this server serves a read-only index; writes go to its writer")

    def publish(self) -> dict[str, Any]:
        """Make the write just made visible to every read (under the write lock); its generation.

        One process publishes it in memory. With ``commit_writes`` (the ``--workers N``
        writer) it is committed first, since the reader processes adopt commits only.
        """
        if self.commit_writes:
            self.index.commit()
        self.index.refresh()
        return {"generation": self.index.generation, "committed": self.commit_writes}

    def shut_down(self) -> None:
        """Commit what was written (when writable and still the index opened) and close what was opened."""
        with self.writes:
            problem = self.unavailable()
            index = self.index
            if problem is not None and not index.readonly and not index.closed:
                # Committing now would write this index's manifest into whatever is there now.
                LOG.error("no commit at shutdown (uncommitted writes are lost): %s", problem)
            elif not index.readonly and not index.closed:
                try:
                    index.commit()  # a graceful shutdown keeps what was written (a no-op when nothing was)
                except WeftError as exc:
                    LOG.error("the commit at shutdown failed; uncommitted writes are lost: %s", exc)
            if self.owned:
                assert isinstance(index, Index)
                index.close(discard=True)


async def served(request: Request) -> ServerState:
    """The :class:`ServerState` of the application answering ``request`` (a FastAPI dependency)."""
    state: ServerState = request.app.state.weft
    return state


#: A route's parameter of this type receives the application's :class:`ServerState`.
Served = Annotated[ServerState, Depends(served)]


def vector_of(values: list[float] | None) -> Any:
    """A request's vector as float32 (``None`` stays ``None``), refusing values float32 cannot hold."""
    if values is None:
        return None
    import numpy as np

    wide = np.asarray(values, dtype=np.float64)
    if wide.size and float(np.abs(wide).max()) > float(np.finfo(np.float32).max):
        raise InvalidVectorError("a vector value is beyond float32's range (vectors are stored as float32)")
    return wide.astype(np.float32)
