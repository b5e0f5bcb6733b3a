"""Ranking profiles: named, immutable, versioned rankings stored inside an index directory.

A profile *is* an arm spec (:mod:`weftsearch.ranking.specs`) plus metadata: the
expression text (``rrf(bm25, vector, k=60)``), the depth asked of each scorer,
an optional default filter (string form), where it came from (provenance: who
or what made it, the dataset hashes and development score when learned fusion
chose it) and when it was made. What an evaluation measured is what the server
runs: both build the scorers and the fuser from the same text, by the same code.

Storage (``DIR/profiles/NAME.vNNNNNN.json``, one file per version): each file
is canonical JSON carrying a format tag (:data:`PROFILE_FORMAT`), the id of the
index it belongs to, and the SHA-256 of the rest of its content. A version is
written to a temporary file, fsynced, then *linked* to its final name, which
fails if the name exists: a new version never overwrites an old one, even when
two processes race (the loser takes the next number). Readers refuse a file
whose tag, index id, name, version or checksum is not what they expect
(:class:`~weftsearch.errors.CorruptIndexError`). The index's sweep
(:meth:`weftsearch.storage.directory.IndexDirectory.sweep`) deletes only files
matching its own names at the top of the directory, never this folder. A
sharded index keeps its profiles in its own directory, beside its commit
record, each file naming the sharded index's id (:meth:`ProfileStore.at`).

This module needs no web framework: ``weft-search eval --save-profile`` uses it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from weftsearch.engine.filters import parse_filter
from weftsearch.errors import CorruptIndexError, IndexNotFoundError, InvalidParameterError, UnknownKeyError
from weftsearch.ranking.arm import Arm
from weftsearch.ranking.specs import LEARNED, ArmBuilder, parse_arm
from weftsearch.storage.directory import IndexDirectory, is_index_id
from weftsearch.storage.files import read_regular

__all__ = [
    "PROFILE_FORMAT",
    "PROFILE_NAME",
    "Profile",
    "ProfileProvenance",
    "ProfileStore",
    "ProfileNotFoundError",
    "check_profile_name",
    "build_arm",
    "spec_of_fuser",
]

#: The format tag every profile file carries.
PROFILE_FORMAT = "weft-search-profile/1"

#: What a profile name may be: it becomes part of a file name, so no path separator, no dot.
PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")

#: The largest version number (six digits in the file name).
MAX_VERSION = 999_999

_FILE = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9_-]{0,63})\.v(?P<version>\d{6})\.json")

PROFILES_DIR = "profiles"


class ProfileNotFoundError(UnknownKeyError):
    """No profile (or no such version of it) is stored in the index."""


def check_profile_name(name: object) -> str:
    """Return ``name`` if it is a valid profile name.

    Raises:
        InvalidParameterError: not 1-64 characters of letters, digits, ``_``
            and ``-`` starting with a letter or digit (so never a path).

    """
    if not isinstance(name, str) or PROFILE_NAME.fullmatch(name) is None:
        raise InvalidParameterError(
            f"a profile name is 1-64 letters, digits, '_' or '-' (starting with a letter or digit), "
            f"never a path; got {name!r}"
        )
    return name


def build_arm(spec: str, depth: int | None = None, filter_text: str | None = None, *, name: str = "p") -> Arm:
    """The :class:`~weftsearch.ranking.arm.Arm` of a ranking expression, as the eval harness builds it.

    Args:
        spec: ``EXPR[@DEPTH]`` of :mod:`weftsearch.ranking.specs` (``rrf(bm25, vector, k=60)@100``);
            ``learned(...)`` is refused (a served ranking needs a concrete fuser).
        depth: candidates per scorer; overrides nothing: giving a different
            ``@DEPTH`` in ``spec`` as well is refused. ``None``: the spec's, else 100.
        filter_text: a default filter in string form, or ``None``.
        name: the arm's name.

    Raises:
        InvalidParameterError: a malformed spec or filter, ``learned``, ``where`` in the spec.
        UnknownSignalError: an unknown scorer.

    """
    if not isinstance(spec, str) or not spec.strip():
        raise InvalidParameterError(
            "a ranking spec must be a non-empty string, as in 'rrf(bm25, vector, k=60)'"
        )
    parsed = parse_arm(f"{name}={spec}")
    if parsed.filter is not None:
        raise InvalidParameterError("give a profile's filter in its own field, not with 'where' in the spec")
    if parsed.expr.name == LEARNED:
        raise InvalidParameterError(
            "learned(...) is chosen on development queries by 'weft-search eval --save-profile'; "
            "a served ranking needs a concrete fuser (rrf, weighted or score)"
        )
    if depth is not None and parsed.depth is not None and depth != parsed.depth:
        raise InvalidParameterError(f"depth {depth} differs from the spec's @{parsed.depth}")
    arm = ArmBuilder().arm(parsed)
    if depth is not None and depth != arm.depth:
        arm = Arm(arm.name, arm.scorers, arm.fuser, depth=depth, notes=arm.notes)
    if filter_text is not None:
        parse_filter(filter_text)  # refused here, not at the first search
    return arm


def spec_of_fuser(fuser: Any, scorers: str) -> str:
    """The spec expression of a built-in fuser over ``scorers`` (comma-separated scorer expressions).

    Used to save the fuser learned fusion chose as text the spec language reads back.

    Raises:
        InvalidParameterError: not an ``RRF``, ``WeightedRRF`` or ``ScoreFusion``.

    """
    from weftsearch.fusion import RRF, ScoreFusion, WeightedRRF

    def number(value: float) -> str:
        return repr(float(value))

    if isinstance(fuser, WeightedRRF):
        weights = ", ".join(number(w) for w in fuser.weights)
        return f"weighted({scorers}, weights=[{weights}], k={number(fuser.k)})"
    if isinstance(fuser, RRF):
        return f"rrf({scorers}, k={number(fuser.k)})"
    if isinstance(fuser, ScoreFusion):
        parts = [scorers]
        if fuser.weights is not None:
            parts.append("weights=[" + ", ".join(number(w) for w in fuser.weights) + "]")
        parts.append(f"norm={fuser.norm}")
        return f"score({', '.join(parts)})"
    raise InvalidParameterError(f"cannot write {fuser!r} as a spec: not a built-in fuser")


@dataclass(frozen=True)
class ProfileProvenance:
    """Where a profile came from: one typed record every maker fills (``eval --save-profile``, the API).

    Stored as the profile's ``provenance`` (:meth:`to_dict`) and read back
    with :meth:`Profile.provenance_record`, which also reads the short
    records the server writes today (``{"source": "api"}``: every other field
    at its default).

    Attributes:
        source: who made it (``"api"``, ``"weft-search eval --save-profile"``).
        command: the command line that made it.
        code: the code version at the time (package, git commit, platform).
        arm: the spec text of what was measured (as the user wrote it, or a grid cell's).
        testbed: the data it was measured on: collection, files with sizes and
            SHA-256, index content hash, loader parameters.
        split: the judgements it was chosen on (a development split).
        removed_query_ids: query id -> the query it duplicates, for queries the
            split left out (a development split's duplicates of test queries).
        scores: the saved ranking's means on ``split``, by measure.
        selection: how it was chosen (the rule, its words, which key decided, the pick).
        grid: the grid file it was picked from (path, SHA-256, template, axes, baseline).
        cells: every grid cell: index, axis values, spec and means on ``split``.
        development: learned fusion's development split record.
        learned: learned fusion's choice (fuser, measure, development score).

    """

    source: str
    command: str = ""
    code: Mapping[str, Any] = field(default_factory=dict)
    arm: str = ""
    testbed: Mapping[str, Any] = field(default_factory=dict)
    split: str | None = None
    removed_query_ids: Mapping[str, str] = field(default_factory=dict)
    scores: Mapping[str, float] = field(default_factory=dict)
    selection: Mapping[str, Any] = field(default_factory=dict)
    grid: Mapping[str, Any] = field(default_factory=dict)
    cells: Sequence[Mapping[str, Any]] = ()
    development: Mapping[str, Any] = field(default_factory=dict)
    learned: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.source, str) or not self.source:
            raise InvalidParameterError(f"a profile's provenance needs a source, got {self.source!r}")

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain JSON (an empty one says so: ``removed_query_ids: {}`` removed none).

        Raises:
            InvalidParameterError: a value that is not plain JSON.

        """
        out = {item.name: getattr(self, item.name) for item in fields(self)}
        try:
            # Through JSON and back: mappings and tuples become plain dicts and lists.
            plain: dict[str, Any] = json.loads(json.dumps(out, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise InvalidParameterError(f"a profile's provenance must be plain JSON: {exc}") from None
        return plain

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProfileProvenance:
        """The record of a stored ``provenance`` (missing fields at their defaults, unknown ones left out).

        Raises:
            InvalidParameterError: no ``source``.

        """
        known = {item.name for item in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})


@dataclass(frozen=True, slots=True)
class Profile:
    """One version of a ranking profile.

    Attributes:
        name: the profile's name (:data:`PROFILE_NAME`).
        version: 1, 2, ... in order of creation.
        spec: the ranking expression (``rrf(bm25, vector, k=60)``).
        depth: candidates asked of each scorer per query.
        filter: a default filter (string form) applied when a request gives none, or ``None``.
        description: free text.
        provenance: where it came from (JSON values): :meth:`ProfileProvenance.to_dict`
            (``{"source": "api"}``, or an evaluation's dataset hashes, split,
            scores and selection); :meth:`provenance_record` reads it back typed.
        created: POSIX seconds when this version was written.

    """

    name: str
    version: int
    spec: str
    depth: int
    filter: str | None = None
    description: str = ""
    provenance: dict[str, Any] = field(default_factory=dict)
    created: float = 0.0

    def provenance_record(self) -> ProfileProvenance:
        """:attr:`provenance` as a :class:`ProfileProvenance` (a profile stored without one: ``unknown``)."""
        return ProfileProvenance.from_dict({"source": "unknown", **self.provenance})

    def arm(self) -> Arm:
        """The arm this profile runs (scorers, fuser, depth)."""
        return build_arm(self.spec, self.depth, self.filter, name=self.name)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, as the API returns it."""
        return {
            "name": self.name,
            "version": self.version,
            "spec": self.spec,
            "depth": self.depth,
            "filter": self.filter,
            "description": self.description,
            "provenance": self.provenance,
            "created": self.created,
        }


def _canonical(payload: dict[str, Any]) -> bytes:
    return json.dumps(
        payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    ).encode()


def _sealed(record: dict[str, Any]) -> bytes:
    """A profile file's bytes: ``record`` with the SHA-256 of its canonical form, canonical too."""
    return _canonical({**record, "sha256": hashlib.sha256(_canonical(record)).hexdigest()})


class ProfileStore:
    """The profiles of one index directory (or, with :meth:`at`, of a sharded index).

    Args:
        index_path: the index directory (must hold an index).

    Thread-safe; creating versions from several processes is safe too (see
    the module docstring). Reads are cached per file (files never change).

    Raises:
        IndexNotFoundError: no index at ``index_path``.

    """

    def __init__(self, index_path: str | os.PathLike[str]) -> None:
        directory = IndexDirectory(Path(index_path))
        directory.check_exists()
        self._keep(directory.path, directory.read_manifest().index_id)

    def _keep(self, root: Path, index_id: str) -> None:
        """Keep the profiles of index ``index_id`` in ``root``/profiles (both constructors end here)."""
        self.index_id = index_id
        self.folder = root / PROFILES_DIR
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, int], Profile] = {}

    @classmethod
    def at(cls, directory: str | os.PathLike[str], index_id: str) -> ProfileStore:
        """The profiles kept in ``directory``/profiles, each file naming ``index_id`` as its owner.

        For an index that is not one directory: a sharded index keeps its
        profiles in its own directory, beside its commit record, under its
        id (:mod:`weftsearch.server.sharded`). The files are the same as an
        index's, written and checked the same way.

        Raises:
            IndexNotFoundError: ``directory`` does not exist.
            InvalidParameterError: ``index_id`` is not 32 lowercase hex digits.

        """
        root = Path(directory)
        if not root.is_dir():
            raise IndexNotFoundError(f"{root}: no such directory")
        if not is_index_id(index_id):
            raise InvalidParameterError(f"index_id must be 32 lowercase hex digits, got {index_id!r}")
        store = cls.__new__(cls)
        store._keep(root, index_id)
        return store

    def _versions(self) -> dict[str, list[int]]:
        found: dict[str, list[int]] = {}
        if not self.folder.is_dir():
            return found
        for child in self.folder.iterdir():
            match = _FILE.fullmatch(child.name)
            if match is not None:
                found.setdefault(match["name"], []).append(int(match["version"]))
        for versions in found.values():
            versions.sort()
        return found

    def names(self) -> list[str]:
        """Every stored profile name, sorted."""
        return sorted(self._versions())

    def versions(self, name: str) -> list[int]:
        """The stored versions of ``name``, ascending (empty if none)."""
        return self._versions().get(check_profile_name(name), [])

    def latest(self) -> list[Profile]:
        """The newest version of every profile, by name."""
        return [self.get(name) for name in self.names()]

    def get(self, name: str, version: int | None = None) -> Profile:
        """Version ``version`` of ``name`` (``None``: the newest).

        Raises:
            InvalidParameterError: a bad name or version.
            ProfileNotFoundError: no such profile or version.
            CorruptIndexError: the file is not this index's, or fails its checksum.

        """
        check_profile_name(name)
        if version is None:
            versions = self.versions(name)
            if not versions:
                raise ProfileNotFoundError(f"no profile named {name!r}")
            version = versions[-1]
        if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= MAX_VERSION:
            raise InvalidParameterError(
                f"a profile version is an integer from 1 to {MAX_VERSION}, got {version!r}"
            )
        cached = self._cache.get((name, version))
        if cached is not None:
            return cached
        path = self.folder / f"{name}.v{version:06d}.json"
        try:
            data = read_regular(path)  # a FIFO or link put in the folder is refused, never waited on
        except FileNotFoundError:
            raise ProfileNotFoundError(f"profile {name!r} has no version {version}") from None
        profile = self._decode(data, name, version)
        self._cache[(name, version)] = profile
        return profile

    def _decode(self, data: bytes, name: str, version: int) -> Profile:
        where = f"profile file {name}.v{version:06d}.json"
        try:
            record = json.loads(data)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
            raise CorruptIndexError(f"{where}: not JSON ({exc})") from None
        if not isinstance(record, dict) or record.get("format") != PROFILE_FORMAT:
            raise CorruptIndexError(f"{where}: not a {PROFILE_FORMAT} file")
        checksum = record.pop("sha256", None)
        if checksum != hashlib.sha256(_canonical(record)).hexdigest():
            raise CorruptIndexError(f"{where}: fails its checksum")
        if record.get("index_id") != self.index_id:
            raise CorruptIndexError(
                f"{where}: belongs to index {record.get('index_id')!r}, not {self.index_id!r}"
            )
        if record.get("name") != name or record.get("version") != version:
            raise CorruptIndexError(
                f"{where}: holds {record.get('name')!r} version {record.get('version')!r}"
            )
        try:
            return Profile(
                name=name,
                version=version,
                spec=str(record["spec"]),
                depth=int(record["depth"]),
                filter=None if record.get("filter") is None else str(record["filter"]),
                description=str(record.get("description", "")),
                provenance=dict(record.get("provenance", {})),
                created=float(record["created"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptIndexError(f"{where}: missing or malformed entry ({exc})") from None

    def create(
        self,
        name: str,
        spec: str,
        *,
        depth: int | None = None,
        filter: str | None = None,
        description: str = "",
        provenance: ProfileProvenance | Mapping[str, Any] | None = None,
    ) -> Profile:
        """Write the next version of ``name`` and return it; earlier versions stay as they are.

        The spec is built once first (an arm that does not build is never stored).

        Raises:
            InvalidParameterError: a bad name, spec, depth, filter or provenance (not JSON).
            UnknownSignalError: an unknown scorer.

        """
        check_profile_name(name)
        arm = build_arm(spec, depth, filter, name=name)
        if not isinstance(description, str):
            raise InvalidParameterError("a profile's description must be a string")
        record: dict[str, Any] = {
            "format": PROFILE_FORMAT,
            "index_id": self.index_id,
            "name": name,
            "spec": spec.strip(),
            "depth": arm.depth,
            "filter": filter,
            "description": description,
            "provenance": provenance.to_dict()
            if isinstance(provenance, ProfileProvenance)
            else dict(provenance or {}),
            "created": round(time.time(), 3),
        }
        try:
            _canonical(record)
        except (TypeError, ValueError) as exc:
            raise InvalidParameterError(f"a profile's provenance must be plain JSON: {exc}") from None
        self.folder.mkdir(exist_ok=True)
        with self._lock:
            versions = self.versions(name)
            version = (versions[-1] if versions else 0) + 1
            while True:
                if version > MAX_VERSION:
                    raise InvalidParameterError(f"profile {name!r} has reached version {MAX_VERSION}")
                record["version"] = version
                if self._write_new(self.folder / f"{name}.v{version:06d}.json", _sealed(record)):
                    break
                version += 1  # another process took this number first
        return self.get(name, version)

    def _write_new(self, target: Path, data: bytes) -> bool:
        """Write ``data`` at ``target`` complete or not at all; False (nothing written) if it exists."""
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(temporary, 0o644)
            try:
                os.link(temporary, target)  # unlike rename, never replaces an existing file
            except FileExistsError:
                return False
            directory = os.open(target.parent, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
            return True
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
