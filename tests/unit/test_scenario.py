"""Scenario assembly on the real traces: counts, units, determinism, documented scaling."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from colo.classes import priority_class_of, qos_class_of, validate_classes
from colo.sim import traces as tr
from colo.sim.scenario import (
    LOAD_AWARE_CPU_FACTOR,
    LOAD_AWARE_CPU_THRESHOLD,
    PODS_PER_NODE,
    V2017_MACHINES,
    Scenario,
    ScenarioParams,
    build_scenario,
)

pytestmark = pytest.mark.skipif(not (tr.traces_dir() / tr.NODE_LIST).exists(),
                                reason=f"traces not found in {tr.traces_dir()}: set COLO_TRACES_DIR or run `make traces`")

SMALL = ScenarioParams(nodes=20, hours=2.0, seed=7)


@pytest.fixture(scope="module")
def small() -> Scenario:
    return build_scenario(SMALL)


@pytest.mark.parametrize(("loader", "expected"), [
    pytest.param(lambda: len(tr.load_nodes()), 1523, id="v2023-nodes"),
    pytest.param(lambda: len(tr.load_services()), 16485, id="dlrm-CN-instances"),
    pytest.param(lambda: len(tr.list_vms()), 60, id="bitbrains-vms"),
    pytest.param(lambda: round(tr.v2017_median_machine_memory(), 2), 0.69, id="v2017-machine-memory"),
], )
def test_trace_counts_match_readme(loader, expected) -> None:  # type: ignore[no-untyped-def]
    assert loader() == expected


def test_units_of_loaders() -> None:
    node = tr.load_nodes()[0]
    assert (node.sn, node.cpu_milli, node.memory_bytes) == ("openb-node-0000", 32000, 262144 * 2**20)
    svc = tr.load_services()[0]
    assert svc.cpu_request_milli % 1000 == 0 and svc.memory_request_bytes % 2**20 == 0
    assert svc.cpu_request_milli >= 24000  # CN instances request 24–192 vCPUs
    vm = tr.load_vm("1")
    assert len(vm.cpu_util) > 8000
    assert all(0.0 <= x <= 1.0 for x in vm.cpu_util) and all(0.0 <= x <= 1.0 for x in vm.memory_util)


def test_nodes_are_real_and_capped(small: Scenario) -> None:
    trace = {n.sn: n for n in tr.load_nodes()}
    assert len(small.nodes) == SMALL.nodes
    assert len({n.name for n in small.nodes}) == SMALL.nodes
    for n in small.nodes:
        t = trace[n.name]
        assert (n.allocatable.cpu, n.allocatable.memory, n.allocatable.pods) == (
            t.cpu_milli, t.memory_bytes, PODS_PER_NODE)
        assert n.capacity == n.allocatable


@pytest.mark.parametrize("params", [
    pytest.param(SMALL, id="small"),
    pytest.param(ScenarioParams(nodes=8, hours=1.0, seed=3, node_kind="cpu"), id="cpu-only"),
])
def test_deterministic_from_seed(params: ScenarioParams) -> None:
    a, b = build_scenario(params), build_scenario(params)
    assert a.nodes == b.nodes and a.arrivals == b.arrivals and a.description == b.description


def test_other_seed_differs() -> None:
    a = build_scenario(SMALL)
    b = build_scenario(ScenarioParams(nodes=SMALL.nodes, hours=SMALL.hours, seed=SMALL.seed + 1))
    assert [n.name for n in a.nodes] != [n.name for n in b.nodes]


def test_ls_pods(small: Scenario) -> None:
    ls = small.ls_pods()
    assert ls, "some LS pods"
    services = {f"ls-{s.instance.replace('_', '-')}": s for s in tr.load_services()}
    for p in ls:
        s = services[p.uid]
        assert (p.requests.cpu, p.limits.cpu) == (s.cpu_request_milli, s.cpu_limit_milli)
        assert (p.requests.memory, p.limits.memory) == (s.memory_request_bytes, s.memory_limit_bytes)
        assert (qos_class_of(p), priority_class_of(p), p.priority) == ("LS", "prod", 9500)
        assert p.sim is not None and p.sim.kind == "series" and p.sim.step_s == 300.0
        assert len(p.sim.cpu_util) == int(SMALL.hours * 12) + 1
        assert p.sim.cpu_scale_milli == s.cpu_limit_milli
        assert validate_classes(p) == []
    assert all(a.at == 0.0 for a in small.arrivals if a.pod.uid.startswith("ls-"))


def test_ls_requests_fill_target_and_stay_placeable(small: Scenario) -> None:
    cluster = sum(n.allocatable.cpu for n in small.nodes)
    requested = sum(p.requests.cpu for p in small.ls_pods())
    assert small.description["ls_cpu_requested_milli"] == requested
    # the greedy packing stops at the first instance that reaches the target
    biggest = max(p.requests.cpu for p in small.ls_pods())
    assert requested <= SMALL.ls_cpu_fraction * cluster + biggest
    assert requested >= 0.4 * cluster
    # every LS pod fits an empty node of the cluster under the LoadAware threshold
    largest = max(n.allocatable.cpu for n in small.nodes)
    assert all(p.limits.cpu * LOAD_AWARE_CPU_FACTOR <= LOAD_AWARE_CPU_THRESHOLD * largest
               for p in small.ls_pods())


def test_batch_pods_follow_documented_scaling(small: Scenario) -> None:
    batch = small.batch_pods()
    assert batch
    tasks = {(t.job_id, t.task_id): t for t in tr.load_batch_tasks()}
    start = SMALL.batch_window_start_s
    m_norm = tr.v2017_median_machine_memory()
    per_task: Counter[tuple[int, int]] = Counter()
    bytes_per_milli = sum(n.allocatable.memory for n in small.nodes) / sum(n.allocatable.cpu for n in small.nodes)
    for p in batch:
        _, job, task, _k = p.uid.split("-")
        t = tasks[(int(job), int(task))]
        per_task[(t.job_id, t.task_id)] += 1
        assert t.status == "Terminated"
        assert start <= t.create_s < start + SMALL.hours * 3600 - SMALL.batch_warmup_s
        assert t.duration_s >= SMALL.min_batch_duration_s
        group = max(1, SMALL.max_batch_pod_cpu_milli // (t.plan_cpu * 10))
        assert p.requests.cpu == t.plan_cpu * 10 * group <= SMALL.max_batch_pod_cpu_milli
        expected_mem = round(t.plan_mem / m_norm * 64 * 1000 * bytes_per_milli) * group
        assert p.requests.memory == expected_mem
        assert p.sim is not None and p.sim.duration_s == t.duration_s
        assert p.created_at == t.create_s - start + SMALL.batch_warmup_s
        assert (qos_class_of(p), priority_class_of(p), p.priority) == ("BE", "batch", 5500)
        assert validate_classes(p) == []
    scale = SMALL.nodes / V2017_MACHINES * SMALL.batch_scale
    for key, n in per_task.items():
        t = tasks[key]
        group = max(1, SMALL.max_batch_pod_cpu_milli // (t.plan_cpu * 10))
        expected = t.instances * scale / group
        assert math.floor(expected) <= n <= math.floor(expected) + 1


def test_arrivals_sorted_and_unique(small: Scenario) -> None:
    times = [a.at for a in small.arrivals]
    assert times == sorted(times)
    uids = [a.pod.uid for a in small.arrivals]
    assert len(uids) == len(set(uids))
    assert all(0 <= a.at < small.duration_s for a in small.arrivals)
    assert min(a.at for a in small.arrivals if a.pod.uid.startswith("batch-")) >= SMALL.batch_warmup_s


def test_default_scenario_size() -> None:
    d = build_scenario().description
    assert d["nodes"] == 100
    assert 1000 <= int(d["batch_pods"]) <= 6000  # "a few thousand" (docs/scenario.md)
    assert 0.5 <= float(d["ls_cpu_requested_fraction"]) <= 0.7


@pytest.mark.parametrize(("params", "message"), [
    pytest.param(ScenarioParams(nodes=0), "nodes must be", id="zero-nodes"),
    pytest.param(ScenarioParams(hours=0), "hours must be", id="zero-hours"),
    pytest.param(ScenarioParams(nodes=5000), "asked for 5000 nodes", id="too-many-nodes"),
    pytest.param(ScenarioParams(node_kind="gpu"), "node_kind", id="bad-kind"),
])
def test_bad_params(params: ScenarioParams, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_scenario(params)


def test_missing_traces_clear_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(tr.TraceError, match="colo traces fetch"):
        build_scenario(SMALL, root=tmp_path)


def test_traces_dir_env(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert tr.traces_dir({"COLO_TRACES_DIR": str(tmp_path)}) == tmp_path


def test_demo_names_the_missing_trace_on_one_line_when_piped(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Piped output (no terminal) must not wrap the missing file's path: a user copies it."""
    import os
    import subprocess
    import sys

    deep = tmp_path / ("traces-" + "x" * 60)
    deep.mkdir()
    env = {**os.environ, "COLO_TRACES_DIR": str(deep)}
    done = subprocess.run([sys.executable, "-m", "colo.sim", "--nodes", "20", "--hours", "1",
                           "--out", str(tmp_path / "out")], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    want = str(deep / "alibaba-gpu-v2023" / "openb_node_list_all_node.csv")
    assert any(want in line and "colo traces fetch" in line for line in done.stdout.splitlines()), done.stdout
