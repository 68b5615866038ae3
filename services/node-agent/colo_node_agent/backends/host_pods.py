"""Pods as real processes: launch into cgroups, liveness, exit status, kill, and the state file.

A pod runs ``PodSpec.command`` under a small ``/bin/sh`` wrapper (the pod's *main* process, leader of its own
session and process group):

1. it writes its own pid into the pod group's ``cgroup.procs`` of every hierarchy, *before* running anything,
   so the command starts inside the limits (a failed join writes ``cgroup <file>`` to the exit file and exits
   125: reason ``StartError``), and its ``oom_score_adj`` (OOM priority, :mod:`.host_oom`), which the command
   and its children inherit (a refused value is left to the agent's loop, which reports it);
2. it runs the command with ``PodSpec.env`` over ``PATH`` (no other agent variables leak), stdin from
   /dev/null, stdout and stderr to ``<state_dir>/pods/<uid>/log``, working directory
   ``<state_dir>/pods/<uid>``;
3. it writes the command's exit status to ``<state_dir>/pods/<uid>/exit`` (128 + signal when killed, as a
   shell reports it, so 137 = SIGKILL).

The exit file makes exit codes survive an agent restart: after a restart the pods are no longer the agent's
children (no ``waitpid``), but the wrapper still records how its command ended. Identity across restarts is
(pid, process start time) from the state file, so a recycled pid is never mistaken for a pod.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import psutil

from colo import codec
from colo.messages import InterferenceSignals, PodSpec, QoSClass

WRAPPER = """exitfile=$1; n=$2; adj=$3; shift 3
[ -z "$adj" ] || { echo "$adj" > /proc/self/oom_score_adj; } 2>/dev/null
while [ "$n" -gt 0 ]; do
  echo $$ > "$1" || { echo "cgroup $1" > "$exitfile"; exit 125; }
  shift; n=$((n - 1))
done
"$@"
echo $? > "$exitfile"
"""
"""The pod wrapper run by ``/bin/sh -c``: ``$1`` exit file, ``$2`` n, ``$3`` the ``oom_score_adj`` ("" = keep
the agent's), n ``cgroup.procs`` files, the command."""
START_ERROR_EXIT = 125
"""Exit status of a wrapper that could not join its cgroups (the command never ran)."""
LOG_TAIL_BYTES = 512


class PodRecordState(msgspec.Struct, frozen=True, kw_only=True):
    """One pod in the state file: its spec, where it runs and how to recognize its main process.

    ``pid`` the wrapper's pid (0 while it is being launched), ``create_time`` its start (psutil, seconds since
    the epoch), ``started_at``/``bound_at`` clock seconds, ``terminating`` set once an eviction began.
    """

    spec: PodSpec
    node: str
    qos: QoSClass
    cgroup: str
    pid: int = 0
    create_time: float = 0.0
    started_at: float = 0.0
    bound_at: float = 0.0
    terminating: bool = False
    cpuset: str = ""
    """The cpuset the scheduler chose (``PodBound.cpuset``), kept across agent restarts."""


@dataclass
class HostPod:
    """A pod the backend runs; ``popen`` is set while this process is its parent (not after a restart)."""

    state: PodRecordState
    popen: subprocess.Popen[bytes] | None = None
    kill_at: float = 0.0
    """Clock time after which a terminating pod gets SIGKILL."""
    last_cpu_ns: int | None = None
    last_at: float = 0.0
    last_periods: int = 0
    last_throttled: int = 0
    loop_throttled: int = 0
    """nr_throttled at the previous loop (CPU burst wants to know whether the pod was throttled since)."""
    cpu_milli: float = 0.0
    memory_bytes: int = 0
    throttled_ratio: float = 0.0
    samples: list[tuple[float, float]] = field(default_factory=list)
    """(cpu milli-cores, memory bytes) per loop, newest last, at most the report window."""
    loop_periods: int = 0
    """nr_periods at the previous loop (CPU burst orders throttled pods by their throttled share of periods)."""
    interference: InterferenceSignals | None = None
    """The pod's interference signals over the last loop (LS pods, :mod:`.host_budget`; None = not measured): the
    BE budget reads them each loop."""
    interference_at: float = 0.0
    """When ``interference`` was measured (clock seconds); the BE budget falls back when it is stale."""
    loop_counters: tuple[int, int, int, int] | None = None
    """(run ns, wait ns, cycles, instructions) of the interference counters at the previous loop
    (:mod:`.host_budget`)."""

    @property
    def uid(self) -> str:
        return self.state.spec.uid


@dataclass(frozen=True)
class ExitStatus:
    """How a pod's command ended: ``code`` its exit status (None unknown), ``start_error`` the wrapper could
    not join its cgroups (what it said), ``signal`` the signal that ended the wrapper itself (0 none)."""

    code: int | None
    start_error: str = ""
    signal: int = 0


def pod_paths(state_dir: Path, uid: str) -> tuple[Path, Path, Path]:
    """(pod directory, exit file, log file) of pod ``uid`` under ``state_dir``."""
    d = state_dir / "pods" / uid
    return d, d / "exit", d / "log"


def launch(spec: PodSpec, procs_files: list[str], state_dir: Path,
           extra_env: dict[str, str] | None = None, oom_score_adj: int | None = None) -> subprocess.Popen[bytes]:
    """Start ``spec.command`` under the wrapper, joining ``procs_files`` first, with ``PATH``, the pod's env and
    ``extra_env`` (the GPU variables, :func:`~.gpus.gpu_env`; they win over the pod's) and ``oom_score_adj``
    (−1000..1000; None keeps the agent's). Raises OSError (no /bin/sh, unwritable state dir)."""
    d, exit_file, log_file = pod_paths(state_dir, spec.uid)
    d.mkdir(parents=True, exist_ok=True)
    exit_file.unlink(missing_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")}
    env.update(spec.env)
    env.update(extra_env or {})
    args = ["/bin/sh", "-c", WRAPPER, "colo-pod", str(exit_file), str(len(procs_files)),
            "" if oom_score_adj is None else str(int(oom_score_adj)), *procs_files,
            *spec.command]
    with open(log_file, "ab") as log:
        return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=d, env=env,
                                start_new_session=True, close_fds=True)


def create_time(pid: int) -> float | None:
    """Start time of process ``pid`` (psutil, seconds since the epoch), None when it does not exist."""
    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def same_process(pid: int, created: float) -> bool:
    """Whether ``pid`` is still the process started at ``created`` and has not exited (zombies count as
    exited: after an agent restart nobody may wait for them)."""
    if pid <= 0:
        return False
    try:
        p = psutil.Process(pid)
        return bool(abs(p.create_time() - created) < 0.05 and p.status() != psutil.STATUS_ZOMBIE)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def alive(pod: HostPod) -> bool:
    """Whether the pod's main process runs (``waitpid`` when it is our child, else pid + start time)."""
    if pod.popen is not None:
        return pod.popen.poll() is None
    return same_process(pod.state.pid, pod.state.create_time)


def exit_status(pod: HostPod, state_dir: Path) -> ExitStatus:
    """How the pod's command ended, from its exit file, else from ``waitpid`` (a killed wrapper)."""
    _, exit_file, _ = pod_paths(state_dir, pod.uid)
    try:
        text = exit_file.read_text().strip()
    except OSError:
        text = ""
    if text.startswith("cgroup "):
        return ExitStatus(START_ERROR_EXIT, start_error=f"could not join {text[7:]}")
    if text.isdigit():
        return ExitStatus(int(text))
    if pod.popen is not None and pod.popen.returncode is not None:
        rc = pod.popen.returncode
        return ExitStatus(128 - rc, signal=-rc) if rc < 0 else ExitStatus(rc)
    return ExitStatus(None)


def log_tail(state_dir: Path, uid: str, limit: int = LOG_TAIL_BYTES) -> str:
    """The last line(s) of the pod's log (at most ``limit`` bytes), for a Failed pod's message."""
    _, _, log_file = pod_paths(state_dir, uid)
    try:
        with open(log_file, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(size - limit, 0))
            data = f.read()
    except OSError:
        return ""
    lines = [ln for ln in data.decode(errors="replace").splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


def signal_pod(pod: HostPod, members: list[int], sig: int) -> None:
    """Send ``sig`` to the pod's process group (when its leader is verified to be ours) and to ``members``
    (pids the kernel lists in the pod's cgroup, which the caller verified). Gone processes are ignored."""
    leader = pod.state.pid
    ours = pod.popen.poll() is None if pod.popen is not None else same_process(leader, pod.state.create_time)
    if ours:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(leader, sig)
    for pid in members:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def reap(pod: HostPod) -> None:
    """Collect the exit status of a child wrapper so it does not linger as a zombie."""
    if pod.popen is not None:
        pod.popen.poll()


SIGKILL = signal.SIGKILL
SIGTERM = signal.SIGTERM


class StateFile:
    """``<state_dir>/pods.json``: every pod the backend runs or is terminating, written atomically.

    A file that cannot be decoded is moved aside to ``pods.json.corrupt`` (kept for inspection) and the
    backend starts with no recorded pods; their cgroups are then cleaned as orphans and the store re-launches them.
    """

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "pods.json"
        self.error = ""

    def load(self) -> dict[str, PodRecordState]:
        """Recorded pods by uid ({} when there is no file; see the class doc for a corrupt one)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        try:
            pods = codec.decode(data, list[PodRecordState])
        except codec.DecodeError as exc:
            self.error = f"{self.path}: {exc}"
            os.replace(self.path, self.path.with_suffix(".json.corrupt"))
            return {}
        return {p.spec.uid: p for p in pods}

    def save(self, pods: list[PodRecordState]) -> None:
        """Replace the file with ``pods`` (write to a temp file, fsync, rename). Raises OSError."""
        tmp = self.path.with_suffix(".json.tmp")
        with open(tmp, "wb") as f:
            f.write(codec.encode(pods))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
