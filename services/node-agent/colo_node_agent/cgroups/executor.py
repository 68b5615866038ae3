"""The one executor that applies cgroup plans (DESIGN.md §6, REFERENCE.md §11).

It caches the last value it wrote or read per file and skips unchanged values (not audited); orders writes of hierarchical
resources (grow: parent before child; shrink: child before parent); never writes an empty cpuset (the kernel
answers "no space left on device" and the group would be left without CPUs); validates values as the kernel
would (EINVAL); and reports every filesystem error (EINVAL, EACCES, ENOENT ...) in a :class:`WriteRecord`
instead of raising. Every outcome is appended to a bounded audit log.
"""

from __future__ import annotations

import errno as errno_mod
from collections import deque
from dataclasses import dataclass

from colo_node_agent.cgroups.fs import CgroupFS
from colo_node_agent.cgroups.resources import (
    RESOURCES,
    CgroupVersion,
    Resource,
    Value,
    cpuset_parse,
    normalize,
    read_value,
    render,
    validate,
)


@dataclass(frozen=True)
class CgroupWrite:
    """One planned write: logical ``resource`` of ``cgroup`` (relative dir) := ``value`` (v1-style)."""

    cgroup: str
    resource: str
    value: Value
    reason: str = ""


@dataclass(frozen=True)
class WriteRecord:
    """The audit record of one planned write.

    ``ok`` the value is in place (written, or already there when ``skipped``); ``error`` an errno name
    (``EINVAL``, ``EACCES``, ``ENOENT`` ...) or ``""``; ``old``/``new`` logical values (``old`` None when
    unknown); ``at`` clock seconds.
    """

    cgroup: str
    resource: str
    path: str
    old: Value | None
    new: Value
    ok: bool
    skipped: bool = False
    error: str = ""
    message: str = ""
    reason: str = ""
    at: float = 0.0


def _errno_name(exc: OSError) -> str:
    return errno_mod.errorcode.get(exc.errno or 0, "EIO")


def _grows(res: Resource, old: Value | None, new: Value) -> bool:
    """Whether ``new`` gives the group at least as much as ``old`` (cpusets: superset; -1 = unlimited)."""
    if old is None:
        return True
    if res.kind == "cpuset":
        return set(cpuset_parse(str(new))) >= set(cpuset_parse(str(old)))
    inf = float("inf")
    o = inf if res.unlimited_ok and int(old) < 0 else int(old)
    n = inf if res.unlimited_ok and int(new) < 0 else int(new)
    return n >= o


class Executor:
    """Applies :class:`CgroupWrite` plans to one cgroup tree (``fs``, hierarchy ``version``)."""

    def __init__(self, fs: CgroupFS, version: CgroupVersion, audit_size: int = 256) -> None:
        self.fs = fs
        self.version: CgroupVersion = version
        self._cache: dict[str, dict[str, Value]] = {}
        self.audit: deque[WriteRecord] = deque(maxlen=audit_size)
        self.written = 0
        self.failed = 0

    def read(self, cgroup: str, resource: str) -> Value | None:
        """Current logical value (cached, else read from the tree); None when it cannot be read."""
        cached = self._cache.get(cgroup)
        if cached is not None and resource in cached:
            return cached[resource]
        try:
            value = read_value(self.fs, self.version, cgroup, resource)
        except (OSError, ValueError, KeyError):
            return None
        self._cache.setdefault(cgroup, {})[resource] = value
        return value

    def forget(self, cgroup: str) -> None:
        """Drop cached values of ``cgroup`` and its children (after the group was removed or recreated)."""
        prefix = cgroup.rstrip("/") + "/"
        for key in [k for k in self._cache if k == cgroup or k.startswith(prefix)]:
            del self._cache[key]

    def apply(self, writes: list[CgroupWrite], at: float = 0.0) -> list[WriteRecord]:
        """Apply ``writes``; returns one record per distinct (cgroup, resource), in execution order.

        Later writes of the same (cgroup, resource) replace earlier ones in the plan. Never raises for bad
        values or filesystem errors: those come back as records with ``ok=False``.
        """
        last: dict[tuple[str, str], CgroupWrite] = {}
        for w in writes:
            last[(w.cgroup, w.resource)] = w
        records: list[WriteRecord] = []
        grow: list[tuple[int, CgroupWrite, Value | None, Value]] = []
        shrink: list[tuple[int, CgroupWrite, Value | None, Value]] = []
        for w in last.values():
            rec, plan = self._prepare(w, at)
            if rec is not None:
                records.append(rec)
                continue
            assert plan is not None
            old, new = plan
            depth = len([p for p in w.cgroup.split("/") if p])
            target = grow if _grows(RESOURCES[w.resource], old, new) else shrink
            target.append((depth, w, old, new))
        grow.sort(key=lambda t: t[0])
        shrink.sort(key=lambda t: -t[0])
        for _, w, old, new in grow + shrink:
            records.append(self._write(w, old, new, at))
        self.audit.extend(r for r in records if not (r.ok and r.skipped))
        return records

    def _prepare(self, w: CgroupWrite, at: float) -> tuple[WriteRecord | None, tuple[Value | None, Value] | None]:
        """Validate ``w`` and compare with the current value: a final record, or (old, new) to write."""
        cached = self._cache.get(w.cgroup, {}).get(w.resource)
        if cached is not None and cached == w.value and type(cached) is type(w.value):
            # fast path: strategies re-plan the same canonical value every round
            return WriteRecord(w.cgroup, w.resource, "", cached, cached, ok=True, skipped=True,
                               message="unchanged", reason=w.reason, at=at), None
        res = RESOURCES.get(w.resource)
        if res is None:
            return WriteRecord(w.cgroup, w.resource, "", None, w.value, ok=False, error="EINVAL",
                               message=f"unknown cgroup resource {w.resource!r}", reason=w.reason, at=at), None
        problem = validate(res, w.value)
        if problem is not None:
            return WriteRecord(w.cgroup, w.resource, "", None, w.value, ok=False, error="EINVAL",
                               message=problem, reason=w.reason, at=at), None
        new = normalize(res, w.value)
        if res.kind == "cpuset" and new == "":
            return WriteRecord(w.cgroup, w.resource, "", self.read(w.cgroup, w.resource), new, ok=False,
                               skipped=True, message="refused: empty cpuset", reason=w.reason, at=at), None
        old = self.read(w.cgroup, w.resource)
        if old is not None and old == new:
            return WriteRecord(w.cgroup, w.resource, "", old, new, ok=True, skipped=True,
                               message="unchanged", reason=w.reason, at=at), None
        return None, (old, new)

    def _write(self, w: CgroupWrite, old: Value | None, new: Value, at: float) -> WriteRecord:
        path = ""
        try:
            path, text = render(self.fs, self.version, w.cgroup, w.resource, new)
            self.fs.write(path, text)
        except OSError as exc:
            self._cache.get(w.cgroup, {}).pop(w.resource, None)
            self.failed += 1
            return WriteRecord(w.cgroup, w.resource, path or str(exc.filename or ""), old, new, ok=False,
                               error=_errno_name(exc), message=exc.strerror or str(exc), reason=w.reason,
                               at=at)
        self._cache.setdefault(w.cgroup, {})[w.resource] = new
        self.written += 1
        return WriteRecord(w.cgroup, w.resource, path, old, new, ok=True, reason=w.reason, at=at)
