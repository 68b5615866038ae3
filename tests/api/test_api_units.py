"""Table-driven checks of the API's pieces without servers: subject filters, event decoding, pod states, the
LS/BE split of a node report, route matching and the token check."""

from __future__ import annotations

import json

import pytest
from aiohttp.test_utils import make_mocked_request

from colo import codec
from colo.messages import NodeMetric, PodMetric, PodRecord, PodSpec, PodStatus, Resources, Usage
from colo_api import auth
from colo_api.events import event_of, filter_problem
from colo_api.handlers import _matches, error
from colo_api.views import node_usage, pod_view


@pytest.mark.parametrize(("subject", "ok"), [
    (">", True), ("pod.>", True), ("node.qos.*", True), ("pod.status.n-1", True), ("*.*.>", True),
    ("", False), ("pod..x", False), ("pod.>.x", False), ("pod.", False), ("pod x", False), ("a" * 300, False),
    ("colo.v1.>", True),  # a valid filter (it then means colo.v1.colo.v1.>): not an error, just empty
])
def test_subject_filters(subject: str, ok: bool) -> None:
    assert (filter_problem(subject) == "") is ok


def test_event_of_decodes_with_the_registered_type() -> None:
    st = PodStatus(uid="u", node="n1", phase="Failed", at=3.0, reason="Evicted")
    e = event_of("colo.v1.pod.status.n1", codec.encode(st), 10.0)
    assert (e.subject, e.type, e.message, e.error, e.received_at) == ("pod.status.n1", "PodStatus", st, "", 10.0)
    bad = event_of("colo.v1.pod.status.n1", b"{", 10.0)
    assert bad.type == "PodStatus" and bad.message is None and bad.error.startswith("malformed JSON for PodStatus")
    other = event_of("colo.v1.nope", b"{}", 10.0)
    assert other.type == "" and other.error == "unregistered subject (2 bytes)"


@pytest.mark.parametrize(("phase", "node", "state"), [
    ("Pending", "", "Waiting"), ("Pending", "n1", "Bound"), ("Running", "n1", "Running"),
    ("Succeeded", "n1", "Succeeded"), ("Failed", "", "Failed"),
])
def test_pod_states(phase: str, node: str, state: str) -> None:
    rec = PodRecord(spec=PodSpec(uid="u", name="p", requests=Resources(cpu=100)), phase=phase,  # type: ignore[arg-type]
                    node=node, reason="")
    v = pod_view(rec)
    assert v.state == state and v.reason == "" and v.qos == "LS"


@pytest.mark.parametrize(("reason", "state"), [
    ("Rejected: priority 99999999999 out of range", "Rejected"), ("Deleted: colo delete", "Deleted"),
    ("Evicted", "Failed"), ("Rejected", "Failed"), ("OOMKilled", "Failed"),
])
def test_refused_and_deleted_pods_keep_their_word(reason: str, state: str) -> None:
    v = pod_view(PodRecord(spec=PodSpec(uid="u", name="p"), phase="Failed", reason=reason))
    assert v.state == state and reason.split(":")[-1].strip() in v.reason


def test_pod_deleted_while_bound_is_deleted_not_failed() -> None:
    """The node agent reports a deleted bound pod ``Failed`` with reason ``Deleted``: shown ``Failed (Deleted)``
    before; its state is the word, as for one deleted while pending."""
    v = pod_view(PodRecord(spec=PodSpec(uid="u", name="p"), phase="Failed", reason="Deleted", node="n1"))
    assert (v.state, v.reason) == ("Deleted", "")


def test_waiting_pod_reason_is_the_schedulers_message() -> None:
    rec = PodRecord(spec=PodSpec(uid="u", name="p"))
    assert pod_view(rec, {"u": "0/3 nodes are available"}).reason == "Unschedulable: 0/3 nodes are available"
    assert pod_view(PodRecord(spec=PodSpec(uid="u", name="p"), phase="Failed", reason="Evicted"),
                    {"u": "x"}).reason == "Evicted"


def test_node_usage_splits_ls_and_be() -> None:
    m = NodeMetric(node="n1", at=5.0, node_usage=Usage(cpu=3000, memory=10), be_cpu_allowed=-1, pods=[
        PodMetric(uid="a", cpu=1000, memory=1, qos_class="LSR"), PodMetric(uid="b", cpu=500, memory=2),
        PodMetric(uid="c", cpu=700, memory=4, qos_class="BE"), PodMetric(uid="d", cpu=300, memory=8, qos_class="BE")])
    u = node_usage(m)
    assert (u.ls_cpu, u.ls_memory, u.be_cpu, u.be_memory, u.cpu, u.pods, u.be_cpu_allowed) == (
        1500, 3, 1000, 12, 3000, 4, -1)


@pytest.mark.parametrize(("pattern", "path", "ok"), [
    ("/v1/pods", "/v1/pods", True), ("/v1/pods/{namespace}/{name}", "/v1/pods/a/b", True),
    ("/v1/pods/{namespace}/{name}", "/v1/pods/a", False), ("/v1/pods/{namespace}/{name}", "/v1/pods/a//", False),
    ("/v1/nodes/{name}", "/v1/pods/x", False),
])
def test_route_matching(pattern: str, path: str, ok: bool) -> None:
    assert _matches(pattern, path) is ok


@pytest.mark.parametrize(("header", "token", "problem"), [
    (None, "", ""), ("Bearer x", "", ""), (None, "t", "missing bearer token"), ("Bearer t", "t", ""),
    ("bearer t", "t", ""), ("Bearer  t ", "t", ""), ("Bearer u", "t", "invalid bearer token"),
    ("Basic dDp0", "t", "not 'Bearer <token>'"), ("Bearer", "t", "not 'Bearer <token>'"),
    ("Bearer tt", "t", "invalid bearer token"),
])
def test_token_check(header: str | None, token: str, problem: str) -> None:
    req = make_mocked_request("GET", "/v1/pods", headers={"Authorization": header} if header is not None else {})
    got = auth.problem(req, token)
    assert (problem in got) if problem else got == ""


def test_problems_quoting_lone_surrogates_are_still_json() -> None:
    # a JSON body may hold "\ud800" in a key, and a strict manifest's problem names the key at its path
    resp = error(422, "1 problem(s)", ["spec.\ud800x: unknown field"])
    assert resp.body is not None and json.loads(bytes(resp.body))["problems"] == ["spec.\\ud800x: unknown field"]
