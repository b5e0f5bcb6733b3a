"""Ranking profiles: immutable versions in the index directory, refused when not theirs, survive sweeps."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.eval.test_user_folder import write_folder
from tests.server.conftest import KEY, WRITE, make_index
from weftsearch import Document, Index
from weftsearch.cli import main
from weftsearch.errors import CorruptIndexError, InvalidParameterError, UnknownSignalError
from weftsearch.fusion import RRF, ScoreFusion, WeightedRRF
from weftsearch.ranking.profiles import PROFILE_FORMAT, ProfileNotFoundError, ProfileStore, spec_of_fuser
from weftsearch.ranking.specs import ArmBuilder
from weftsearch.server.app import create_app


def test_versions_are_new_files_and_old_ones_stay(index_path: Path) -> None:
    store = ProfileStore(index_path)
    first = store.create("hybrid", "rrf(bm25, vector, k=60)@100")
    before = (index_path / "profiles" / "hybrid.v000001.json").read_bytes()
    second = store.create("hybrid", "rrf(bm25, vector, k=20)", depth=50, filter="year >= 1992")
    assert (first.version, second.version) == (1, 2)
    assert (index_path / "profiles" / "hybrid.v000001.json").read_bytes() == before
    assert store.get("hybrid") == second and store.get("hybrid", 1) == first
    assert store.versions("hybrid") == [1, 2] and store.names() == ["hybrid"]
    record = json.loads(before)
    assert record["format"] == PROFILE_FORMAT and record["index_id"] == "0123456789abcdef0123456789abcdef"
    assert len(record["sha256"]) == 64
    assert not [p for p in (index_path / "profiles").iterdir() if p.name.startswith(".")]  # no temporaries


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("rrf(bm25, nosuch)", UnknownSignalError),
        ("learned(bm25, vector)", InvalidParameterError),
        ("rrf(bm25, vector) where year > 1", InvalidParameterError),
        ("rrf(bm25,", InvalidParameterError),
        ("", InvalidParameterError),
    ],
)
def test_a_spec_that_does_not_build_is_never_stored(
    index_path: Path, spec: str, error: type[Exception]
) -> None:
    store = ProfileStore(index_path)
    with pytest.raises(error):
        store.create("p", spec)
    assert store.names() == []


@pytest.mark.parametrize("name", ["../x", "a/b", ".hidden", "a.b", "", "x" * 65, "é"])
def test_names_are_never_paths(index_path: Path, name: str) -> None:
    with pytest.raises(InvalidParameterError, match="never a path"):
        ProfileStore(index_path).create(name, "bm25")


def test_a_tampered_file_fails_its_checksum(index_path: Path) -> None:
    ProfileStore(index_path).create("p", "bm25@10")
    path = index_path / "profiles" / "p.v000001.json"
    path.write_bytes(path.read_bytes().replace(b'"depth":10', b'"depth":11'))
    with pytest.raises(CorruptIndexError, match="checksum"):
        ProfileStore(index_path).get("p")


def test_a_file_of_another_index_is_refused(tmp_path: Path) -> None:
    one = make_index(tmp_path / "one")
    with Index.create(tmp_path / "two") as other:
        other.add(Document("x", "text"))
    ProfileStore(one).create("p", "bm25")
    (tmp_path / "two" / "profiles").mkdir()
    (tmp_path / "two" / "profiles" / "p.v000001.json").write_bytes(
        (one / "profiles" / "p.v000001.json").read_bytes()
    )
    with pytest.raises(CorruptIndexError, match="belongs to index"):
        ProfileStore(tmp_path / "two").get("p")
    renamed = one / "profiles" / "q.v000001.json"
    renamed.write_bytes((one / "profiles" / "p.v000001.json").read_bytes())
    with pytest.raises(CorruptIndexError, match="holds 'p'"):
        ProfileStore(one).get("q")


def test_missing_profiles_and_versions(index_path: Path) -> None:
    store = ProfileStore(index_path)
    with pytest.raises(ProfileNotFoundError):
        store.get("p")
    store.create("p", "bm25")
    with pytest.raises(ProfileNotFoundError, match="no version 2"):
        store.get("p", 2)


def test_concurrent_creators_each_get_their_own_version(index_path: Path) -> None:
    """Separate stores (as separate processes would be): the link refuses a taken number."""
    made: list[int] = []
    lock = threading.Lock()

    def create(i: int) -> None:
        profile = ProfileStore(index_path).create("p", f"rrf(bm25, vector, k={10 + i})")
        with lock:
            made.append(profile.version)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(made) == list(range(1, 9))
    specs = {ProfileStore(index_path).get("p", v).spec for v in made}
    assert len(specs) == 8  # none overwrote another


def test_sweeps_commits_and_merges_leave_profiles_alone(index_path: Path) -> None:
    ProfileStore(index_path).create("p", "bm25")
    with Index.open(index_path) as index:  # opening a writer sweeps
        for i in range(3):
            index.add(Document(f"n{i}", "more text"))
            index.commit()
        index.merge(force=True)
        index.commit()
    with Index.open(index_path):
        pass
    assert ProfileStore(index_path).get("p").spec == "bm25"


@pytest.mark.parametrize(
    "fuser", [RRF(k=40), WeightedRRF([1.0, 0.3], k=20), ScoreFusion([1.0, 2.0], norm="zscore"), ScoreFusion()]
)
def test_a_fuser_written_as_spec_builds_back_to_the_same_fuser(fuser: object) -> None:
    text = spec_of_fuser(fuser, "bm25, vector")
    assert repr(ArmBuilder().arm(f"x={text}").fuser) == repr(fuser)


def test_profiles_over_http(index_path: Path) -> None:
    with TestClient(create_app(index_path, api_key=KEY)) as client:
        body = {"name": "hybrid-v1", "spec": "rrf(bm25, vector, k=60)@100", "description": "the default"}
        assert client.post("/v1/profiles", json=body).status_code == 401
        created = client.post("/v1/profiles", json=body, headers=WRITE)
        assert created.status_code == 201 and created.json()["version"] == 1
        body2 = {**body, "spec": "bm25", "filter": "year >= 1993"}
        assert client.post("/v1/profiles", json=body2, headers=WRITE).json()["version"] == 2
        listed = client.get("/v1/profiles").json()["profiles"]
        assert [(p["name"], p["version"], p["versions"]) for p in listed] == [("hybrid-v1", 2, [1, 2])]
        assert client.get("/v1/profiles/hybrid-v1/1").json()["spec"] == "rrf(bm25, vector, k=60)@100"
        assert client.get("/v1/profiles/hybrid-v1/3").status_code == 404
        assert client.get("/v1/profiles/nosuch").status_code == 404
        # the newest version applies its default filter; a request's own filter replaces it
        newest = client.post("/v1/search", json={"text": "graph ranking", "profile": "hybrid-v1"}).json()
        assert newest["ranking"] == {"profile": "hybrid-v1", "version": 2}
        assert all(hit["fields"]["year"] >= 1993 for hit in newest["hits"])
        old = client.post(
            "/v1/search",
            json={"text": "graph", "vector": [0.5] * 8, "profile": {"name": "hybrid-v1", "version": 1}},
        )
        assert old.json()["fuser"] == "rrf"
        bad = client.post("/v1/profiles", json={"name": "x", "spec": "rrf(bm25, nosuch)"}, headers=WRITE)
        assert bad.status_code == 400 and bad.json()["error"]["field"] == "spec"


def test_eval_save_profile_stores_the_learned_fuser_with_provenance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    splits = {
        "test": "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t1\n",
        "train": "q2\td5\t1\nq3\td6\t1\nq3\td4\t1\n",
    }
    folder = write_folder(tmp_path / "data", splits)
    index = make_index(tmp_path / "idx")
    argv = ["eval", str(folder), "--resamples", "20", "--k", "20", "--no-plots", "--arms", "text=bm25"]
    argv += ["learned=learned(bm25, recency(half_life=365))@50", "--save-profile", "tuned"]
    argv += ["--profile-index", str(index)]
    assert main(argv) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    profile = ProfileStore(index).get("tuned")
    assert f"saved profile tuned version 1: {profile.spec}" in printed
    assert profile.spec.endswith("@50") and "bm25, recency(half_life=365)" in profile.spec
    chosen = profile.provenance["learned"]
    assert chosen["dev_queries"] == 2 and chosen["measure"] == "nDCG@10"
    assert f"({chosen['measure']} {chosen['dev_mean']:.4f} on them)" in printed
    assert repr(profile.arm().fuser) == chosen["chosen"]  # what was measured is what is served
    assert profile.provenance["development"]["split"] == "train"
    assert {f["path"] for f in profile.provenance["testbed"]["files"]} >= {"corpus.jsonl", "qrels/train.tsv"}
    assert all(len(f["sha256"]) == 64 for f in profile.provenance["testbed"]["files"])
    assert main([*argv[:-4], "--save-profile", "x"]) == 2  # no --profile-index
    assert "--profile-index" in capsys.readouterr().err


def test_a_deeply_nested_profile_file_is_corrupt_not_a_recursion_error(index_path: Path) -> None:
    # Issue 26 item 4: every JSON record read from disk; this one was a RecursionError (a 500).
    store = ProfileStore(index_path)
    store.create("deep", "bm25")
    (index_path / "profiles" / "deep.v000001.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CorruptIndexError, match=r"deep\.v000001\.json: not JSON"):
        ProfileStore(index_path).get("deep", 1)


def test_a_spec_nested_500_deep_is_a_400_naming_the_limit(index_path: Path) -> None:
    # Issue 26 item 4: under the 4,096-character limit, and a RecursionError (500) before.
    spec = "rrf(" * 500 + "bm25" + ")" * 500
    with TestClient(create_app(index_path)) as client:
        for route, body in [
            ("/v1/search", {"text": "graph", "spec": spec}),
            ("/v1/profiles", {"name": "deep", "spec": spec}),
        ]:
            answer = client.post(route, json=body)
            assert answer.status_code == 400, (route, answer.text[:300])
            assert "nests more than 32 deep" in answer.json()["error"]["message"]
