"""The BE budget's signals on the host backend: each LS pod's interference over the last agent loop
(docs/node-agent.md "BE budget").

The interference readers (:mod:`.host_interference`) accumulate every pod's run-queue wait, run time, cycles and
instructions each loop and report them over the report window (``PodMetric.interference``). The BE budget judges
every loop, so this module takes its own differences of the same accumulated counters between two loops
(nothing is read twice, the report window is untouched): ``runq_wait_ratio`` = Δwait / Δrun, ``cpi`` = Δcycles /
Δinstructions (−1 without perf events), and ``cpu_pressure_some`` the pod group's PSI avg10 when the budget's
signal is ``cpu_pressure`` (else −1: the file is not read). A pod's first loop has no window yet (no signal).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from colo.messages import InterferenceSignals
from colo_node_agent.backends.host_interference import InterferenceSampler, runq_wait_ratio
from colo_node_agent.backends.host_perf import cpi
from colo_node_agent.backends.host_pods import HostPod


def update_loop_signals(sampler: InterferenceSampler, pods: Iterable[HostPod], now: float,
                        pressure: Callable[[str], Mapping[str, float]] | None = None) -> None:
    """Set ``interference``/``interference_at`` of every pod of ``pods`` the sampler counts (the LS pods) to
    its signals since the previous call (module doc); ``pressure(cgroup)`` the group's PSI (None = not read)."""
    for pod in pods:
        st = sampler.pods.get(pod.uid)
        if st is None:
            continue
        cyc, ins = (st.cycles.cycles, st.cycles.instructions) if st.cycles is not None else (0, 0)
        cur = (st.run_ns, st.wait_ns, cyc, ins)
        prev, pod.loop_counters = pod.loop_counters, cur
        if prev is None:
            continue
        psi = float(pressure(pod.state.cgroup).get("cpu.some", -1.0)) if pressure is not None else -1.0
        pod.interference = InterferenceSignals(
            runq_wait_ratio=round(runq_wait_ratio(cur[0] - prev[0], cur[1] - prev[1]), 4),
            cpu_pressure_some=psi,
            cpi=round(cpi(cur[2] - prev[2], cur[3] - prev[3]), 4) if st.cycles is not None else -1.0)
        pod.interference_at = now
