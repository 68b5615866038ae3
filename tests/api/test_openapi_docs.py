"""The committed OpenAPI document matches what the message types produce, documents every route the service
serves (and no other), and is what the service serves at /v1/openapi.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from colo_api import openapi
from colo_api.handlers import ROUTES

from .conftest import Api

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_committed_document_is_current() -> None:
    assert (DOCS / "openapi.json").read_text() == openapi.render(), \
        "docs/openapi.json is stale: run python -m colo_api.openapi"


def test_every_route_documented_and_nothing_else() -> None:
    doc = openapi.document()
    documented = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops}
    assert documented == {(m, p) for m, p, _, _ in ROUTES}
    for method, path, _, query in ROUTES:
        params = doc["paths"][path][method.lower()].get("parameters", [])
        assert sorted(q["name"] for q in params if q["in"] == "query") == sorted(query), path
    ids = [op["operationId"] for ops in doc["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))


def test_every_schema_reference_resolves() -> None:
    doc = openapi.document()
    text = json.dumps(doc)
    names = set(doc["components"]["schemas"])
    refs = {part.split('"')[0] for part in text.split("#/components/schemas/")[1:]}
    assert refs and refs <= names
    assert {"PodSpec", "NodeSpec", "Resources", "ElasticQuota", "QuotaStatus", "NodeResource"} <= names


@pytest.mark.integration
async def test_served_document_is_the_committed_one(api: Api) -> None:
    async with api.http.get(api.url + "/v1/openapi.json") as resp:
        assert resp.status == 200
        assert await resp.json() == json.loads((DOCS / "openapi.json").read_text())
