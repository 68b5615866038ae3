"""JSON codec of wire messages (colo.codec)."""

from __future__ import annotations

import pytest

from colo import codec
from colo.messages import (
    NodeMetric,
    NodeSLO,
    NodeSpec,
    PodMetric,
    PodSpec,
    Resources,
    SimWorkload,
    Taint,
    Tick,
    Toleration,
    Usage,
)

MESSAGES = [
    pytest.param(PodSpec(uid="u1", name="web", labels={"app": "web"}, priority=9500,
                         requests=Resources(cpu=500, memory=2**30), tolerations=[Toleration(key="k")],
                         sim=SimWorkload(kind="series", cpu_util=[0.1, 0.25], cpu_scale_milli=2000)),
                 id="pod-spec"),
    pytest.param(NodeSpec(name="n1", capacity=Resources(cpu=8000), allocatable=Resources(cpu=7500, pods=110),
                          taints=[Taint(key="gpu", effect="NoExecute")]), id="node-spec"),
    pytest.param(NodeMetric(node="n1", at=60.0, node_usage=Usage(cpu=1200, memory=3 * 2**30),
                            pods=[PodMetric(uid="u1", cpu=100, qos_class="BE")]), id="node-metric"),
    pytest.param(NodeSLO(node="n1"), id="node-slo-defaults"),
    pytest.param(Tick(seq=3, now=180.0, step_s=60.0), id="tick"),
]


@pytest.mark.parametrize("msg", MESSAGES)
def test_roundtrip(msg: object) -> None:
    assert codec.decode(codec.encode(msg), type(msg)) == msg


def test_defaults_are_omitted_and_unknown_fields_ignored() -> None:
    data = codec.encode(PodSpec(uid="u", name="n"))
    assert data == b'{"uid":"u","name":"n"}'
    newer = b'{"uid":"u","name":"n","field_from_the_future":{"x":1}}'
    assert codec.decode(newer, PodSpec) == PodSpec(uid="u", name="n")


@pytest.mark.parametrize(
    ("payload", "type_", "must_mention"),
    [
        pytest.param(b'{"uid":"u","name":"n","requests":{"cpu":"500m"}}', PodSpec, "$.requests.cpu",
                     id="nested-field-path"),
        pytest.param(b'{"name":"n"}', PodSpec, "uid", id="missing-required"),
        pytest.param(b'{"uid":"u","name":"n","qos_class":"GOLD"}', PodSpec, "$.qos_class", id="bad-literal"),
        pytest.param(b'{"seq":1,"now":"late","step_s":1}', Tick, "$.now", id="wrong-type"),
        pytest.param(b"{not json", Tick, "malformed JSON", id="malformed"),
        pytest.param(b"", Tick, "malformed JSON", id="empty"),
        pytest.param(b"[1,2]", Tick, "Tick", id="array-not-object"),
    ],
)
def test_decode_error_names_the_field(payload: bytes, type_: type, must_mention: str) -> None:
    with pytest.raises(codec.DecodeError) as info:
        codec.decode(payload, type_)
    assert must_mention in str(info.value)


def test_to_builtins_gives_plain_data() -> None:
    out = codec.to_builtins(Tick(seq=1, now=2.0, step_s=3.0))
    assert out == {"seq": 1, "now": 2.0, "step_s": 3.0}


def test_to_builtins_full_keeps_the_fields_at_their_default() -> None:
    """The wire (and ``to_builtins``) leaves defaults out, so a budget in ``fallback`` shows no phase; the full
    form gives every field of every nested struct, in field order."""
    from colo.messages import BEBudgetState

    msg = NodeMetric(node="n1", at=60.0, pods=[PodMetric(uid="u1")], be_budget=BEBudgetState(threshold_percent=65.0))
    assert "phase" not in codec.to_builtins(msg)["be_budget"]
    out = codec.to_builtins_full(msg)
    assert list(out) == list(NodeMetric.__struct_fields__)
    assert out["be_budget"] == {"threshold_percent": 65.0, "phase": "fallback", "signal": -1.0, "baseline": -1.0,
                                "since": 0.0, "baseline_samples": 0, "cut_at": None, "cut_from_percent": -1.0}
    assert out["pods"][0]["cpu"] == 0 and out["pods"][0]["interference"] is None
    assert out["node_usage"] == {"cpu": 0, "memory": 0}
    assert codec.decode(codec.encode(out), NodeMetric) == msg
