"""Interference signals of the host backend's LS pods: run-queue wait, CPU pressure, CPI (docs/node-agent.md
"Interference signals"; the message is :class:`colo.messages.InterferenceSignals`, −1 = unknown).

* ``runq_wait_ratio``: seconds a pod's threads waited on a run queue per second they ran, Δwait / Δrun over the
  report window. Per thread, ``/proc/<tid>/schedstat`` gives the nanoseconds on a CPU (field 1) and waiting to
  run (field 2; the kernel's ``sched_info``, ``Documentation/scheduler/sched-stats.rst``); the threads are the
  pod group's ``tasks`` (v1) / ``cgroup.threads`` (v2). Read every loop and accumulated per pod: a thread seen
  for the first time adds all its counters (it began inside the pod), one whose counters went back is a new
  thread under a recycled id (its counters count from 0), and a thread that exited loses only what it did
  after the previous loop's read. −1 when the pod did not run in the window (Δrun = 0) or was not read yet.
* ``cpu_pressure_some``: the pod group's PSI ``cpu.some`` avg10 (percent of wall time some thread of the group
  was runnable but waiting; v2 ``cpu.pressure``, on v1 the hybrid ``unified`` mount's file), −1 where the kernel
  has none for the group.
* ``cpi``: Δcycles / Δinstructions of the pod's threads over the window (:mod:`.host_perf`), −1 where the kernel
  offers no hardware events (probed once, logged once).

Memory is bounded by the live pods and their threads: a pod missing from a :meth:`InterferenceSampler.sample`
call is forgotten (its perf descriptors closed).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from colo.messages import InterferenceSignals
from colo_node_agent.backends.host_perf import Perf, PodCycles, cpi, probe

log = logging.getLogger("colo.node-agent.host")


@dataclass(frozen=True)
class TaskTimes:
    """Cumulative scheduler times of one thread, nanoseconds: ``run_ns`` on a CPU, ``wait_ns`` runnable but
    waiting on a run queue."""

    run_ns: int
    wait_ns: int


def parse_schedstat(text: str) -> TaskTimes:
    """``/proc/<tid>/schedstat`` ("run_ns wait_ns timeslices"). Raises ValueError when malformed."""
    parts = text.split()
    if len(parts) < 2:
        raise ValueError(f"schedstat {text!r}: want 'run_ns wait_ns timeslices'")
    return TaskTimes(int(parts[0]), int(parts[1]))


def added(prev: Mapping[int, TaskTimes], cur: Mapping[int, TaskTimes]) -> TaskTimes:
    """Run and wait nanoseconds added between two readings of one pod's threads (tid → times).

    A tid only in ``cur`` is a new thread: all its time counts. A tid whose counters went back is a recycled
    id (a new thread): its counters count from 0. A tid only in ``prev`` exited: what it did after ``prev`` is
    lost (the kernel keeps no schedstat of dead threads).
    """
    run = wait = 0
    for tid, now in cur.items():
        before = prev.get(tid)
        if before is None or now.run_ns < before.run_ns or now.wait_ns < before.wait_ns:
            run, wait = run + now.run_ns, wait + now.wait_ns
        else:
            run, wait = run + now.run_ns - before.run_ns, wait + now.wait_ns - before.wait_ns
    return TaskTimes(run, wait)


def runq_wait_ratio(d_run_ns: int, d_wait_ns: int) -> float:
    """Run-queue wait per second on a CPU over a window; −1 when the pod did not run (Δrun ≤ 0)."""
    if d_run_ns <= 0:
        return -1.0
    return max(d_wait_ns, 0) / d_run_ns


@dataclass
class PodCounters:
    """One pod's accumulated counters (cumulative since it was first read) and their values at its last
    report."""

    tasks: dict[int, TaskTimes] = field(default_factory=dict)
    run_ns: int = 0
    wait_ns: int = 0
    cycles: PodCycles | None = None
    reported: tuple[int, int, int, int] | None = None
    """(run_ns, wait_ns, cycles, instructions) at the previous :meth:`InterferenceSampler.signals`."""


class InterferenceSampler:
    """Per-pod interference counters of the host backend.

    ``threads(cgroup)`` the thread ids of a pod group (:meth:`.CgroupTree.threads`); ``proc`` the procfs root;
    ``count_cpi`` whether to count cycles and instructions, with ``perf`` (default: the real syscall), probed
    once here (:func:`.host_perf.probe`) and logged once when the kernel refuses.
    """

    def __init__(self, threads: Callable[[str], list[int]], proc: str = "/proc", count_cpi: bool = True,
                 perf: Perf | None = None) -> None:
        self.threads = threads
        self.proc = proc
        self.pods: dict[str, PodCounters] = {}
        self.perf: Perf | None = None
        self.perf_problem = "off"
        if count_cpi:
            self.perf, self.perf_problem = probe(perf)
            if self.perf is None:
                log.info("perf hardware events unavailable (%s): interference cpi reported as -1",
                         self.perf_problem)

    def _read(self, tids: list[int]) -> dict[int, TaskTimes]:
        out: dict[int, TaskTimes] = {}
        for tid in tids:
            try:
                fd = os.open(f"{self.proc}/{tid}/schedstat", os.O_RDONLY)
            except OSError:
                continue  # exited since the tasks file was read
            try:
                out[tid] = parse_schedstat(os.read(fd, 128).decode())
            except (OSError, ValueError):
                continue
            finally:
                os.close(fd)
        return out

    def sample(self, pods: Mapping[str, str]) -> None:
        """Read the threads of ``pods`` (uid → pod group) now and add their times; forget every other pod."""
        for uid in [u for u in self.pods if u not in pods]:
            self.forget(uid)
        for uid, cgroup in pods.items():
            st = self.pods.get(uid)
            tids = self.threads(cgroup)
            cur = self._read(tids)
            if st is None:
                st = self.pods[uid] = PodCounters(tasks=cur)  # the baseline: nothing counted yet
                if self.perf is not None:
                    st.cycles = PodCycles(self.perf)
            else:
                d = added(st.tasks, cur)
                st.run_ns += d.run_ns
                st.wait_ns += d.wait_ns
                st.tasks = cur
            if st.cycles is not None:
                st.cycles.update(tids)

    def signals(self, uid: str, pressure: Mapping[str, float]) -> InterferenceSignals:
        """The pod's signals since its previous call (its first: since it was first sampled); ``pressure`` its
        group's PSI avg10 (``cpu.some`` ..., :meth:`.CgroupTree.pressure`). All −1 for a pod never sampled."""
        psi = float(pressure.get("cpu.some", -1.0))
        st = self.pods.get(uid)
        if st is None:
            return InterferenceSignals(cpu_pressure_some=psi)
        cyc, ins = (st.cycles.cycles, st.cycles.instructions) if st.cycles is not None else (0, 0)
        now = (st.run_ns, st.wait_ns, cyc, ins)
        before = st.reported or (0, 0, 0, 0)
        st.reported = now
        ratio = runq_wait_ratio(now[0] - before[0], now[1] - before[1])
        c = cpi(now[2] - before[2], now[3] - before[3]) if st.cycles is not None else -1.0
        return InterferenceSignals(runq_wait_ratio=round(ratio, 4), cpu_pressure_some=psi, cpi=round(c, 4))

    def forget(self, uid: str) -> None:
        """Drop pod ``uid``'s counters and close its perf descriptors."""
        st = self.pods.pop(uid, None)
        if st is not None and st.cycles is not None:
            st.cycles.close()

    def close(self) -> None:
        """Forget every pod."""
        for uid in list(self.pods):
            self.forget(uid)
