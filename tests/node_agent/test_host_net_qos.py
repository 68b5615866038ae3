"""Network QoS on this machine: two network namespaces joined by a veth pair, a receiver in one, an LS and a BE
sender pod (real processes in net_prio cgroups, on the host network) in the other. With net_qos on, the agent's HTB tree holds BE to
its limit and LS gets at least its guaranteed rate while both send; off, BE takes what it can.

Skipped with the reason where the machine cannot run it (not root, no ip/tc, no netns, no net_prio). Each test
works under its own ``colo-test-<hex>`` cgroup parent and its own namespaces, all removed at the end."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from colo.messages import NetQoSStrategy, NodeSLO, PodSpec, Resources
from colo.testing.netlab import RECEIVER, SENDER, NetLab, lab_problem, net_prio_root
from colo_node_agent.backends import host_tc
from colo_node_agent.backends.host import HostBackend, HostConfig

pytestmark = pytest.mark.cgroup

NODE = "host-net"
PORT = 5201
MBIT = 1_000_000
TOTAL, LS_RATE, BE_RATE = 50 * MBIT, 30 * MBIT, 10 * MBIT
TOLERANCE = 0.15
"""HTB shapes to within a few percent over seconds; TCP bursts and a busy shared machine get the rest."""


@pytest.fixture
def lab(cgroup_parent: str) -> Iterator[tuple[NetLab, Path]]:
    problem = lab_problem()
    if problem:
        pytest.skip(f"network lab unavailable: {problem}")
    try:
        root_cm = net_prio_root()
        root = root_cm.__enter__()
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot mount cgroup v1 net_prio: {exc}")
    try:
        with NetLab() as lab:
            yield lab, root
    finally:
        root_cm.__exit__(None, None, None)


def run(lab: NetLab, root: Path, parent: str, tmp: Path, net: NetQoSStrategy) -> dict[str, float]:
    """Start the receiver, the agent (one loop installs the policy) and both senders; bits/s per sender."""
    slo = NodeSLO(node=NODE, net_qos=net)
    b = HostBackend(HostConfig(node_name=NODE, cgroup_root=str(root), cgroup_parent=parent,
                               state_dir=str(tmp / "state"), loop_s=0.1), lambda n: slo, start=time.time())
    recv = subprocess.Popen(lab.exec_args(lab.rx, sys.executable, "-c", RECEIVER, lab.rx_addr, str(PORT),
                                          "ls,be", "1.5", "3"), stdout=subprocess.PIPE, text=True)
    try:
        assert recv.stdout is not None and recv.stdout.readline().strip() == "listening"
        b.advance(time.time())
        assert b.net.problem == ""
        for uid, qos, req in (("ls", "LS", Resources(cpu=100)), ("be", "BE", Resources(batch_cpu=100))):
            cmd = [sys.executable, "-c", SENDER, lab.rx_addr, str(PORT), uid]
            b.start_pod(PodSpec(uid=uid, name=uid, qos_class=qos, command=cmd, requests=req), NODE)  # type: ignore[arg-type]
        b.advance(time.time())
        want = {"ls": 0xC00010, "be": 0xC00020} if net.enabled else {"ls": 0, "be": 0}
        for uid, prio in want.items():
            text = (root / "net_prio" / parent / b.pods[uid].state.cgroup / "net_prio.ifpriomap").read_text()
            assert f"{lab.tx_if} {prio}" in text.splitlines()
        out, _ = recv.communicate(timeout=30)
        rates: dict[str, float] = json.loads(out.strip().splitlines()[-1])
        if net.enabled:
            assert host_tc.ours(lab.tx_if)
            sent = host_tc.class_bytes(lab.tx_if)
            assert sent.get("c0:10", 0) > 0 and sent.get("c0:20", 0) > 0, sent
        return rates
    finally:
        recv.kill()
        b.purge()


def test_be_is_held_to_its_limit_and_ls_gets_its_share(lab: tuple[NetLab, Path], cgroup_parent: str,
                                                       tmp_path: Path) -> None:
    netlab, root = lab
    net = NetQoSStrategy(enabled=True, interface=netlab.tx_if, total_bps=TOTAL, ls_bps=LS_RATE, be_bps=BE_RATE)
    rates = run(netlab, root, cgroup_parent, tmp_path, net)
    assert rates["be"] <= BE_RATE * (1 + TOLERANCE), rates
    assert rates["ls"] >= LS_RATE * (1 - TOLERANCE), rates
    assert rates["ls"] + rates["be"] <= TOTAL * (1 + TOLERANCE), rates


def test_without_net_qos_be_takes_what_it_can(lab: tuple[NetLab, Path], cgroup_parent: str, tmp_path: Path) -> None:
    netlab, root = lab
    rates = run(netlab, root, cgroup_parent, tmp_path, NetQoSStrategy())
    assert rates["be"] > 3 * BE_RATE, rates
    assert not host_tc.ours(netlab.tx_if)


def test_switching_off_removes_only_the_agents_tree(lab: tuple[NetLab, Path], cgroup_parent: str) -> None:
    netlab, _ = lab
    from colo_node_agent.backends.host_net import NetQoS

    class Tree:
        version, controllers = "v1", ["cpu", "net_prio"]

    net = NetQoS(Tree())  # type: ignore[arg-type]
    on = NetQoSStrategy(enabled=True, interface=netlab.tx_if, total_bps=TOTAL, ls_bps=LS_RATE, be_bps=BE_RATE)
    assert net.sync(on, 0.0) == "" and host_tc.ours(netlab.tx_if)
    assert net.sync(NetQoSStrategy(), 1.0) == "" and not host_tc.ours(netlab.tx_if)
    # someone else's root qdisc is never removed
    host_tc.run(["tc", "qdisc", "replace", "dev", netlab.tx_if, "root", "handle", "1:", "htb"])
    assert host_tc.remove(netlab.tx_if) is False
    assert "htb 1:" in host_tc.run(["tc", "qdisc", "show", "dev", netlab.tx_if])
    bad = NetQoSStrategy(enabled=True, interface="nosuchdev0", total_bps=TOTAL, ls_bps=LS_RATE, be_bps=BE_RATE)
    assert "nosuchdev0" in net.sync(bad, 2.0)
