"""The filesystem seam under the cgroup layer: the host's cgroupfs (or resctrl, procfs) or an in-memory tree.

Paths are relative to the root (``cpu/kubepods/cpu.shares`` on v1, ``kubepods/cpu.max`` on v2). Both
implementations behave like the kernel's pseudo-filesystems where it matters to the executor: writing a file
that does not exist raises ``ENOENT`` (control files are never created by writing), errors are :class:`OSError`
with an errno. :class:`MemoryFS` also keeps the kernel's per-key file semantics (a blkio rule per device, an
``io.max`` line per device, a schemata line per resource, tasks appended) and, with ``kernel_rules``, refuses
what the kernel refuses (v1 cpuset hierarchy, CFS burst above the quota) so that tests see real errors.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Protocol

from colo_node_agent.cgroups.resources import (
    CGROUP_SUBSYSTEMS,
    DEFAULT_PERIOD_US,
    RESOURCES,
    CgroupVersion,
    cpuset_format,
    cpuset_parse,
    file_path,
)


class CgroupFS(Protocol):
    """Read/write access to a cgroup tree rooted somewhere; every method raises OSError."""

    def read(self, path: str) -> str:
        """Content of the file at ``path`` (relative to the root)."""
        ...

    def write(self, path: str, text: str) -> None:
        """Replace the content of the existing file at ``path``; ENOENT when it does not exist."""
        ...

    def exists(self, path: str) -> bool:
        """Whether ``path`` (file or directory) exists."""
        ...


def _oserror(code: int, path: str) -> OSError:
    return OSError(code, os.strerror(code), path)


class HostFS:
    """A tree on disk rooted at ``root`` (``/sys/fs/cgroup``, ``/sys/fs/resctrl`` or ``/proc/sys`` in
    production, a temp dir in tests)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def read(self, path: str) -> str:
        """Content of ``root/path``. Raises OSError (ENOENT, EACCES ...)."""
        return (self.root / path).read_text()

    def write(self, path: str, text: str) -> None:
        """Write ``text`` to the existing file ``root/path`` (never creates it). Raises OSError."""
        fd = os.open(self.root / path, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)

    def exists(self, path: str) -> bool:
        """Whether ``root/path`` exists."""
        return (self.root / path).exists()

    def mkdir(self, path: str) -> bool:
        """Create directory ``root/path`` (parents must exist, as with cgroupfs); False when it already existed.
        Raises OSError."""
        try:
            os.mkdir(self.root / path)
        except FileExistsError:
            return False
        return True

    def rmdir(self, path: str) -> None:
        """Remove directory ``root/path`` (a cgroup or resctrl group). Raises OSError (EBUSY while in use)."""
        os.rmdir(self.root / path)

    def listdir(self, path: str = "") -> list[str]:
        """Names in directory ``root/path``, sorted. Raises OSError."""
        return sorted(os.listdir(self.root / path))


def _merge_keyed(path: str, old: str, text: str) -> str:
    """What a kernel keyed file holds after ``text`` is written: one line per device/prefix, tasks appended."""
    name = path.rsplit("/", 1)[-1]
    if name == "tasks":
        return old + text.strip() + "\n"
    lines = [ln for ln in old.splitlines() if ln.strip()]
    if name == "schemata":  # each resource keeps its line and place
        for new in (ln.strip() for ln in text.splitlines() if ln.strip()):
            prefix = new.split(":", 1)[0]
            at = [i for i, ln in enumerate(lines) if ln.strip().split(":", 1)[0] == prefix]
            if at:
                lines[at[0]] = new
            else:
                lines.append(new)
        return "\n".join(lines) + "\n"
    parts = text.split()
    dev = parts[0]
    rest = [ln for ln in lines if ln.split()[0] != dev]
    if name == "io.max":
        cur = next((ln.split()[1:] for ln in lines if ln.split()[0] == dev), [])
        kv = {k: v for k, _, v in (p.partition("=") for p in ["rbps=max", "wbps=max", "riops=max", "wiops=max"])}
        kv.update({k: v for k, _, v in (p.partition("=") for p in cur)})
        kv.update({k: v for k, _, v in (p.partition("=") for p in parts[1:])})
        if any(v != "max" for v in kv.values()):
            rest.append(f"{dev} " + " ".join(f"{k}={v}" for k, v in kv.items()))
    elif int(parts[1]) > 0:  # v1 blkio throttle: "dev 0" removes the rule
        rest.append(f"{dev} {parts[1]}")
    return "".join(ln + "\n" for ln in rest)


KEYED_FILES = frozenset({"tasks", "schemata", "io.max", "blkio.throttle.read_bps_device",
                         "blkio.throttle.write_bps_device", "blkio.throttle.read_iops_device",
                         "blkio.throttle.write_iops_device"})
"""Files whose writes add or replace one entry instead of the whole content (the kernel's semantics)."""


class MemoryFS:
    """An in-memory tree (the ``sim`` backend's cgroupfs, and the fake trees of tests): file path → content.

    ``faults`` maps a path to an errno raised on write, for tests of error reporting. ``kernel_rules`` (the
    hierarchy version) makes writes fail as the kernel's do: on v1 a child cpuset outside its parent's (EACCES)
    and a parent cpuset dropping CPUs a child uses (EBUSY); on both a CFS burst above a finite quota, or a quota
    below the burst, and a weight (cpu.shares / cpu.weight) on a group with cpu.idle = 1 (EINVAL); and on v1 a
    cpu.idle write resets cpu.shares (3 when idle, 1024 when cleared) — checked on this machine's kernel (6.18).
    """

    def __init__(self, faults: dict[str, int] | None = None, kernel_rules: CgroupVersion | None = None,
                 dir_template: dict[str, str] | None = None) -> None:
        self.files: dict[str, str] = {}
        self.dirs: set[str] = set()
        self.dir_template: dict[str, str] = dict(dir_template or {})
        """Files (name → content) :meth:`mkdir` creates in a new directory, as the kernel does (resctrl groups get
        ``schemata`` and ``tasks``)."""
        self.faults: dict[str, int] = dict(faults or {})
        self.kernel_rules = kernel_rules
        self.writes = 0
        self.log: list[tuple[str, str]] = []
        """Every successful write (path, text), in order, when ``kernel_rules`` is set (for ordering tests)."""

    def seed(self, path: str, text: str) -> None:
        """Create or replace file ``path`` (what the kernel does when a cgroup directory is made)."""
        self.files[path] = text

    def remove_prefix(self, prefix: str) -> None:
        """Delete every file under directory ``prefix`` (rmdir of a cgroup)."""
        head = prefix.rstrip("/") + "/"
        for p in [p for p in self.files if p.startswith(head)]:
            del self.files[p]
        self.dirs = {d for d in self.dirs if d != prefix.rstrip("/") and not d.startswith(head)}

    def read(self, path: str) -> str:
        """Content of ``path``. Raises OSError(ENOENT)."""
        try:
            return self.files[path]
        except KeyError:
            raise _oserror(errno.ENOENT, path) from None

    def write(self, path: str, text: str) -> None:
        """Write ``text`` to existing file ``path``. Raises OSError(ENOENT, an injected fault or a kernel rule)."""
        if path in self.faults:
            raise _oserror(self.faults[path], path)
        if path not in self.files:
            raise _oserror(errno.ENOENT, path)
        if self.kernel_rules is not None:
            code = self._kernel_refuses(path, text)
            if code:
                raise _oserror(code, path)
            self.log.append((path, text))
        name = path.rsplit("/", 1)[-1]
        self.files[path] = _merge_keyed(path, self.files[path], text) if name in KEYED_FILES else text
        self.writes += 1
        if self.kernel_rules == "v1" and name == "cpu.idle" and f"{path[:-9]}/cpu.shares" in self.files:
            # seen on 6.18: idle=1 shows the minimum weight (3 shares), idle=0 restores the default 1024
            self.files[f"{path[:-9]}/cpu.shares"] = "3" if text.strip() == "1" else "1024"

    def exists(self, path: str) -> bool:
        """Whether a file ``path`` or a directory (made, or containing files) exists."""
        p = path.rstrip("/")
        return p in self.files or p in self.dirs or any(f.startswith(p + "/") for f in self.files)

    def mkdir(self, path: str) -> bool:
        """Make directory ``path``; False when it already existed."""
        if self.exists(path):
            return False
        d = path.rstrip("/")
        self.dirs.add(d)
        for name, text in self.dir_template.items():
            self.files[f"{d}/{name}"] = text
        return True

    def listdir(self, path: str = "") -> list[str]:
        """Names directly under ``path``."""
        head = path.rstrip("/") + "/" if path else ""
        names = {p[len(head):].split("/", 1)[0] for p in list(self.files) + list(self.dirs) if p.startswith(head)}
        return sorted(n for n in names if n)

    # ------------------------------------------------------------------ kernel rules

    def _kernel_refuses(self, path: str, text: str) -> int:
        d, _, name = path.rpartition("/")
        if name == "cpuset.cpus" and self.kernel_rules == "v1":
            return self._cpuset_refuses(d, set(cpuset_parse(text)))
        v1 = self.kernel_rules == "v1"
        if name == ("cpu.shares" if v1 else "cpu.weight") and self.files.get(f"{d}/cpu.idle", "0").strip() == "1":
            return errno.EINVAL  # an idle group's weight is fixed
        quota_file, burst_file = ("cpu.cfs_quota_us", "cpu.cfs_burst_us") if v1 else ("cpu.max", "cpu.max.burst")
        if name not in (quota_file, burst_file) or f"{d}/{quota_file}" not in self.files:
            return 0
        quota_text = text if name == quota_file else self.files[f"{d}/{quota_file}"]
        burst_text = text if name == burst_file else self.files.get(f"{d}/{burst_file}", "0")
        q = quota_text.split()[0] if quota_text.split() else "max"
        quota = -1 if q == "max" else int(q)
        return errno.EINVAL if 0 <= quota < int(burst_text.strip() or 0) else 0

    def _cpuset_refuses(self, d: str, cpus: set[int]) -> int:
        parent = d.rpartition("/")[0]
        ptext = self.files.get(f"{parent}/cpuset.cpus")
        if ptext is not None and not cpus <= set(cpuset_parse(ptext)):
            return errno.EACCES
        head = d + "/"
        for p, t in self.files.items():
            if p.startswith(head) and p.endswith("/cpuset.cpus") and p[len(head):].count("/") == 1:
                if not set(cpuset_parse(t)) <= cpus:
                    return errno.EBUSY
        return 0


def detect_version(fs: CgroupFS) -> CgroupVersion:
    """``v2`` when the root holds ``cgroup.controllers`` (unified hierarchy), else ``v1``.

    A hybrid host (v1 controllers with an empty ``unified`` mount, like this machine) is ``v1``.
    """
    return "v2" if fs.exists("cgroup.controllers") else "v1"


def default_files(version: CgroupVersion, cgroup: str, cpus: int, *, stats: bool = False,
                  mems: str = "0") -> dict[str, str]:
    """The files a freshly made cgroup has (path → content): shares 1024, no quota, all ``cpus``, memory node
    ``mems``, no limits, no I/O throttles; with ``stats`` also zeroed statistics files (usage, cpu.stat,
    memory.stat, PSI).

    Used to seed :class:`MemoryFS` trees and temp-dir trees in tests, mirroring what the kernel creates.
    """
    all_cpus = cpuset_format(list(range(cpus))) if cpus > 0 else ""
    out: dict[str, str] = {}
    if version == "v1":
        v1 = {
            "cpu.shares": "1024", "cpu.cfs_quota_us": "-1", "cpu.cfs_period_us": str(DEFAULT_PERIOD_US),
            "cpu.cfs_burst_us": "0", "cpu.idle": "0", "cpuset.cpus": all_cpus, "cpuset.mems": mems,
            "memory.limit_in_bytes": "9223372036854771712", "memory.min": "0", "memory.low": "0",
            "memory.high": "9223372036854771712", "blkio.throttle.read_bps_device": "",
            "blkio.throttle.write_bps_device": "", "blkio.throttle.read_iops_device": "",
            "blkio.throttle.write_iops_device": "",
        }
        for name, text in v1.items():
            out[file_path(RESOURCES[name], cgroup, "v1")] = text
        if stats:
            cg = cgroup.strip("/")
            out.update({
                f"cpuacct/{cg}/cpuacct.usage": "0\n",
                f"cpu/{cg}/cpu.stat": "nr_periods 0\nnr_throttled 0\nthrottled_time 0\nnr_bursts 0\nburst_time 0\n",
                f"memory/{cg}/memory.usage_in_bytes": "0\n",
                f"memory/{cg}/memory.stat": "total_active_anon 0\ntotal_inactive_anon 0\ntotal_unevictable 0\n",
            })
        return out
    v2 = {
        "cpu.shares": "100", "cpu.cfs_quota_us": f"max {DEFAULT_PERIOD_US}", "cpu.cfs_burst_us": "0",
        "cpu.idle": "0", "cpuset.cpus": all_cpus, "cpuset.mems": mems, "memory.limit_in_bytes": "max",
        "memory.min": "0", "memory.low": "0", "memory.high": "max", "blkio.throttle.read_bps_device": "",
    }
    for name, text in v2.items():
        out[file_path(RESOURCES[name], cgroup, "v2")] = text
    if stats:
        cg = cgroup.strip("/")
        psi = "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
        out.update({
            f"{cg}/cpu.stat": "usage_usec 0\nuser_usec 0\nsystem_usec 0\nnr_periods 0\nnr_throttled 0\n"
                              "throttled_usec 0\nnr_bursts 0\nburst_usec 0\n",
            f"{cg}/memory.current": "0\n", f"{cg}/memory.stat": "anon 0\nactive_anon 0\ninactive_anon 0\n"
                                                                "unevictable 0\n",
            f"{cg}/cpu.pressure": psi, f"{cg}/memory.pressure": psi, f"{cg}/io.pressure": psi,
            f"{cg}/cpuset.cpus.effective": all_cpus,
        })
    return out


def cgroup_prefixes(version: CgroupVersion, cgroup: str) -> list[str]:
    """The directories holding ``cgroup``'s files: one per v1 subsystem, or the one unified v2 directory."""
    cg = cgroup.strip("/")
    if version == "v2":
        return [cg]
    return [f"{sub}/{cg}" for sub in (*CGROUP_SUBSYSTEMS, "cpuacct")]
