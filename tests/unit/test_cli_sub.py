"""``colo sub``: a message on a registered subject is printed decoded with every field, those at their default
too (the wire leaves them out); anything else, and everything with ``--raw``, as the payload arrived."""

from __future__ import annotations

import json

import pytest

from colo.cli.natsops import sub_line
from colo.codec import encode
from colo.messages import BEBudgetState, NodeMetric, NodeResource, Tick

METRIC = NodeMetric(node="n1", at=60.0, be_budget=BEBudgetState(threshold_percent=65.0))


def test_a_registered_subject_is_printed_with_every_field() -> None:
    data = encode(METRIC)
    assert b'"phase"' not in data  # the stumble: phase "fallback" is the default, so the wire has none
    line = sub_line("colo.v1.node.metric.n1", data, 3)
    head, body = line.split(": ", 1)
    assert head == "[#3] colo.v1.node.metric.n1"
    shown = json.loads(body)
    assert shown["be_budget"]["phase"] == "fallback" and shown["be_budget"]["cut_at"] is None
    assert shown["be_cpu_allowed"] == -1 and shown["pods"] == [] and "\n" not in line


@pytest.mark.parametrize(("subject", "data", "raw"), [
    pytest.param("colo.v1.test.a", b'{"x":1}', False, id="unregistered subject: raw"),
    pytest.param("colo.v1.node.metric.n1", b'{"node":', False, id="undecodable payload: raw"),
    pytest.param("colo.v1.node.metric.n1", encode(METRIC), True, id="--raw: the payload as sent"),
    pytest.param("colo.v1.sim.tick.scheduler", b"raw", False, id="a tick that is not JSON: raw"),
    # decoding as the subject's type would drop batch_cpu and add by/force: the line would show another message
    pytest.param("colo.v1.node.deleted.n1", encode(NodeResource(node="n1", batch_cpu=1000, at=1.0)), False,
                 id="a payload of another type: raw"),
    pytest.param("colo.v1.pod.admitted", b'{"spec":{"uid":"p","name":"p","bogus":1},"at":1.0}', False,
                 id="an unknown field deeper down: raw"),
])
def test_anything_else_is_printed_as_it_arrived(subject: str, data: bytes, raw: bool) -> None:
    assert sub_line(subject, data, 1, raw=raw) == f"[#1] {subject}: {data.decode()}"


def test_a_tick_is_decoded_too() -> None:
    line = sub_line("colo.v1.sim.tick.scheduler", encode(Tick(seq=1, now=2.0, step_s=60.0)), 1)
    assert json.loads(line.split(": ", 1)[1]) == {"seq": 1, "now": 2.0, "step_s": 60.0, "settle_only": False}


def test_fields_that_are_all_known_are_decoded_whatever_their_depth() -> None:
    data = b'{"spec":{"uid":"p","name":"p","labels":{"any-key":"v"}},"at":1.0}'
    shown = json.loads(sub_line("colo.v1.pod.admitted", data, 1).split(": ", 1)[1])
    assert shown["spec"]["labels"] == {"any-key": "v"} and shown["spec"]["namespace"] == "default"
