"""LS and BE egress throughput on this machine with and without the node agent's network QoS.

The lab (:mod:`colo.testing.netlab`): a veth pair from the host network into a new namespace ``colo-rx-<hex>``
holding a TCP receiver that counts each sender's bytes; cgroup v1 ``net_prio`` mounted in a temp dir. The host
backend (in this process, ``loop_s`` 0.1, under a unique parent ``colo-bench-<hex>``) runs two sender pods on
the host network, one LS and one BE, each sending 64 KiB writes as fast as TCP lets it. Per run the receiver
waits ``--warmup-s``, then counts ``--seconds``; runs ``off`` (no net_qos: the veth is unshaped) and ``on``
(``total_bps`` / ``ls_bps`` / ``be_bps``: HTB, BE held to its limit, LS guaranteed its rate) alternate for
``--rounds`` rounds. Reported per run: the median over rounds of each sender's bits/s. Everything made is
removed at the end (pods, groups, namespace, veth, mount).

Run: ``.venv/bin/python bench/net_qos.py`` (root, ip/tc, cgroup v1; ~30 s). Prints a summary, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from colo.messages import NetQoSStrategy, NodeSLO, PodSpec, Resources
from colo.testing.netlab import RECEIVER, SENDER, NetLab, lab_problem, net_prio_root
from colo_node_agent.backends.host import HostBackend, HostConfig

NODE = "bench-net"
PORT = 5201


def one_run(lab: NetLab, root: Path, net: NetQoSStrategy, args: argparse.Namespace) -> dict[str, float]:
    """bits/s of the LS and the BE sender under ``net``."""
    parent = f"colo-bench-{uuid.uuid4().hex[:10]}"
    slo = NodeSLO(node=NODE, net_qos=net)
    state = tempfile.mkdtemp(prefix="colo-bench-net-")
    b = HostBackend(HostConfig(node_name=NODE, cgroup_root=str(root), cgroup_parent=parent, state_dir=state,
                               loop_s=0.1), lambda n: slo, start=time.time())
    recv = subprocess.Popen(lab.exec_args(lab.rx, sys.executable, "-c", RECEIVER, lab.rx_addr, str(PORT), "ls,be",
                                          str(args.warmup_s), str(args.seconds)), stdout=subprocess.PIPE, text=True)
    try:
        assert recv.stdout is not None and recv.stdout.readline().strip() == "listening"
        b.advance(time.time())
        if b.net.problem:
            raise RuntimeError(b.net.problem)
        for uid, qos, req in (("ls", "LS", Resources(cpu=100)), ("be", "BE", Resources(batch_cpu=100))):
            cmd = [sys.executable, "-c", SENDER, lab.rx_addr, str(PORT), uid]
            b.start_pod(PodSpec(uid=uid, name=uid, qos_class=qos, command=cmd, requests=req), NODE)  # type: ignore[arg-type]
        deadline = time.monotonic() + args.warmup_s + args.seconds + 20
        while recv.poll() is None and time.monotonic() < deadline:
            b.advance(time.time())
            time.sleep(0.1)
        out, _ = recv.communicate(timeout=10)
        rates: dict[str, float] = json.loads(out.strip().splitlines()[-1])
        return rates
    finally:
        recv.kill()
        b.purge()
        subprocess.run(["rm", "-rf", state], check=False)


def run(args: argparse.Namespace) -> dict[str, Any]:
    problem = lab_problem()
    if problem:
        raise SystemExit(f"net_qos bench cannot run here: {problem}")
    samples: dict[str, list[dict[str, float]]] = {"off": [], "on": []}
    with net_prio_root() as root, NetLab() as lab:
        on = NetQoSStrategy(enabled=True, interface=lab.tx_if, total_bps=args.total_mbit * 1_000_000,
                            ls_bps=args.ls_mbit * 1_000_000, be_bps=args.be_mbit * 1_000_000)
        for r in range(args.rounds):
            for name, net in (("off", NetQoSStrategy()), ("on", on)) if r % 2 == 0 else (("on", on),
                                                                                         ("off", NetQoSStrategy())):
                samples[name].append(one_run(lab, root, net, args))
    runs = {name: {f"{tag}_mbit": round(statistics.median(s[tag] for s in rs) / 1e6, 2) for tag in ("ls", "be")}
            for name, rs in samples.items()}
    return {"bench": "net_qos", "total_mbit": args.total_mbit, "ls_guaranteed_mbit": args.ls_mbit,
            "be_limit_mbit": args.be_mbit, "rounds": args.rounds, "seconds": args.seconds, "runs": runs,
            "samples": {n: [{k: round(v / 1e6, 2) for k, v in s.items()} for s in rs] for n, rs in samples.items()},
            "machine": {"kernel": platform.release(), "python": platform.python_version()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--total-mbit", type=int, default=50, help="HTB total (Mbit/s)")
    ap.add_argument("--ls-mbit", type=int, default=30, help="LS guaranteed rate (Mbit/s)")
    ap.add_argument("--be-mbit", type=int, default=10, help="BE limit (Mbit/s)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup-s", type=float, default=1.5)
    ap.add_argument("--seconds", type=float, default=4.0)
    res = run(ap.parse_args())
    for name, r in res["runs"].items():
        print(f"{name:>4}: LS {r['ls_mbit']:8.2f} Mbit/s   BE {r['be_mbit']:8.2f} Mbit/s")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
