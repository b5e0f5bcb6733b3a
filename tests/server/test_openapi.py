"""The checked-in OpenAPI schema matches the code, and no request the schema allows makes a 500."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from tests.server.conftest import KEY, make_index
from weftsearch.server.app import create_app
from weftsearch.server.openapi import openapi_text

DOCS = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
REGENERATE = "PYTHONPATH=src python -m weftsearch.server.openapi docs/openapi.json"


def test_the_checked_in_schema_matches_the_code() -> None:
    assert DOCS.read_text(encoding="utf-8") == openapi_text(), (
        f"docs/openapi.json is out of date with the server's code; regenerate it with: {REGENERATE}"
    )


def test_the_schema_is_served_and_lists_the_api() -> None:
    import json

    paths = set(json.loads(DOCS.read_text(encoding="utf-8"))["paths"])
    assert {
        "/v1/search",
        "/v1/search/batch",
        "/v1/documents",
        "/v1/documents/{key}",
        "/v1/commit",
        "/v1/stats",
        "/v1/profiles",
        "/v1/profiles/{name}",
        "/v1/profiles/{name}/{version}",
        "/v1/compare",
        "/v1/rank_eval",
        "/health",
        "/metrics",
    } <= paths


#: What every generated request's answer is checked for: no 5xx, a status the schema documents for
#: the operation, the documented content type, and a body valid under the documented response schema.
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def test_every_route_documents_its_responses() -> None:
    """Each operation documents its 200/201 body by a named model and its 4xx answers as the error model."""
    import json

    schema = json.loads(DOCS.read_text(encoding="utf-8"))
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            success = responses.get("200") or responses.get("201")
            assert success is not None, (method, path)
            content = success["content"]
            if path == "/metrics":
                continue  # Prometheus text, not JSON
            ref = content["application/json"]["schema"].get("$ref", "")
            assert ref.startswith("#/components/schemas/"), (method, path, content)
            for status in ("400", "422") if path.startswith("/v1/") else ():
                error_ref = responses[status]["content"]["application/json"]["schema"]["$ref"]
                assert error_ref.endswith("/ErrorResponse"), (method, path, status)


@pytest.mark.parametrize("record", [False, True], ids=["no-record", "vectors-record"])
def test_no_generated_request_is_a_server_error(tmp_path: Path, record: bool) -> None:
    """Requests generated from the schema, each operation in turn, with the key: never a 500, and
    every answer (2xx and 4xx) conforms to the response the schema documents for its status.

    Few examples per operation (the test stays well under a minute); derandomised, so a
    failure reproduces. Writes run too (upserts, deletes, commits, profiles). With a vectors
    record (of a model this package cannot encode, so no model loads), generated vector_model
    values and text-only vector searches meet the model checks.
    """
    vectors_record = None
    if record:
        vectors_record = tmp_path / "record.json"
        vectors_record.write_text('{"vectors": "tiny", "model": {"name": "acme/tiny"}, "dims": 8}')
    app = create_app(make_index(tmp_path / "idx"), api_key=KEY, vectors_record=vectors_record)
    try:
        schema = schemathesis.openapi.from_asgi("/openapi.json", app)
        operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
        assert len(operations) >= 14
        for operation in operations:

            @given(operation.as_strategy())
            @settings(
                max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
            )
            def run(case: schemathesis.Case[Any]) -> None:
                case.call_and_validate(headers={"X-API-Key": KEY}, checks=CHECKS)

            run()
    finally:
        app.state.weft.index.close(discard=True)


def test_the_schema_states_the_default_limits() -> None:
    """Every ServerLimits figure but the body's is on its fields, the body's in the description."""
    import json

    from weftsearch.server.app import ServerLimits

    schema = json.loads(DOCS.read_text(encoding="utf-8"))
    models = schema["components"]["schemas"]
    limits = ServerLimits()
    assert models["BatchSearchRequest"]["properties"]["queries"]["maxItems"] == limits.max_batch == 256
    for model in ("CompareRequest", "RankEvalRequest"):
        queries = models[model]["properties"]["queries"]
        objects = [b for b in queries.get("anyOf", [queries]) if b.get("type") == "object"]
        assert objects[0]["maxProperties"] == limits.max_queries >= 10_000
        assert "serve --max-queries" in queries["description"]
    assert models["UpsertRequest"]["properties"]["documents"]["maxItems"] == limits.max_documents
    assert models["SearchRequest"]["properties"]["k"]["maximum"] == limits.max_k
    assert models["QueryIn"]["properties"]["seeds"]["maxItems"] == limits.max_seeds
    assert models["QueryIn"]["properties"]["text"]["maxLength"] == limits.max_query_chars
    assert f"{limits.max_body_bytes} bytes" in schema["info"]["description"]


@pytest.mark.slow
def test_the_served_schema_holds_against_a_real_server(tmp_path: Path) -> None:
    """schemathesis against ``weft-search serve`` itself (uvicorn, a key, a tiny index), every route
    the served /openapi.json lists: no 5xx, and every answer conforms to the schema.

    Bounded: a few derandomised examples per operation and a time budget over all of them.
    """
    import time

    from tests.server.serving import running_server

    budget = time.monotonic() + 600
    env = {"WEFT_TEST_KEY": KEY}
    answered: list[int] = []
    with running_server(make_index(tmp_path / "idx"), "--api-key-env", "WEFT_TEST_KEY", env=env) as base:
        schema = schemathesis.openapi.from_url(base + "/openapi.json")
        operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
        assert len(operations) >= 14
        for operation in operations:
            assert time.monotonic() < budget, f"over the time budget before {operation.label}"

            @given(operation.as_strategy())
            @settings(
                max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
            )
            def run(case: schemathesis.Case[Any]) -> None:
                response = case.call_and_validate(
                    base_url=base, headers={"X-API-Key": KEY}, checks=CHECKS, timeout=30
                )
                answered.append(response.status_code)

            run()
    assert len(answered) >= 5 * len(operations), "the server was hardly asked anything"
