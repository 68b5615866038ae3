"""The ``host`` backend's pod lifecycle: adopt at start, start, evict, exits (exit code, OOM kill), cleanup.

:class:`HostLifecycle` keeps the pod tables of :class:`~.host_node.HostNode` and the state file in step with
the pods' processes (:mod:`.host_pods`) and groups (:mod:`.host_cgroups`): a pod's group gets the kubelet's
pod-level settings before its process starts inside it; an exit is classified (Succeeded/Completed,
Failed/OOMKilled, Failed/Error, Failed/StartError) and the group queued for cleanup; an eviction signals the
pod's process group and verified group members. Pods survive an agent restart: the state file and the pod
groups let the next agent adopt them (none orphaned, none started twice). Times are wall-clock seconds.
"""

from __future__ import annotations

import logging
import os
import shutil
import time

import msgspec

from colo.classes import qos_class_of
from colo.messages import PodPhase, PodSpec, QoSEvent
from colo_node_agent.backends.gpus import gpu_env
from colo_node_agent.backends.host_node import HostNode
from colo_node_agent.backends.host_oom import pod_score
from colo_node_agent.backends.host_pods import (
    SIGKILL,
    SIGTERM,
    HostPod,
    PodRecordState,
    alive,
    create_time,
    exit_status,
    launch,
    log_tail,
    pod_paths,
    reap,
    signal_pod,
)
from colo_node_agent.backends.sim import PodEnd
from colo_node_agent.cgroups.layout import pod_dir
from colo_node_agent.cgroups.resources import cpuset_format
from colo_node_agent.strategies.cgroup_settings import pod_settings

log = logging.getLogger("colo.node-agent.host")

PURGE_TIMEOUT_S = 5.0
"""How long :meth:`HostLifecycle._purge_group` keeps killing a group's members before giving up (seconds)."""


class HostLifecycle(HostNode):
    """Pods as processes on :class:`~.host_node.HostNode`: :meth:`start_pod`, :meth:`evict_pod`, exits and
    cleanup (called by the loop), adoption at start, :meth:`close` and :meth:`purge`."""

    # ------------------------------------------------------------------ adoption and state

    def _adopt(self, now: float) -> None:
        """Adopt the pods of the state file still running; pods that ended while no agent ran are reported
        at the next :meth:`advance`; groups without a usable record are orphans: killed and removed."""
        recorded = self.state_file.load()
        if self.state_file.error:
            log.error("state file unreadable, moved aside: %s", self.state_file.error)
        for uid, st in recorded.items():
            pod = HostPod(st)
            if st.pid <= 0:
                self._purge_group(st.cgroup)
            elif st.terminating:
                pod.kill_at = now
                self.terminating[uid] = pod
            elif alive(pod):
                self.pods[uid] = pod
                self.adopted.append(uid)
            else:
                self._ended.append(self._finish(pod, now))
        for uid, cg in self.tree.pod_groups().items():
            if uid not in recorded or recorded[uid].pid <= 0:
                log.warning("pod group %s has no record: killing its processes and removing it", cg)
                self._purge_group(cg)
        self._save()

    def _save(self) -> None:
        states = [p.state for p in self.pods.values()] + [p.state for p in self.terminating.values()]
        self.state_file.save(states)

    def _members(self, cgroup: str) -> list[int]:
        """Pids the kernel confirms are in ``cgroup`` (never a stranger, see CgroupTree.member)."""
        return [pid for pid in self.tree.procs(cgroup) if self.tree.member(pid, cgroup)]

    def _purge_group(self, cgroup: str) -> bool:
        """SIGKILL every member of ``cgroup`` until it is empty, then remove it (≤ PURGE_TIMEOUT_S)."""
        deadline = time.monotonic() + PURGE_TIMEOUT_S
        while True:
            members = self._members(cgroup)
            for pid in members:
                try:
                    os.kill(pid, SIGKILL)
                except ProcessLookupError:
                    pass
            if not members and self.tree.remove(cgroup):
                self.ex.forget(cgroup)
                return True
            if time.monotonic() > deadline:
                log.error("cgroup %s still busy after %.0f s", cgroup, PURGE_TIMEOUT_S)
                return False
            time.sleep(0.02)

    def purge(self) -> None:
        """Kill every process in the agent's groups and remove all of them, the parent included, the network
        QoS tree and the state file (tests and benchmarks leave nothing behind with it; the agent never calls it)."""
        for pod in list(self.pods.values()) + list(self.terminating.values()):
            signal_pod(pod, self._members(pod.state.cgroup), SIGKILL)
            reap(pod)
        for cg in self.tree.all_groups():
            self._purge_group(cg)
        for pod in list(self.pods.values()) + list(self.terminating.values()):
            if pod.popen is not None:
                pod.popen.wait(timeout=PURGE_TIMEOUT_S)
        self.pods.clear()
        self.terminating.clear()
        if self.interference is not None:
            self.interference.close()
        self.net.remove()
        self.state_file.path.unlink(missing_ok=True)

    def close(self) -> None:
        """Persist the state; pods keep running (the next agent adopts them)."""
        self._save()

    # ------------------------------------------------------------------ start, stop, exits

    def start_pod(self, spec: PodSpec, node: str, cpuset: tuple[int, ...] = (),
                  devices: tuple[tuple[int, int], ...] = (), bound_at: float = 0.0) -> bool:
        """Make the pod's group with its limits and start its command inside it; ``cpuset`` the CPUs the
        scheduler chose for an LSE/LSR pod (the next strategy round writes them when valid, docs/topology.md);
        ``devices`` the GPUs it assigned, passed to the process as ``CUDA_VISIBLE_DEVICES`` and
        ``COLO_GPU_DEVICES`` (:func:`~.gpus.gpu_env`, docs/gpu.md).

        False when the node is not ours, the pod is known already or has no command. A pod whose group or
        process cannot be made is accepted and reported Failed (StartError) by the next :meth:`advance`.
        """
        if node not in self.index or self.has_pod(spec.uid) or not spec.command:
            return False
        at = self.clock()
        qos = qos_class_of(spec)
        cg = pod_dir(qos, spec.uid)
        pod = HostPod(PodRecordState(spec=spec, node=node, qos=qos, cgroup=cg, started_at=at, bound_at=bound_at,
                                     cpuset=cpuset_format(cpuset)))
        self.pods[spec.uid] = pod
        try:
            self.tree.ensure(cg)
        except OSError as exc:
            self._start_failed(pod, f"cannot create cgroup {cg}: {exc}", at)
            return True
        self.ex.forget(cg)
        self._record(self.ex.apply(pod_settings(spec, qos), at=at))
        self.net.classify([(cg, qos)], self.slo.net_qos, prune=False)
        if qos == "BE":
            self._apply_be_settings(at)
        self._save()
        try:
            popen = launch(spec, self.tree.procs_files(cg), self.state_dir, gpu_env(tuple(devices)),
                           oom_score_adj=pod_score(spec, qos, self.cap.memory_bytes, self.slo.oom))
        except OSError as exc:
            self._start_failed(pod, f"cannot start {spec.command[0]!r}: {exc}", at)
            return True
        pod.popen = popen
        started = create_time(popen.pid) or at
        pod.state = msgspec.structs.replace(pod.state, pid=popen.pid, create_time=started)
        self._save()
        return True

    def _start_failed(self, pod: HostPod, message: str, at: float) -> None:
        self.pods.pop(pod.uid, None)
        self._purge_group(pod.state.cgroup)
        self._ended.append(self._end(pod, "Failed", "StartError", message, at))
        self._save()

    def evict_pod(self, uid: str, reason: str, message: str, at: float,
                  grace_s: float | None = None) -> PodEnd | None:
        """Stop pod ``uid`` as Failed with ``reason``: SIGTERM to its process group and cgroup members, SIGKILL
        after ``grace_s`` (default ``termination_grace_s``; 0 = SIGKILL now); its group is removed once empty.
        None when it does not run here."""
        pod = self.pods.pop(uid, None)
        if pod is None:
            return None
        grace = self.config.termination_grace_s if grace_s is None else grace_s
        pod.state = msgspec.structs.replace(pod.state, terminating=True)
        pod.kill_at = at + grace
        signal_pod(pod, self._members(pod.state.cgroup), SIGKILL if grace <= 0 else SIGTERM)
        self.terminating[uid] = pod
        self._save()
        return self._end(pod, "Failed", reason, message, at)

    def _end(self, pod: HostPod, phase: PodPhase, reason: str, message: str, at: float) -> PodEnd:
        return PodEnd(pod.uid, pod.state.node, phase, reason, message, at, pod.state.spec)

    def _finish(self, pod: HostPod, at: float) -> PodEnd:
        """A pod whose main process exited: classify how (exit code, OOM), queue its group for cleanup."""
        cg = pod.state.cgroup
        status = exit_status(pod, self.state_dir)
        oom = self.tree.oom_kills(cg) or 0
        peak, limit = self.tree.memory_peak(cg), self.tree.memory_limit(cg)
        at_limit = peak is not None and limit is not None and limit > 0 and peak >= limit - (1 << 20)
        code = status.code
        phase: PodPhase = "Failed"
        if status.start_error:
            reason, message = "StartError", status.start_error
        elif code == 0:
            phase, reason, message = "Succeeded", "Completed", ""
        elif oom > 0 or (code == 137 and at_limit):
            reason = "OOMKilled"
            message = (f"exit code {code}: {oom} OOM kill(s) in the pod's cgroup, "
                       f"peak {peak} of limit {limit} bytes")
            self.counts["oom_kills"] += 1
            self._events.append(QoSEvent(node=pod.state.node, kind="oom", at=at, reason=message,
                                         pods=[pod.uid]))
        elif code is None:
            reason, message = "Error", "exit status unknown: the pod ended while no agent watched it"
        else:
            tail = log_tail(self.state_dir, pod.uid)
            reason, message = "Error", f"exit code {code}" + (f": {tail}" if tail else "")
        if phase == "Succeeded" and pod.state.qos == "BE":
            self.counts["batch_completed"] += 1
        pod.state = msgspec.structs.replace(pod.state, terminating=True)
        pod.kill_at = at
        self.pods.pop(pod.uid, None)
        self.terminating[pod.uid] = pod
        return self._end(pod, phase, reason, message, at)

    def _cleanup(self, now: float) -> None:
        """Remove the groups of terminated pods once empty; SIGKILL those past their grace period."""
        changed = be_changed = False
        for uid, pod in list(self.terminating.items()):
            reap(pod)
            members = self._members(pod.state.cgroup)
            if not members and not alive(pod):
                if self.tree.remove(pod.state.cgroup):
                    self.ex.forget(pod.state.cgroup)
                    shutil.rmtree(pod_paths(self.state_dir, uid)[0], ignore_errors=True)
                    del self.terminating[uid]
                    changed = True
                    be_changed |= pod.state.qos == "BE"
            elif now >= pod.kill_at:
                signal_pod(pod, members, SIGKILL)
        if be_changed:
            self._apply_be_settings(now)
        if changed:
            self._save()
