"""Colo API service: a REST API (submit, pods, nodes, explain, quotas, events as Server-Sent Events) with an
OpenAPI 3 document, bearer-token auth and a live web dashboard, all backed by the Redis store and the bus
(docs/api.md)."""
