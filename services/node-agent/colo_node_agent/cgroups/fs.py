"""The filesystem seam under the cgroup layer: the host's cgroupfs or an in-memory tree.

Paths are relative to the root (``cpu/kubepods/cpu.shares`` on v1, ``kubepods/cpu.max`` on v2). Both
implementations behave like cgroupfs where it matters to the executor: writing a file that does not exist
raises ``ENOENT`` (cgroup files are never created by writing), errors are :class:`OSError` with an errno.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Protocol

from colo_node_agent.cgroups.resources import (
    DEFAULT_PERIOD_US,
    RESOURCES,
    CgroupVersion,
    cpuset_format,
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
    """A cgroup tree on disk rooted at ``root`` (``/sys/fs/cgroup`` in production, a temp dir in tests)."""

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


class MemoryFS:
    """An in-memory cgroup tree (the ``sim`` backend's cgroupfs): a dict of file path → content.

    ``faults`` maps a path to an errno raised on write, for tests of error reporting.
    """

    def __init__(self, faults: dict[str, int] | None = None) -> None:
        self.files: dict[str, str] = {}
        self.faults: dict[str, int] = dict(faults or {})
        self.writes = 0

    def seed(self, path: str, text: str) -> None:
        """Create or replace file ``path`` (what the kernel does when a cgroup directory is made)."""
        self.files[path] = text

    def remove_prefix(self, prefix: str) -> None:
        """Delete every file under directory ``prefix`` (rmdir of a cgroup)."""
        doomed = [p for p in self.files if p.startswith(prefix.rstrip("/") + "/")]
        for p in doomed:
            del self.files[p]

    def read(self, path: str) -> str:
        """Content of ``path``. Raises OSError(ENOENT)."""
        try:
            return self.files[path]
        except KeyError:
            raise _oserror(errno.ENOENT, path) from None

    def write(self, path: str, text: str) -> None:
        """Replace the content of existing file ``path``. Raises OSError(ENOENT or an injected fault)."""
        if path in self.faults:
            raise _oserror(self.faults[path], path)
        if path not in self.files:
            raise _oserror(errno.ENOENT, path)
        self.files[path] = text
        self.writes += 1

    def exists(self, path: str) -> bool:
        """Whether a file ``path`` or a directory containing files exists."""
        return path in self.files or any(p.startswith(path.rstrip("/") + "/") for p in self.files)


def detect_version(fs: CgroupFS) -> CgroupVersion:
    """``v2`` when the root holds ``cgroup.controllers`` (unified hierarchy), else ``v1``."""
    return "v2" if fs.exists("cgroup.controllers") else "v1"


def default_files(version: CgroupVersion, cgroup: str, cpus: int) -> dict[str, str]:
    """The files a freshly made cgroup has (path → content): shares 1024, no quota, all ``cpus``, no limit.

    Used to seed :class:`MemoryFS` trees and temp-dir trees in tests, mirroring what the kernel creates.
    """
    all_cpus = cpuset_format(list(range(cpus))) if cpus > 0 else ""
    out: dict[str, str] = {}
    if version == "v1":
        v1 = {
            "cpu.shares": "1024", "cpu.cfs_quota_us": "-1", "cpu.cfs_period_us": str(DEFAULT_PERIOD_US),
            "cpu.cfs_burst_us": "0", "cpu.idle": "0", "cpuset.cpus": all_cpus,
            "memory.limit_in_bytes": "9223372036854771712", "memory.min": "0", "memory.low": "0",
            "memory.high": "9223372036854771712",
        }
        for name, text in v1.items():
            out[file_path(RESOURCES[name], cgroup, "v1")] = text
        return out
    v2 = {
        "cpu.shares": "100", "cpu.cfs_quota_us": f"max {DEFAULT_PERIOD_US}", "cpu.cfs_burst_us": "0",
        "cpu.idle": "0", "cpuset.cpus": all_cpus, "memory.limit_in_bytes": "max", "memory.min": "0",
        "memory.low": "0", "memory.high": "max",
    }
    for name, text in v2.items():
        out[file_path(RESOURCES[name], cgroup, "v2")] = text
    return out


def cgroup_prefixes(version: CgroupVersion, cgroup: str) -> list[str]:
    """The directories holding ``cgroup``'s files: one per v1 subsystem, or the one unified v2 directory."""
    cg = cgroup.strip("/")
    if version == "v2":
        return [cg]
    return [f"{sub}/{cg}" for sub in sorted({r.subsystem for r in RESOURCES.values()})]
