"""The checked-in OpenAPI schema matches the code, and no request the schema allows makes a 500."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

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


def test_no_generated_request_is_a_server_error(tmp_path: Path) -> None:
    """Requests generated from the schema, each operation in turn, with the key: never a 500.

    Few examples per operation (the test stays well under a minute); derandomised, so a
    failure reproduces. Writes run too (upserts, deletes, commits, profiles).
    """
    app = create_app(make_index(tmp_path / "idx"), api_key=KEY)
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
                case.call_and_validate(headers={"X-API-Key": KEY}, checks=[not_a_server_error])

            run()
    finally:
        app.state.weft.index.close(discard=True)
