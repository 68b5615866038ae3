"""The OpenAPI 3.1 document of the API, its schemas generated from the same msgspec types the handlers encode
(:mod:`colo_api.views` and the :mod:`colo.messages` they hold) with ``msgspec.json.schema_components``.

``python -m colo_api.openapi`` rewrites ``docs/openapi.json``; a test checks the committed file matches, and
another that every route of :data:`colo_api.handlers.ROUTES` is documented and nothing else is.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import msgspec

from colo.cli.explain import DECISION_KEYS
from colo_api.handlers import PHASES, QOS_EVENTS_MAX
from colo_api.views import (
    ErrorBody,
    Event,
    EventList,
    NodeDeletion,
    NodeList,
    NodeView,
    PodList,
    PodView,
    QuotaList,
    SubmitResult,
)

REF = "#/components/schemas/{name}"
_TYPES = (ErrorBody, SubmitResult, PodList, PodView, NodeDeletion, NodeList, NodeView, QuotaList, Event, EventList)


def _ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(name=name)}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict[str, Any]:
    text = {400: "invalid or unknown query parameters, each named", 401: "missing or invalid bearer token", 404: "not found",
            409: "pods are still bound to the node: each named in problems",
            413: "manifest too large", 422: "invalid manifest: every problem with its field path",
            502: "the scheduler could not be reached", 503: "a dependency is not available"}
    return {str(c): _json(_ref("ErrorBody"), text[c]) for c in codes}


def _path_param(name: str, description: str, example: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "description": description, "example": example,
            "schema": {"type": "string", "minLength": 1, "pattern": "^[^/]+$"}}


def _query(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "description": description, "schema": schema}


DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The scheduler's decision record (docs/scheduler.md \"Decisions\"): status, chosen node "
                   "and runner-up, per-filter rejections, per-plugin scores (raw, normalized, weight, "
                   "weighted) of the chosen node and the runner-up, rejected nodes with plugin and reason.",
    "required": list(DECISION_KEYS),
    "properties": {
        "uid": {"type": "string"}, "attempt": {"type": "integer"}, "at": {"type": "number"},
        "status": {"type": "string"}, "node": {"type": ["string", "null"]},
        "runner_up": {"type": ["string", "null"]}, "nodes": {"type": "integer"},
        "feasible": {"type": "integer"}, "message": {"type": "string"}, "decision_ms": {"type": "number"},
        "filters": {"type": "object"}, "rejected_nodes": {"type": "object"}, "scores": {"type": "object"},
    },
}


def paths() -> dict[str, Any]:
    """The ``paths`` object: one entry per route of :data:`colo_api.handlers.ROUTES`."""
    ns = _path_param("namespace", "the pod's namespace", "shop")
    pod_name = _path_param("name", "the pod's name", "web-0")
    node_name = _path_param("name", "the node's name", "n1")
    return {
        "/v1/submit": {"post": {
            "operationId": "submit", "summary": "Validate a manifest and publish every object",
            "description": "Every kind `colo submit` accepts (Pod, Deployment, StatefulSet, Job, PodGroup, "
                           "ElasticQuota, Reservation), one object, a list or several YAML documents. The whole "
                           "manifest is checked first; on any problem nothing is published.",
            "parameters": [_query("dryRun", "`All`: validate only, publish nothing", {"type": "string",
                                                                                   "enum": ["All"]}),
                           _query("wait", "seconds to wait for admission's answers (0 = none)",
                                  {"type": "number", "minimum": 0, "maximum": 60})],
            "requestBody": {"required": True, "content": {
                "application/yaml": {"schema": {"type": "string"}},
                "application/json": {"schema": {"type": "object"}}}},
            "responses": {"201": _json(_ref("SubmitResult"), "published, in order; admission refused none"),
                          "200": _json(_ref("SubmitResult"), "valid (dry run: nothing published)"),
                          "422": {"description": "an invalid manifest (ErrorBody: every problem, nothing "
                                                 "published) or one admission refused part of (SubmitResult)",
                                  "content": {"application/json": {"schema": {"oneOf": [
                                      _ref("ErrorBody"), _ref("SubmitResult")]}}}},
                          **_errors(400, 401, 413, 503)}}},
        "/v1/pods": {"get": {
            "operationId": "listPods", "summary": "List pods",
            "parameters": [_query("namespace", "only this namespace", {"type": "string"}),
                           _query("phase", "only this phase", {"type": "string", "enum": list(PHASES)})],
            "responses": {"200": _json(_ref("PodList"), "the pods"), **_errors(400, 401)}}},
        "/v1/pods/{namespace}/{name}": {
            "get": {"operationId": "getPod", "summary": "One pod", "parameters": [ns, pod_name],
                    "responses": {"200": _json(_ref("PodView"), "the pod"), **_errors(400, 401, 404)}},
            "delete": {"operationId": "deletePod", "summary": "Delete a pod (as colo delete)",
                       "description": "A pending pod leaves the queue and ends Deleted; a bound one is stopped by "
                                      "its node agent and ends Failed/Deleted.",
                       "parameters": [ns, pod_name],
                       "responses": {"202": _json(_ref("PodView"), "deletion sent; the pod as it was"),
                                     "200": _json(_ref("PodView"), "the pod had already ended: nothing sent"),
                                     **_errors(400, 401, 404, 503)}}},
        "/v1/nodes": {"get": {
            "operationId": "listNodes", "summary": "List nodes with allocation, batch/mid offer and LS/BE usage",
            "responses": {"200": _json(_ref("NodeList"), "the nodes"), **_errors(400, 401)}}},
        "/v1/nodes/{name}": {
            "get": {"operationId": "getNode", "summary": "One node", "parameters": [node_name],
                    "responses": {"200": _json(_ref("NodeView"), "the node"), **_errors(400, 401, 404)}},
            "delete": {"operationId": "deleteNode", "summary": "Delete a node (as colo delete node)",
                       "description": "The scheduler removes the node from the store and its candidates. Refused "
                                      "(409, the pods named) while pods are bound to it, unless `force=true`: "
                                      "they are then ended (Failed, reason `Deleted: node <name> deleted by "
                                      "api`). A node agent still running registers it again.",
                       "parameters": [node_name, _query("force", "`true`: delete even with pods bound (they "
                                                                 "are ended)", {"type": "string",
                                                                                "enum": ["true", "false"]})],
                       "responses": {"202": _json(_ref("NodeDeletion"), "deletion sent; the pods ended with it"),
                                     **_errors(400, 401, 404, 409, 503)}}},
        "/v1/explain/{namespace}/{name}": {"get": {
            "operationId": "explainPod", "summary": "The scheduler's decision for a pod",
            "parameters": [ns, pod_name, _query("live", "`1`: a dry run now instead of the recorded attempt",
                                                {"type": "string", "enum": ["0", "1"]})],
            "responses": {"200": _json(DECISION_SCHEMA, "the decision"), **_errors(400, 401, 404, 502, 503)}}},
        "/v1/events": {"get": {
            "operationId": "streamEvents", "summary": "Bus messages as Server-Sent Events",
            "description": "One `event: message` per message on `colo.v1.<subject>`, its `data` one JSON Event; "
                           "`event: dropped` with `{\"dropped\": N}` when the client fell behind.",
            "parameters": [_query("subject", "NATS filter below colo.v1 (default `>`)", {"type": "string"}),
                           _query("limit", "close after this many events (0 = never)",
                                  {"type": "integer", "minimum": 0, "maximum": 999_999_999})],
            "responses": {"200": {"description": "the event stream; each `data:` line is an Event",
                                  "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                          **_errors(400, 401)}}},
        "/v1/qos-events": {"get": {
            "operationId": "listQosEvents", "summary": "The last node QoS actions the bus keeps, oldest first",
            "parameters": [_query("limit", "how many (default 200)", {"type": "integer", "minimum": 1, "maximum": QOS_EVENTS_MAX})],
            "responses": {"200": _json(_ref("EventList"), "the events"), **_errors(400, 401)}}},
        "/v1/quotas": {"get": {
            "operationId": "listQuotas", "summary": "Elastic quotas: spec, status, hard max and usage",
            "responses": {"200": _json(_ref("QuotaList"), "the quotas"), **_errors(400, 401)}}},
    }


def document() -> dict[str, Any]:
    """The OpenAPI document (a JSON-ready dict)."""
    _, components = msgspec.json.schema_components(_TYPES, ref_template=REF)
    return {
        "openapi": "3.1.0",
        "info": {"title": "Colo API", "version": "1.0.0",
                 "description": "REST API of Colo (docs/api.md). CPU in milli-cores, memory in bytes, times in "
                                "seconds. Every /v1 route needs `Authorization: Bearer <token>` when the service "
                                "has a token (COLO_API_TOKEN)."},
        "security": [{"bearerAuth": []}],
        "paths": paths(),
        "components": {"schemas": components,
                       "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}}},
    }


def render() -> str:
    """``docs/openapi.json`` as it must be committed."""
    return json.dumps(document(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the document to ``--out`` (default ``docs/openapi.json``)."""
    p = argparse.ArgumentParser(prog="python -m colo_api.openapi", description="Write docs/openapi.json.")
    p.add_argument("--out", default="docs/openapi.json", help="where to write (default docs/openapi.json)")
    args = p.parse_args(argv)
    Path(args.out).write_text(render())
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
