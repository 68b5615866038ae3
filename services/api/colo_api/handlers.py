"""The ``/v1`` route handlers (docs/api.md). Every answer is JSON (``application/json``) but the event stream;
errors are :class:`~colo_api.views.ErrorBody`. Data comes from the store and the bus on each request."""

from __future__ import annotations

import difflib
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, get_args

import msgspec
from aiohttp import web
from nats.errors import Error as NatsError
from redis.exceptions import RedisError

from colo import subjects as S
from colo.bus import Bus
from colo.cli.delete_node import NodeBusy, NodeNotFound, pod_names, send_deletion
from colo.cli.explain import ExplainError, fetch_decision
from colo.cli.get import MAX_DECISION_LOOKUPS, unschedulable_messages, waiting_pods
from colo.manifests import ManifestError, parse_manifest
from colo.messages import (
    ElasticQuota,
    PodDeleted,
    PodGroupSpec,
    PodRecord,
    PodSpec,
    ReservationSpec,
    WorkloadSpec,
)
from colo.messages.base import PodPhase
from colo.store import Store
from colo.submission import publications, publish_and_wait
from colo.workloads import initial_pods
from colo_api import events, reads
from colo_api.settings import ApiSettings
from colo_api.views import (
    ErrorBody,
    EventList,
    NodeDeletion,
    NodeList,
    PodList,
    QuotaList,
    SubmitResult,
    SubmittedObject,
    pod_view,
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

QOS_EVENTS_MAX = 1000
"""Most QoS events ``GET /v1/qos-events`` returns (one stream read each)."""

PHASES: tuple[str, ...] = get_args(PodPhase)
"""Values of the ``phase`` filter of ``GET /v1/pods``."""

_encoder = msgspec.json.Encoder()


def json_response(body: Any, status: int = 200) -> web.Response:
    """``body`` (a struct or builtins) encoded by msgspec."""
    return web.Response(status=status, body=_encoder.encode(body), content_type="application/json")


def _printable(text: str) -> str:
    """``text`` with lone surrogates (a JSON body may spell ``"\\ud800"``, and problems quote what they were
    given) as ``\\ud800`` escapes: UTF-8, so JSON, cannot carry them."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def error(status: int, message: str, problems: list[str] | None = None) -> web.Response:
    """An :class:`ErrorBody` answer (user input quoted in it made encodable by :func:`_printable`)."""
    return json_response(ErrorBody(error=_printable(message), problems=[_printable(p) for p in problems or []]),
                         status)


def submitted_object(item: tuple[Any, Any, str | None, dict[str, str]]) -> SubmittedObject:
    """What one publication of ``colo submit`` carries, for the answer."""
    subject, obj, _, keys = item
    concrete = subject.format(**keys) if keys else subject.pattern
    if isinstance(obj, ElasticQuota):
        return SubmittedObject(kind="ElasticQuota", namespace="", name=obj.name, uid="", subject=concrete)
    if isinstance(obj, PodGroupSpec):
        return SubmittedObject(kind="PodGroup", namespace=obj.namespace, name=obj.name, uid=obj.uid,
                               subject=concrete)
    if isinstance(obj, ReservationSpec):
        return SubmittedObject(kind="Reservation", namespace=obj.namespace, name=obj.name, uid="",
                               subject=concrete)
    if isinstance(obj, WorkloadSpec):
        return SubmittedObject(kind=obj.kind, namespace=obj.namespace, name=obj.name, uid=obj.uid,
                               subject=concrete, pods=initial_pods(obj))
    assert isinstance(obj, PodSpec)
    return SubmittedObject(kind="Pod", namespace=obj.namespace, name=obj.name, uid=obj.uid, subject=concrete, pods=1)


class Handlers:
    """The route handlers of one service instance (store and bus of its context)."""

    def __init__(self, settings: ApiSettings, store: Store, bus: Bus) -> None:
        self.settings = settings
        self.store = store
        self.bus = bus
        self.scheduler_token = ""
        """The bearer token explain sends to the scheduler (the services' COLO_HTTP_TOKEN_FILE; "" = none)."""
        self.streams = events.Streams()

    def scheduler_url(self) -> str:
        """The scheduler explain asks: the setting, else ``$COLO_SCHEDULER_URL``, else ""."""
        return (self.settings.scheduler_url or os.environ.get("COLO_SCHEDULER_URL", "")).rstrip("/")

    async def submit(self, request: web.Request) -> web.Response:
        """``POST /v1/submit``: a manifest (YAML or JSON; every kind ``colo submit`` accepts) validated whole
        by :func:`colo.manifests.parse_manifest`, then published as ``colo submit`` does
        (:func:`colo.submission.publish_and_wait` on the service's bus: in order, each acknowledged), waiting up
        to ``?wait=`` seconds (default ``admission_wait_s``; 0 = not at all) for admission's answer to each pod,
        workload and PodGroup, and the scheduler's to each ElasticQuota (:mod:`colo.submission`). 201 when none
        was refused, 422 when admission refused any (each object's
        ``admission`` and ``reason`` say which: the others were admitted or not answered in time); 422 listing
        every problem of an invalid manifest, nothing published; ``?dryRun=All`` validates only (200)."""
        dry_run = request.query.get("dryRun", "")
        if dry_run not in ("", "All"):
            return error(400, f"dryRun must be 'All' (validate only) or absent, got {dry_run[:40]!r}")
        limit = self.settings.max_body_bytes
        body = bytearray()
        # read here, not with request.read(): that one stops at aiohttp's own 1 MiB limit with a text answer
        async for chunk in request.content.iter_chunked(64 * 1024):
            body += chunk
            if len(body) > limit:
                return error(413, f"manifest over the limit of {limit} bytes (COLO_API_MAX_BODY_BYTES)")
        raw = bytes(body)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return error(422, "the manifest is not UTF-8 text", [f"<root>: not UTF-8 at byte {exc.start}"])
        try:
            manifest = parse_manifest(text, now=time.time())
        except ManifestError as exc:
            return error(422, f"{len(exc.errors)} problem(s); nothing submitted", exc.errors)
        items = publications(manifest)
        if not items:  # e.g. an empty mapping ``{}``: parse_manifest skips it without a problem
            return error(422, "1 problem(s); nothing submitted", ["<root>: no objects in the manifest"])
        wait_text = request.query.get("wait")
        wait_s = self.settings.admission_wait_s
        if wait_text is not None:
            try:
                wait_s = float(wait_text)
            except ValueError:
                wait_s = -1.0
            if not 0 <= wait_s <= 60:
                return error(400, f"wait must be seconds from 0 to 60, got {wait_text[:40]!r}")
        objects = [submitted_object(i) for i in items]
        if dry_run:
            return json_response(SubmitResult(objects=objects, dry_run=True), 200)
        try:
            outcomes = await publish_and_wait(self.bus, manifest, wait_s if wait_s > 0 else None)
        except Exception as exc:  # the bus refused or timed out: nothing was half-reported as done
            return error(503, f"cannot publish: {exc!r}")
        by_key = {(o.kind == "ElasticQuota", o.name if o.kind == "ElasticQuota" else o.uid): o for o in outcomes}
        keys = [(o.kind == "ElasticQuota", o.name if o.kind == "ElasticQuota" else o.uid) for o in objects]
        objects = [o if k not in by_key or not k[1] else msgspec.structs.replace(
            o, admission=by_key[k].state, reason=by_key[k].reason) for o, k in zip(objects, keys)]
        rejected = sum(o.admission == "rejected" for o in objects)
        return json_response(SubmitResult(objects=objects, rejected=rejected), 422 if rejected else 201)

    async def list_pods(self, request: web.Request) -> web.Response:
        """``GET /v1/pods?namespace=&phase=``: the pods in the store, sorted by namespace, name, uid."""
        namespace = request.query.get("namespace")
        phase = request.query.get("phase")
        if phase is not None and phase not in PHASES:
            return error(400, f"phase must be one of {', '.join(PHASES)}, got {phase[:40]!r}")
        records = await self.store.list_pods()
        picked = [r for r in records if (namespace is None or r.spec.namespace == namespace)
                  and (phase is None or r.phase == phase)]
        picked.sort(key=lambda r: (r.spec.namespace, r.spec.name, r.spec.uid))
        messages = await self.waiting_messages(picked)
        return json_response(PodList(items=[pod_view(r, messages) for r in picked]))

    async def waiting_messages(self, records: list[PodRecord]) -> dict[str, str]:
        """uid → the scheduler's message of its last attempt for the waiting pods among ``records`` that it
        found no node for, as ``colo get pods`` shows them (:func:`colo.cli.get.unschedulable_messages`, the
        first :data:`colo.cli.get.MAX_DECISION_LOOKUPS`); {} without a scheduler URL or when it does not
        answer (the store's reasons stand)."""
        waiting = waiting_pods(records)[:MAX_DECISION_LOOKUPS]
        url = self.scheduler_url()
        if not waiting or not url:
            return {}
        try:
            return await unschedulable_messages(url, waiting, timeout_s=self.settings.explain_timeout_s)
        except ExplainError:
            return {}

    async def get_pod(self, request: web.Request) -> web.Response:
        """``GET /v1/pods/{namespace}/{name}``: one pod; 404 when the store has none of that name."""
        ns, name = request.match_info["namespace"], request.match_info["name"]
        record = await reads.find_pod(self.store, ns, name)
        if record is None:
            return error(404, f"pod {ns}/{name} not found")
        return json_response(pod_view(record, await self.waiting_messages([record])))

    async def delete_pod(self, request: web.Request) -> web.Response:
        """``DELETE /v1/pods/{namespace}/{name}``: end the pod as ``colo delete`` does (a
        :class:`~colo.messages.PodDeleted` on ``pod.deleted``, id ``delete-<uid>-<at>``): the scheduler owning it
        drops it from its queue and marks it ``Deleted`` when pending, or has its node agent stop it when bound.
        202 with the pod as it was when the deletion was sent; 200 when it had already ended (nothing sent); 404
        for an unknown pod."""
        ns, name = request.match_info["namespace"], request.match_info["name"]
        record = await reads.find_pod(self.store, ns, name)
        if record is None:
            return error(404, f"pod {ns}/{name} not found")
        if record.phase in ("Succeeded", "Failed"):
            return json_response(pod_view(record), 200)
        at = time.time()
        msg = PodDeleted(uid=record.spec.uid, at=at, by="api", namespace=ns, name=name)
        await self.bus.publish(S.POD_DELETED, msg, msg_id=f"delete-{record.spec.uid}-{at!r}")
        return json_response(pod_view(record), 202)

    async def list_nodes(self, _: web.Request) -> web.Response:
        """``GET /v1/nodes``: every registered node with allocation, offer and usage."""
        return json_response(NodeList(items=await reads.node_views(self.store, self.bus)))

    async def delete_node(self, request: web.Request) -> web.Response:
        """``DELETE /v1/nodes/{name}?force=``: forget a node as ``colo delete node`` does
        (:func:`colo.cli.delete_node.send_deletion`: a :class:`~colo.messages.NodeDeleted` on
        ``node.deleted.<name>``); the scheduler removes it from the store and its candidates. 202 with the pods
        that were bound to it (ended when forced); 409 naming them when pods are bound and ``force`` is not
        ``true``; 404 for an unknown node; 400 for a ``force`` other than ``true``/``false``."""
        name = request.match_info["name"]
        force_text = request.query.get("force", "false")
        if force_text not in ("true", "false"):
            return error(400, f"force must be true or false, got {force_text[:40]!r}")
        try:
            pods = await send_deletion(self.store, self.bus, name, force_text == "true", "api")
        except NodeNotFound:
            return error(404, f"node {name} not found")
        except NodeBusy as exc:
            return error(409, str(exc), pod_names(exc.pods))
        return json_response(NodeDeletion(node=name, force=force_text == "true", pods=pod_names(pods)), 202)

    async def get_node(self, request: web.Request) -> web.Response:
        """``GET /v1/nodes/{name}``: one node; 404 when it is not registered."""
        name = request.match_info["name"]
        found = await reads.node_views(self.store, self.bus, [name])
        if not found:
            return error(404, f"node {name} not found")
        return json_response(found[0])

    async def explain(self, request: web.Request) -> web.Response:
        """``GET /v1/explain/{namespace}/{name}``: the scheduler's decision for the pod (its last recorded
        attempt, or ``?live=1`` a dry run now), as ``colo explain`` reads it
        (:func:`colo.cli.explain.fetch_decision`). 404 for a pod the store or the scheduler does not know,
        503 without a scheduler URL, 502 when the scheduler cannot be reached."""
        ns, name = request.match_info["namespace"], request.match_info["name"]
        live_text = request.query.get("live", "0")
        if live_text not in ("0", "1"):
            return error(400, f"live must be 0 (the recorded attempt) or 1 (a dry run now), got {live_text[:40]!r}")
        live = live_text == "1"
        record = await reads.find_pod(self.store, ns, name)
        if record is None:
            return error(404, f"pod {ns}/{name} not found")
        url = self.scheduler_url()
        if not url:
            return error(503, "no scheduler URL: set COLO_API_SCHEDULER_URL or COLO_SCHEDULER_URL")
        try:
            decision = await fetch_decision(url, record.spec.uid, live, timeout_s=self.settings.explain_timeout_s,
                                            token=self.scheduler_token)
        except ExplainError as exc:
            text = str(exc)
            return error(502 if text.startswith("cannot read") else 404, text)
        return json_response(decision)

    async def list_quotas(self, _: web.Request) -> web.Response:
        """``GET /v1/quotas``: every elastic quota with spec, status, hard max and usage."""
        return json_response(QuotaList(items=await reads.quota_views(self.store, self.bus)))

    async def qos_events(self, request: web.Request) -> web.Response:
        """``GET /v1/qos-events?limit=``: the last ``limit`` (default 200, at most 1,000) node QoS actions of
        the ``COLO_EVENTS`` stream, oldest first: the dashboard's timeline before the page was opened."""
        text = request.query.get("limit", "200")
        if not text.isdigit() or not 1 <= int(text) <= QOS_EVENTS_MAX:
            return error(400, f"limit must be a whole number from 1 to {QOS_EVENTS_MAX}, got {text[:40]!r}")
        return json_response(EventList(items=await reads.recent_qos_events(self.bus, int(text), time.time())))

    async def events(self, request: web.Request) -> web.StreamResponse:
        """``GET /v1/events?subject=&limit=``: the bus as Server-Sent Events (:mod:`colo_api.events`)."""
        subject = request.query.get("subject", ">")
        why = events.filter_problem(subject)
        if why:
            return error(400, why)
        limit_text = request.query.get("limit", "0")
        if not limit_text.isdigit() or len(limit_text) > 9:
            return error(400, f"limit must be a whole number of events (0 = no limit), got {limit_text[:40]!r}")
        return await events.stream_events(request, self.bus, subject, self.settings.sse_queue,
                                          self.settings.sse_heartbeat_s, int(limit_text), self.streams)

    async def not_found(self, request: web.Request) -> web.Response:
        """Any other ``/v1`` request: 405 with ``Allow`` for a known path asked with another method, else 404,
        as JSON (the routes: ``/v1/openapi.json``)."""
        allowed = sorted({m for m, path, _, _ in ROUTES if _matches(path, request.path)})
        if allowed:
            resp = error(405, f"{request.method} not allowed on {request.path} (allowed: {', '.join(allowed)})")
            resp.headers["Allow"] = ", ".join(allowed)
            return resp
        return error(404, f"no route {request.method} {request.path} (see /v1/openapi.json)")


def _matches(pattern: str, path: str) -> bool:
    """Whether ``path`` fits the route ``pattern`` (``{name}`` = one non-empty segment)."""
    want, got = pattern.strip("/").split("/"), path.strip("/").split("/")
    return len(want) == len(got) and all(
        w == g or (w.startswith("{") and bool(g)) for w, g in zip(want, got))


ROUTES: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("POST", "/v1/submit", "submit", ("dryRun", "wait")),
    ("GET", "/v1/pods", "list_pods", ("namespace", "phase")),
    ("GET", "/v1/pods/{namespace}/{name}", "get_pod", ()),
    ("DELETE", "/v1/pods/{namespace}/{name}", "delete_pod", ()),
    ("GET", "/v1/nodes", "list_nodes", ()),
    ("GET", "/v1/nodes/{name}", "get_node", ()),
    ("DELETE", "/v1/nodes/{name}", "delete_node", ("force",)),
    ("GET", "/v1/explain/{namespace}/{name}", "explain", ("live",)),
    ("GET", "/v1/events", "events", ("subject", "limit")),
    ("GET", "/v1/quotas", "list_quotas", ()),
    ("GET", "/v1/qos-events", "qos_events", ("limit",)),
)
"""``(method, path, handler method, query parameters)`` of every authenticated route; :mod:`colo_api.openapi`
documents each. Any other query parameter is a 400 naming it and the nearest known one."""


def query_problems(request: web.Request, allowed: tuple[str, ...]) -> list[str]:
    """One problem per unknown or repeated query parameter of ``request``."""
    out = []
    for key in sorted(set(request.query)):
        if key not in allowed:
            near = difflib.get_close_matches(key, allowed, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else (
                f" (known: {', '.join(allowed)})" if allowed else " (this route takes none)")
            out.append(f"query.{key[:40]}: unknown parameter{hint}")
        elif len(request.query.getall(key)) > 1:
            out.append(f"query.{key}: given {len(request.query.getall(key))} times, once at most")
    return out


def checked(handler: Handler, allowed: tuple[str, ...]) -> Handler:
    """``handler`` behind :func:`query_problems` (400 listing every problem)."""

    async def check(request: web.Request) -> web.StreamResponse:
        problems = query_problems(request, allowed)
        if problems:
            return error(400, f"{len(problems)} invalid query parameter(s)", problems)
        try:
            return await handler(request)
        except web.HTTPException:
            raise
        except (ConnectionError, OSError, TimeoutError, RedisError, NatsError) as exc:  # a dependency is down
            return error(503, f"store or bus unavailable: {type(exc).__name__}: {exc}")

    return check
