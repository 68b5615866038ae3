"""The bus grants of colo.permissions against the code: every subject a service's code names is declared, a
subject it subscribes to is in ``consumes``, one it publishes in ``publishes``; and the permission lists
that follow (tokens narrowed to the service's own name and a node agent's nodes).

The runtime side (each service against a nats-server with these permissions) is
tests/integration/test_security.py."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from colo import permissions
from colo import subjects as S
from colo.subjects import Subject

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"scheduler": "scheduler/colo_scheduler", "descheduler": "descheduler/colo_descheduler",
            "slo-manager": "slo-manager/colo_slo_manager", "node-agent": "node-agent/colo_node_agent",
            "profiler": "profiler/colo_profiler", "api": "api/colo_api"}
ALWAYS = {S.DEAD_LETTER.pattern, S.SIM_TICK.pattern}
"""Subjects the runtime and bus use for every service (dead letters, ticks): granted to all."""


def _subject(node: ast.AST) -> Subject[Any] | None:
    """The registry Subject an expression like ``subjects.POD_BOUND`` / ``S.POD_BOUND`` names, or None."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("subjects", "S"):
        value = getattr(S, node.attr, None)
        return value if isinstance(value, Subject) else None
    return None


def code_facts(files: list[Path]) -> tuple[set[str], set[str], set[str]]:
    """(subjects named anywhere, subjects passed first to ``subscribe*``, subjects passed first to ``publish``)."""
    named: set[str] = set()
    subscribed: set[str] = set()
    published: set[str] = set()
    for f in files:
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            s = _subject(node)
            if s is not None:
                named.add(s.pattern)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
                first = _subject(node.args[0])
                if first is None:
                    continue
                if node.func.attr in ("subscribe", "subscribe_batch"):
                    subscribed.add(first.pattern)
                elif node.func.attr == "publish":
                    published.add(first.pattern)
    return named, subscribed, published


def _patterns(subjects: tuple[Subject[Any], ...]) -> set[str]:
    return {s.pattern for s in subjects}


@pytest.mark.parametrize("service", sorted(PACKAGES))
def test_a_service_names_only_subjects_its_grant_declares(service: str) -> None:
    files = sorted((ROOT / "services" / PACKAGES[service]).rglob("*.py"))
    assert files
    named, subscribed, published = code_facts(files)
    grant = permissions.GRANTS[service]
    declared = _patterns(grant.publishes) | _patterns(grant.consumes) | _patterns(grant.listens) | ALWAYS
    if grant.listens_everything:
        declared |= {s.pattern for s in S.ALL}
    assert named - declared == set(), f"{service} names subjects missing from colo.permissions.GRANTS"
    assert subscribed - _patterns(grant.consumes) - ALWAYS == set(), f"{service} subscribes undeclared subjects"
    assert published - _patterns(grant.publishes) - ALWAYS == set(), f"{service} publishes undeclared subjects"


def test_submissions_publish_only_the_declared_subjects() -> None:
    named, _, _ = code_facts([ROOT / "shared" / "colo" / "submission.py"])
    submitted = {p for p in named if ".submitted" in p or ".spec." in p}
    assert submitted == _patterns(permissions.SUBMISSIONS)


def test_the_code_scan_finds_a_subject_left_out() -> None:
    """The scan above can fail: a call site naming a subject the grant lacks is reported."""
    named, subscribed, published = code_facts([Path(__file__)])
    assert S.POD_EVICT.pattern in published and S.NODE_SLO.pattern in subscribed  # from the lines below
    if False:  # pragma: no cover - parsed, never run
        bus: Any = None
        bus.publish(S.POD_EVICT, None)
        bus.subscribe(S.NODE_SLO, None, durable="x")


def test_a_node_agent_publishes_only_its_own_nodes_subjects() -> None:
    perms = permissions.nats_permissions("node-agent", ["n1", "n2"])
    pub = perms["publish"]["allow"]
    assert "colo.v1.node.metric.n1" in pub and "colo.v1.node.metric.n2" in pub
    assert "colo.v1.pod.status.n1" in pub and "colo.v1.node.registered.n2" in pub
    assert not [p for p in pub if p.startswith("colo.v1.") and (p.endswith(".*") or p.endswith(".>"))]
    assert "colo.v1.dlq.node-agent" in pub and "colo.v1.pod.bound.n1" not in pub
    assert perms["subscribe"]["allow"] == ["_INBOX.>", "colo.v1.sim.tick.node-agent"]
    own = permissions.nats_permissions("node-agent", ["n1"], inbox_prefix="_INBOX_node-agent-1")
    assert own["subscribe"]["allow"][0] == "_INBOX_node-agent-1.>"
    assert perms["allow_responses"] is True


def test_service_tokens_are_the_services_own() -> None:
    pub = permissions.nats_permissions("slo-manager")["publish"]["allow"]
    assert "colo.v1.dlq.slo-manager" in pub and "colo.v1.config.applied.slo-manager" in pub
    assert "colo.v1.dlq.*" not in pub and "$KV.colo-config.>" in pub
    sched = permissions.nats_permissions("scheduler")["publish"]["allow"]
    assert "colo.v1.pod.bound.*" in sched and "colo.v1.pod.admitted" not in sched
    assert "$JS.API.CONSUMER.CREATE.COLO_PODS.>" in sched and not [p for p in sched if "STREAM.DELETE" in p]


@pytest.mark.parametrize(("service", "nodes", "error"), [
    ("node-agent", None, "give the names of the nodes"),
    ("scheduler", ["n1"], "not node-scoped"),
    ("node-agent", ["a.b"], "not a subject token"),
    ("nobody", None, "unknown service"),
])
def test_bad_requests_are_refused(service: str, nodes: list[str] | None, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        permissions.nats_permissions(service, nodes)


def test_consumers_are_granted_by_their_exact_names() -> None:
    """A service may touch only its own consumers (issue 15: the node agent pulled from the scheduler's)."""
    pub = permissions.nats_permissions("profiler")["publish"]["allow"]
    assert "$JS.API.CONSUMER.MSG.NEXT.COLO_PODS.profiler-pod-bound" in pub
    assert not [p for p in pub if p.startswith("$JS.API.CONSUMER.") and p.endswith(".*")]
    assert not [p for p in pub if p.startswith("$JS.API.STREAM.UPDATE.COLO_")]
    agent = permissions.nats_permissions("node-agent", ["n1"], instance="agent-a")["publish"]["allow"]
    assert "$JS.ACK.COLO_PODS.node-agent-bound-agent-a.>" in agent and "$JS.ACK.COLO_PODS.>" not in agent
    digest = permissions.nats_permissions("node-agent", ["n1"])["publish"]["allow"]
    assert f"$JS.API.CONSUMER.MSG.NEXT.COLO_PODS.node-agent-bound-{permissions.node_agent_id(['n1'])}" in digest
    assert "$JS.API.STREAM.UPDATE.COLO_PODS" in permissions.nats_permissions("scheduler")["publish"]["allow"]


def test_the_compose_node_agents_instances_are_those_of_compose_yaml() -> None:
    import yaml

    from colo.cli.security import COMPOSE_INSTANCES

    services = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    given = dict(v.split("=", 1) for v in COMPOSE_INSTANCES)
    assert given == {name: services[name]["environment"]["COLO_INSTANCE"] for name in given}
