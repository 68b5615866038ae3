"""The host backend's cgroup tree: the agent's parent group, its QoS-class groups and one group per pod.

Logical cgroups (``kubepods/besteffort/pod<uid>``, see :mod:`colo_node_agent.cgroups.layout`) live under a
configurable parent (``colo`` by default): on cgroup v1 in every mounted controller the agent uses
(``<root>/<controller>/<parent>/<cgroup>``), on v2 in the unified tree (``<root>/<parent>/<cgroup>``).
:class:`ParentFS` gives the :class:`~colo_node_agent.cgroups.Executor` that view; :class:`CgroupTree` makes
and removes directories (which the executor never does), lists member processes and reads the statistics the
backend samples (REFERENCE.md §5 "cgroup files per dimension"):

==================  ==========================================  ===========================================
what                v1                                          v2
==================  ==========================================  ===========================================
CPU time (ns)       ``cpuacct/…/cpuacct.usage``                 ``cpu.stat`` ``usage_usec`` × 1000
memory used (B)     ``memory.stat`` total_active_anon +         ``memory.stat`` active_anon +
                    total_inactive_anon + total_unevictable     inactive_anon + unevictable
throttling          ``cpu/…/cpu.stat`` nr_periods,              ``cpu.stat`` nr_periods, nr_throttled,
                    nr_throttled, throttled_time (ns)           throttled_usec × 1000
threads (tids)      ``cpu/…/tasks``                             ``cgroup.threads``
OOM kills           ``memory.oom_control`` oom_kill             ``memory.events`` oom_kill
peak memory (B)     ``memory.max_usage_in_bytes``               ``memory.peak``
PSI                 ``unified/…/{cpu,memory,io}.pressure``      ``{cpu,memory,io}.pressure``
                    (hybrid hosts; none without that mount)
==================  ==========================================  ===========================================

Usage, throttling, cpusets and PSI are read through :mod:`colo_node_agent.cgroups.stats` (via :class:`ParentFS`);
OOM kills and peak memory here. Memory "used" is anon + unevictable, without page cache (REFERENCE.md §2).
Every reader returns None (or {}) when the file is missing or unreadable (a pod that just ended, a kernel
without the file) instead of raising.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from colo_node_agent.cgroups import stats
from colo_node_agent.cgroups.fs import HostFS
from colo_node_agent.cgroups.layout import QOS_DIRS
from colo_node_agent.cgroups.resources import CgroupVersion, read_value

V1_CONTROLLERS: tuple[str, ...] = ("cpu", "cpuacct", "cpuset", "memory", "blkio", "net_prio", "unified")
"""v1 hierarchies the agent makes its groups in (those mounted); cpu, cpuacct, cpuset and memory are required.
``net_prio`` carries the network QoS classes (:mod:`.host_net`). ``unified`` is the cgroup2 mount of a hybrid
host: no controllers, but per-group PSI files."""
V1_REQUIRED: tuple[str, ...] = ("cpu", "cpuacct", "cpuset", "memory")
V2_CONTROLLERS: tuple[str, ...] = ("cpu", "cpuset", "memory", "io")
"""v2 controllers enabled in ``cgroup.subtree_control`` down to the pod groups (those the parent offers)."""
V2_REQUIRED: tuple[str, ...] = ("cpu", "memory")
PSI_RESOURCES: tuple[stats.PSIResource, ...] = ("cpu", "memory", "io")
_MEMORY_USED_V1 = ("total_active_anon", "total_inactive_anon", "total_unevictable")
_MEMORY_USED_V2 = ("active_anon", "inactive_anon", "unevictable")


def read_keyed(path: Path) -> dict[str, int]:
    """A ``key value`` per line file (``memory.oom_control``, ``memory.events``) as a dict; {} on error."""
    try:
        return stats.parse_flat_keyed(path.read_text())
    except (OSError, ValueError):
        return {}


def psi_avg10(psi: stats.PSI, resource: str) -> dict[str, float]:
    """``{"<resource>.some": avg10, "<resource>.full": avg10}`` (percent of wall time over 10 s)."""
    return {f"{resource}.some": psi.some.avg10, f"{resource}.full": psi.full.avg10}


def v1_mounted(root: Path) -> list[str]:
    """v1 controllers of :data:`V1_CONTROLLERS` mounted under ``root``, one name per hierarchy (``cpu`` and
    ``cpuacct`` co-mounted as ``cpu,cpuacct`` appear once)."""
    seen: set[str] = set()
    out: list[str] = []
    for name in V1_CONTROLLERS:
        path = root / name
        if not (path / "cgroup.procs").exists():
            continue
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        out.append(name)
    return out


class ParentFS(HostFS):
    """:class:`HostFS` whose logical paths sit under ``parent``: ``cpu/kubepods/x`` →
    ``cpu/<parent>/kubepods/x`` (v1: after the controller) or ``kubepods/x`` → ``<parent>/kubepods/x`` (v2)."""

    def __init__(self, root: str | Path, parent: str, version: CgroupVersion) -> None:
        super().__init__(root)
        self._root = str(self.root)
        self.parent = parent.strip("/")
        self.version: CgroupVersion = version

    def _map(self, path: str) -> str:
        if self.version == "v2":
            return f"{self.parent}/{path}"
        sub, _, rest = path.partition("/")
        return f"{sub}/{self.parent}/{rest}"

    def read(self, path: str) -> str:
        """Content of the mapped file. Raises OSError.

        Plain ``os.open``/``os.read`` on a string path: the agent reads a few files per pod every loop, and
        this costs a third of a ``pathlib`` read.
        """
        fd = os.open(f"{self._root}/{self._map(path)}", os.O_RDONLY)
        try:
            chunks = [os.read(fd, 65536)]
            while len(chunks[-1]) == 65536:
                chunks.append(os.read(fd, 65536))
        finally:
            os.close(fd)
        return b"".join(chunks).decode()

    def write(self, path: str, text: str) -> None:
        """Write the existing mapped file (never creates it). Raises OSError."""
        super().write(self._map(path), text)

    def exists(self, path: str) -> bool:
        """Whether the mapped path exists."""
        return super().exists(self._map(path))


class CgroupTree:
    """The agent's part of the cgroup tree at ``root`` (``/sys/fs/cgroup``) under ``parent``, hierarchy
    ``version``. ``cgroup`` arguments are logical dirs relative to the parent ("" = the parent itself)."""

    def __init__(self, root: str | Path, parent: str, version: CgroupVersion) -> None:
        self.root = Path(root)
        self.parent = parent.strip("/")
        self.version: CgroupVersion = version
        self.controllers: list[str] = v1_mounted(self.root) if version == "v1" else [""]
        self.fs = ParentFS(self.root, self.parent, version)

    # ------------------------------------------------------------------ paths

    def path(self, controller: str, cgroup: str = "") -> Path:
        """Directory of logical ``cgroup`` in ``controller`` (ignored on v2)."""
        parts = [self.parent, cgroup.strip("/")]
        rel = "/".join(p for p in parts if p)
        return self.root / rel if self.version == "v2" else self.root / controller / rel

    def dirs(self, cgroup: str) -> list[Path]:
        """Every directory of ``cgroup``: one per mounted v1 hierarchy, or the one v2 directory."""
        return [self.path(c, cgroup) for c in self.controllers]

    def procs_files(self, cgroup: str) -> list[str]:
        """The ``cgroup.procs`` files a process writes its pid into to join ``cgroup`` everywhere."""
        return [str(d / "cgroup.procs") for d in self.dirs(cgroup)]

    def kernel_path(self, cgroup: str) -> str:
        """``cgroup`` as the kernel shows it in ``/proc/<pid>/cgroup`` (``/<parent>/<cgroup>``)."""
        return "/" + "/".join(p for p in (self.parent, cgroup.strip("/")) if p)

    # ------------------------------------------------------------------ directories

    def _mkdir(self, path: Path) -> bool:
        """Make one cgroup directory; True when it was created (fake trees in tests override this to add the
        files the kernel would create). Raises OSError."""
        try:
            path.mkdir()
        except FileExistsError:
            return False
        return True

    def ensure(self, cgroup: str) -> None:
        """Make ``cgroup`` and its missing ancestors up to the root in every hierarchy, parent first.

        A new v1 cpuset group gets its parent's ``cpuset.cpus``/``cpuset.mems`` (the kernel leaves them empty
        and refuses tasks until set); on v2 the parent's ``cgroup.subtree_control`` enables :data:`V2_CONTROLLERS`
        it offers. Raises OSError (EACCES, EROFS ...) naming the directory.
        """
        parts = [p for p in f"{self.parent}/{cgroup.strip('/')}".split("/") if p]
        for controller in self.controllers:
            base = self.root if self.version == "v2" else self.root / controller
            for i in range(1, len(parts) + 1):
                path = base.joinpath(*parts[:i])
                if self.version == "v2":
                    self._enable_controllers(path.parent)
                if self._mkdir(path) and controller == "cpuset":
                    for name in ("cpuset.cpus", "cpuset.mems"):
                        text = (path.parent / name).read_text().strip()
                        HostFS(path).write(name, text)

    def _enable_controllers(self, path: Path) -> None:
        """Enable the v2 controllers ``path`` offers for its children (each on its own: one refusal does not
        block the others). Raises OSError only when ``cgroup.controllers`` cannot be read."""
        offered = (path / "cgroup.controllers").read_text().split()
        try:
            enabled = (path / "cgroup.subtree_control").read_text().split()
        except OSError:
            enabled = []
        wanted = [c for c in V2_CONTROLLERS if c in offered and c not in enabled]
        if not wanted:
            return
        try:  # the kernel applies a list all-or-nothing; one at a time when one is refused
            HostFS(path).write("cgroup.subtree_control", " ".join(f"+{c}" for c in wanted))
            return
        except OSError:
            pass
        for c in wanted:
            try:
                HostFS(path).write("cgroup.subtree_control", f"+{c}")
            except OSError:
                continue

    def remove(self, cgroup: str) -> bool:
        """rmdir ``cgroup`` in every hierarchy (missing ones are fine); False when one still holds processes
        or children (EBUSY/ENOTEMPTY)."""
        done = True
        for d in self.dirs(cgroup):
            try:
                d.rmdir()
            except FileNotFoundError:
                continue
            except OSError as exc:
                if exc.errno in (errno.EBUSY, errno.ENOTEMPTY):
                    done = False
                    continue
                raise
        return done

    def pod_groups(self) -> dict[str, str]:
        """Pod groups under the QoS-class groups: uid → logical dir (``kubepods/besteffort/pod<uid>``)."""
        out: dict[str, str] = {}
        for qos_dir in QOS_DIRS:
            for controller in self.controllers:
                base = self.path(controller, qos_dir)
                try:
                    names = [e.name for e in os.scandir(base) if e.is_dir() and e.name.startswith("pod")]
                except OSError:
                    continue
                for name in names:
                    out.setdefault(name[3:], f"{qos_dir}/{name}")
        return out

    # ------------------------------------------------------------------ processes

    def procs(self, cgroup: str) -> list[int]:
        """Pids in ``cgroup`` (the first hierarchy's ``cgroup.procs``; [] when missing). Read with
        :meth:`ParentFS.read` (plain ``os.read``): OOM priority reads every pod's list every loop."""
        if not self.controllers:
            return []
        sub = self.controllers[0] if self.version == "v1" else ""
        try:
            text = self.fs.read("/".join(p for p in (sub, cgroup.strip("/"), "cgroup.procs") if p))
        except OSError:
            return []
        return [int(w) for w in text.split() if w.isdigit()]

    def threads(self, cgroup: str) -> list[int]:
        """Thread ids in ``cgroup`` itself (v1: the first hierarchy's ``tasks``, v2: ``cgroup.threads``; []
        when missing). Read with plain ``os.read``: the interference sampler reads it per LS pod every loop."""
        if not self.controllers:
            return []
        rel = "/".join(p for p in (self.parent, cgroup.strip("/")) if p)
        if self.version == "v1":
            path = f"{self.root}/{self.controllers[0]}/{rel}/tasks"
        else:
            path = f"{self.root}/{rel}/cgroup.threads"
        try:  # strings, not pathlib: a third of the cost
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return []
        try:
            chunks = [os.read(fd, 65536)]
            while chunks[-1]:
                chunks.append(os.read(fd, 65536))
        except OSError:
            return []
        finally:
            os.close(fd)
        return [int(w) for w in b"".join(chunks).split() if w.isdigit()]

    def member(self, pid: int, cgroup: str) -> bool:
        """Whether the kernel says process ``pid`` is in ``cgroup`` (``/proc/<pid>/cgroup``): pids listed in a
        tree are only signalled when this holds, so a stale or fake tree never leads to killing a stranger."""
        want = self.kernel_path(cgroup)
        try:
            lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        except OSError:
            return False
        first = self.controllers[0] if self.controllers else ""
        for line in lines:
            _, ctls, path = line.split(":", 2)
            if path != want:
                continue
            if self.version == "v2" and ctls == "":
                return True
            if self.version == "v1" and first in ctls.split(","):
                return True
        return False

    def all_groups(self) -> list[str]:
        """Every logical group under the parent, deepest first (for a purge)."""
        out: set[str] = set()
        for controller in self.controllers:
            base = self.path(controller)
            for dirpath, _, _ in os.walk(base):
                rel = os.path.relpath(dirpath, base)
                out.add("" if rel == "." else rel)
        return sorted(out, key=lambda p: (-p.count("/") - (1 if p else 0), p))

    # ------------------------------------------------------------------ statistics (None: unreadable)

    def cpu_usage_ns(self, cgroup: str) -> int | None:
        """Cumulative CPU time of ``cgroup`` in nanoseconds."""
        try:
            return stats.cpu_usage_ns(self.fs, self.version, cgroup)
        except (OSError, ValueError, KeyError):
            return None

    def memory_used(self, cgroup: str) -> int | None:
        """Memory used by ``cgroup`` in bytes: anon + unevictable, without page cache (REFERENCE.md §2; the
        keys of :func:`~colo_node_agent.cgroups.stats.memory_working_set_bytes`)."""
        try:
            sub = "memory" if self.version == "v1" else ""
            words = self.fs.read("/".join(p for p in (sub, cgroup.strip("/"), "memory.stat") if p)).split()
            kv = dict(zip(words[::2], words[1::2]))  # only three of ~70 values are needed: no int() for all
            keys = _MEMORY_USED_V1 if self.version == "v1" else _MEMORY_USED_V2
            return sum(int(kv.get(k, 0)) for k in keys)
        except (OSError, ValueError):
            return None

    def throttling(self, cgroup: str) -> stats.CPUStat | None:
        """CFS throttling counters of ``cgroup``."""
        try:
            return stats.cpu_stat(self.fs, self.version, cgroup)
        except (OSError, ValueError):
            return None

    def oom_kills(self, cgroup: str) -> int | None:
        """Processes of ``cgroup`` the kernel OOM-killed (its own limit or the whole machine's)."""
        name = "memory.oom_control" if self.version == "v1" else "memory.events"
        return read_keyed(self.path("memory", cgroup) / name).get("oom_kill")

    def memory_peak(self, cgroup: str) -> int | None:
        """Highest memory charge of ``cgroup`` in bytes (page cache included)."""
        name = "memory.max_usage_in_bytes" if self.version == "v1" else "memory.peak"
        try:
            return int((self.path("memory", cgroup) / name).read_text().strip())
        except (OSError, ValueError):
            return None

    def _value(self, cgroup: str, name: str) -> int | None:
        try:
            value = read_value(self.fs, self.version, cgroup, name)
        except (OSError, ValueError, KeyError):
            return None
        return value if isinstance(value, int) else None

    def memory_limit(self, cgroup: str) -> int | None:
        """Memory limit of ``cgroup`` in bytes, −1 when unlimited."""
        return self._value(cgroup, "memory.limit_in_bytes")

    def cpu_limit_milli(self, cgroup: str = "") -> int | None:
        """The CFS quota of ``cgroup`` in milli-cores (quota × 1000 / period), None when unlimited."""
        quota, period = self._value(cgroup, "cpu.cfs_quota_us"), self._value(cgroup, "cpu.cfs_period_us")
        if quota is None or period is None or quota <= 0 or period <= 0:
            return None
        return quota * 1000 // period

    def cpus(self, cgroup: str = "") -> tuple[int, ...] | None:
        """CPUs ``cgroup`` may really run on (its effective cpuset)."""
        try:
            return stats.cpuset_effective(self.fs, self.version, cgroup)
        except (OSError, ValueError):
            return None

    def pressure(self, cgroup: str) -> dict[str, float]:
        """PSI avg10 of ``cgroup`` keyed ``cpu.some``, ``memory.full`` ... ({} where the kernel has none;
        v1 reads the hybrid ``unified`` mount)."""
        out: dict[str, float] = {}
        for res in PSI_RESOURCES:
            try:
                out.update(psi_avg10(stats.psi(self.fs, self.version, cgroup, res), res))
            except (OSError, ValueError):
                continue
        return out
