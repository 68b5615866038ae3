"""OOM priority and network QoS: the pure mappings (table tests), the tc commands and the value checks."""

from __future__ import annotations

import pytest

from colo.messages import NetQoSStrategy, NodeSLO, OOMStrategy
from colo.slo import strategies_of, strategy_problems
from colo_node_agent.backends.host_tc import install_commands
from colo_node_agent.strategies.net_qos import HTBClass, htb_classes, net_priority
from colo_node_agent.strategies.oom_score import oom_score_adj

GI = 1 << 30
ON = OOMStrategy()

OOM_CASES = [
    # name, qos, request bytes, capacity bytes, policy, expected
    ("be", "BE", 0, 16 * GI, ON, 1000),
    ("be with a request", "BE", 8 * GI, 16 * GI, ON, 1000),
    ("lsr", "LSR", 4 * GI, 16 * GI, ON, -997),
    ("lse", "LSE", 4 * GI, 16 * GI, ON, -997),
    ("system", "SYSTEM", 0, 16 * GI, ON, -997),
    ("ls no request: just below 0", "LS", 0, 16 * GI, ON, -1),
    ("ls a quarter", "LS", 4 * GI, 16 * GI, ON, -250),
    ("ls rounds like the kubelet (1000 - 1000*r//c - 1000)", "LS", 1 * GI, 3 * GI, ON, -333),
    ("ls all memory: one above lsr", "LS", 16 * GI, 16 * GI, ON, -996),
    ("ls more than the node", "LS", 32 * GI, 16 * GI, ON, -996),
    ("ls tiny request stays below ls_max", "LS", 1, 16 * GI, ON, -1),
    ("ls unknown capacity", "LS", 4 * GI, 0, ON, -1),
    ("ls ceiling above zero: the share itself", "LS", 0, 16 * GI, OOMStrategy(ls_max_score_adj=500), 0),
    ("ls ceiling caps a small request", "LS", 1 * GI, 16 * GI, OOMStrategy(ls_max_score_adj=-100), -100),
    ("custom be", "BE", 0, 16 * GI, OOMStrategy(be_score_adj=900), 900),
    ("off: kernel default for be", "BE", 0, 16 * GI, OOMStrategy(enabled=False), 0),
    ("off: kernel default for lsr", "LSR", 0, 16 * GI, OOMStrategy(enabled=False), 0),
]


@pytest.mark.parametrize(("qos", "request_bytes", "capacity", "policy", "want"), [c[1:] for c in OOM_CASES],
                         ids=[c[0] for c in OOM_CASES])
def test_oom_score_adj(qos: str, request_bytes: int, capacity: int, policy: OOMStrategy, want: int) -> None:
    assert oom_score_adj(qos, request_bytes, capacity, policy) == want  # type: ignore[arg-type]


def test_be_always_outscores_ls_in_the_kernel_badness() -> None:
    # oom_badness: rss pages + adj x total / 1000; BE with 1 page beats LS holding all but one page
    total = 1 << 20
    be = 1 + oom_score_adj("BE", 0, GI, ON) * total // 1000
    for request in (0, GI // 2, GI):
        ls = (total - 1) + oom_score_adj("LS", request, GI, ON) * total // 1000
        assert be > ls


NET = NetQoSStrategy(enabled=True, interface="eth0", total_bps=100_000_000, ls_bps=60_000_000, be_bps=20_000_000)

HTB_CASES = [
    ("off", NetQoSStrategy(), []),
    ("ls, be and the rest", NET, [HTBClass(1, 0, 100_000_000, 100_000_000), HTBClass(0x10, 1, 60_000_000, 100_000_000),
                                  HTBClass(0x20, 1, 20_000_000, 20_000_000, prio=1),
                                  HTBClass(0x30, 1, 20_000_000, 100_000_000, prio=1)]),
    ("no rest left: the minimum rate", NetQoSStrategy(enabled=True, interface="eth0", total_bps=10_000_000,
                                                      ls_bps=8_000_000, be_bps=2_000_000),
     [HTBClass(1, 0, 10_000_000, 10_000_000), HTBClass(0x10, 1, 8_000_000, 10_000_000),
      HTBClass(0x20, 1, 2_000_000, 2_000_000, prio=1), HTBClass(0x30, 1, 8_000, 10_000_000, prio=1)]),
]


@pytest.mark.parametrize(("policy", "want"), [c[1:] for c in HTB_CASES], ids=[c[0] for c in HTB_CASES])
def test_htb_classes(policy: NetQoSStrategy, want: list[HTBClass]) -> None:
    assert htb_classes(policy) == want


PRIORITY_CASES = [
    ("be", "BE", NET, 0x00C00020),
    ("ls", "LS", NET, 0x00C00010),
    ("lsr with ls", "LSR", NET, 0x00C00010),
    ("lse with ls", "LSE", NET, 0x00C00010),
    ("off", "BE", NetQoSStrategy(), 0),
]


@pytest.mark.parametrize(("qos", "policy", "want"), [c[1:] for c in PRIORITY_CASES], ids=[c[0] for c in PRIORITY_CASES])
def test_net_priority(qos: str, policy: NetQoSStrategy, want: int) -> None:
    assert net_priority(qos, policy) == want  # type: ignore[arg-type]


def test_tc_commands() -> None:
    cmds = install_commands("veth0", htb_classes(NET))
    assert [" ".join(c[1:]) for c in cmds] == [
        "qdisc replace dev veth0 root handle c0: htb default 30",
        "class replace dev veth0 parent c0: classid c0:1 htb rate 100000000bit ceil 100000000bit prio 0",
        "class replace dev veth0 parent c0:1 classid c0:10 htb rate 60000000bit ceil 100000000bit prio 0",
        "class replace dev veth0 parent c0:1 classid c0:20 htb rate 20000000bit ceil 20000000bit prio 1",
        "class replace dev veth0 parent c0:1 classid c0:30 htb rate 20000000bit ceil 100000000bit prio 1",
    ]


PROBLEM_CASES = [
    ("defaults are valid", NodeSLO(node="n"), []),
    ("oom out of range and unordered", NodeSLO(node="n", oom=OOMStrategy(be_score_adj=1001, ls_max_score_adj=-998)),
     ["oom.be_score_adj must be within -1000..1000, got 1001",
      "oom: need lsr_score_adj < ls_max_score_adj < be_score_adj (BE killed first, LSE/LSR last), "
      "got -997, -998, 1001"]),
    ("net off: anything goes", NodeSLO(node="n", net_qos=NetQoSStrategy(interface="a/b", total_bps=-1)), []),
    ("net on: every problem", NodeSLO(node="n", net_qos=NetQoSStrategy(enabled=True, interface="a/b",
                                                                      total_bps=10, ls_bps=10, be_bps=0)),
     ["net_qos.interface must be a network interface name (1..15 characters, no '/', ':' or spaces), got 'a/b'",
      "net_qos.be_bps must be > 0 bits/s when enabled, got 0"]),
    ("net on: interface too long", NodeSLO(node="n", net_qos=NetQoSStrategy(
        enabled=True, interface="a" * 16, total_bps=10, ls_bps=5, be_bps=5)),
     [f"net_qos.interface must be a network interface name (1..15 characters, no '/', ':' or spaces), "
      f"got {'a' * 16!r}"]),
    ("net on: ls + be above total", NodeSLO(node="n", net_qos=NetQoSStrategy(
        enabled=True, interface="eth0", total_bps=10, ls_bps=8, be_bps=4)),
     ["net_qos: ls_bps + be_bps (12) must not exceed total_bps (10)"]),
]


@pytest.mark.parametrize(("slo", "want"), [c[1:] for c in PROBLEM_CASES], ids=[c[0] for c in PROBLEM_CASES])
def test_isolation_problems(slo: NodeSLO, want: list[str]) -> None:
    assert strategy_problems(strategies_of(slo)) == want
