"""The one executor that applies cgroup plans (DESIGN.md §6, REFERENCE.md §5, §11).

It caches the last value it wrote or read per file and skips unchanged values (not audited); orders writes of
hierarchical resources (grow: parent before child; shrink: child before parent; a cpuset that neither grows nor
shrinks goes through the union of old and new, parent first, then to its target, child first; ``cpu.idle`` = 0
before ``cpu.shares`` and ``cpu.idle`` = 1 after it, since an idle group refuses a weight); keeps the CFS
burst at or below the quota (the kernel answers EINVAL otherwise: ``cpu.max.burst`` on v2 as REFERENCE.md §11
says, and ``cpu.cfs_burst_us`` on v1 too, checked on this machine's 6.18 kernel) by clamping a planned burst and
lowering a current burst before a quota drops under it; never writes an empty cpuset (the kernel answers "no
space left on device" and the group would be left without CPUs); validates values as the kernel would
(EINVAL); and reports every filesystem error (EINVAL, EACCES, ENOENT, EBUSY ...) in a :class:`WriteRecord`
instead of raising. Every outcome except "unchanged" is appended to a bounded audit log and passed to the
optional ``sink`` (the service turns records into ``QoSEvent(kind="cgroup")`` events or log lines).

Besides the cgroup tree (``fs``) an executor may hold the other trees its resources live in (``trees``:
``resctrl`` → ``/sys/fs/resctrl``, ``sysctl`` → ``/proc/sys``); a write to a tree it does not have is reported
as ENOENT.
"""

from __future__ import annotations

import errno as errno_mod
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace

from colo_node_agent.cgroups.fs import CgroupFS
from colo_node_agent.cgroups.resources import (
    RESOURCES,
    CgroupVersion,
    Resource,
    Value,
    cpuset_format,
    cpuset_parse,
    identity,
    key_of,
    normalize,
    parse_device_value,
    read_value,
    render,
    validate,
)

QUOTA, BURST = "cpu.cfs_quota_us", "cpu.cfs_burst_us"


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
    unknown); ``message`` what happened beyond the write (clamped, transitional union, refused ...); ``at``
    clock seconds.
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


@dataclass
class _Step:
    """One write to execute: the planned write, the values, and the notes that go into its record."""

    w: CgroupWrite
    old: Value | None
    new: Value
    message: str = ""


def _errno_name(exc: OSError) -> str:
    return errno_mod.errorcode.get(exc.errno or 0, "EIO")


def _as_int(res: Resource, v: Value | None) -> float:
    if v is None:
        return float("-inf")
    if res.kind == "device":
        n = parse_device_value(v)[1]
        return float("inf") if n < 0 else float(n)
    if res.kind != "int":
        return 0.0
    return float("inf") if res.unlimited_ok and int(v) < 0 else float(int(v))


def _grows(res: Resource, old: Value | None, new: Value) -> bool:
    """Whether ``new`` gives the group at least as much as ``old`` (cpusets: superset; -1 = unlimited)."""
    if old is None:
        return True
    if res.kind == "cpuset":
        return set(cpuset_parse(str(new))) >= set(cpuset_parse(str(old)))
    return _as_int(res, new) >= _as_int(res, old)


def _depth(cgroup: str) -> int:
    return len([p for p in cgroup.split("/") if p])


_GROW_RANK = {QUOTA: 0, BURST: 1}
_SHRINK_RANK = {BURST: 0, QUOTA: 1}


def _idle_before_shares(order: list[_Step]) -> list[_Step]:
    """Within one cgroup, ``cpu.idle`` = 0 goes before ``cpu.shares`` and ``cpu.idle`` = 1 after it: the kernel
    refuses a weight on an idle group (EINVAL, seen on this machine's 6.18 kernel)."""
    out = list(order)
    for step in order:
        if step.w.resource != "cpu.idle":
            continue
        shares = next((s for s in out if s.w.cgroup == step.w.cgroup and s.w.resource == "cpu.shares"), None)
        if shares is None:
            continue
        out.remove(step)
        at = out.index(shares)
        out.insert(at if step.new == 0 else at + 1, step)
    return out


class Executor:
    """Applies :class:`CgroupWrite` plans to one cgroup tree (``fs``, hierarchy ``version``) and, optionally, to
    the resctrl and sysctl trees (``trees``)."""

    def __init__(self, fs: CgroupFS, version: CgroupVersion, audit_size: int = 256,
                 trees: dict[str, CgroupFS] | None = None,
                 sink: Callable[[WriteRecord], None] | None = None) -> None:
        self.fs = fs
        self.sink = sink
        self.version: CgroupVersion = version
        self.trees: dict[str, CgroupFS] = {"cgroup": fs, **(trees or {})}
        self._cache: dict[str, dict[str, Value]] = {}
        self.audit: deque[WriteRecord] = deque(maxlen=audit_size)
        self.written = 0
        self.failed = 0

    def _fs(self, res: Resource) -> CgroupFS | None:
        return self.trees.get(res.tree)

    def read(self, cgroup: str, resource: str, key: str = "") -> Value | None:
        """Current logical value (cached, else read from the tree); None when it cannot be read.

        ``key`` the device (``"8:0"``) of a ``device`` resource.
        """
        ident = f"{resource} {key}" if key else resource
        cached = self._cache.get(cgroup)
        if cached is not None and ident in cached:
            return cached[ident]
        res = RESOURCES.get(resource)
        fs = self._fs(res) if res is not None else None
        if res is None or fs is None or not res.cached:
            return None
        try:
            value = read_value(fs, self.version, cgroup, resource, key)
        except (OSError, ValueError, KeyError):
            return None
        self._cache.setdefault(cgroup, {})[ident] = value
        return value

    def forget(self, cgroup: str) -> None:
        """Drop cached values of ``cgroup`` and its children (after the group was removed or recreated)."""
        prefix = cgroup.rstrip("/") + "/"
        for key in [k for k in self._cache if k == cgroup or k.startswith(prefix)]:
            del self._cache[key]

    def apply(self, writes: list[CgroupWrite], at: float = 0.0) -> list[WriteRecord]:
        """Apply ``writes``; returns one record per write executed (a cpuset moved through the union of old and
        new has two) and one per write skipped or refused, in execution order.

        Later writes with the same identity (cgroup, resource and, for device rules and tasks, the device or
        task id) replace earlier ones in the plan. Never raises for bad values or filesystem errors: those come
        back as records with ``ok=False``.
        """
        last: dict[tuple[str, str], CgroupWrite] = {}
        for w in writes:
            last[(w.cgroup, identity(w.resource, w.value))] = w
        for (cg, name), w in last.items():
            if name == "cpu.idle" and self.read(cg, "cpu.idle") != w.value:
                self._cache.get(cg, {}).pop("cpu.shares", None)  # the kernel resets the weight (see _write)
        records: list[WriteRecord] = []
        steps: dict[tuple[str, str], _Step] = {}
        for key, w in last.items():
            rec, step = self._prepare(w, at)
            if rec is not None:
                records.append(rec)
            else:
                assert step is not None
                steps[key] = step
        self._keep_burst_within_quota(steps, last, records, at)
        grow: list[tuple[int, int, _Step]] = []
        shrink: list[tuple[int, int, _Step]] = []
        for step in steps.values():
            res = RESOURCES[step.w.resource]
            d = _depth(step.w.cgroup)
            if _grows(res, step.old, step.new):
                grow.append((d, _GROW_RANK.get(step.w.resource, 0), step))
                continue
            if res.kind == "cpuset" and not set(cpuset_parse(str(step.new))) <= set(cpuset_parse(str(step.old))):
                union = cpuset_format(sorted(set(cpuset_parse(str(step.old))) | set(cpuset_parse(str(step.new)))))
                grow.append((d, 0, _Step(step.w, step.old, union, "transitional union of old and new cpuset")))
            shrink.append((-d, _SHRINK_RANK.get(step.w.resource, 0), step))
        grow.sort(key=lambda t: (t[0], t[1]))
        shrink.sort(key=lambda t: (t[0], t[1]))
        done: dict[tuple[str, str], Value | None] = {}
        for step in _idle_before_shares([s for _, _, s in grow + shrink]):
            ident = (step.w.cgroup, identity(step.w.resource, step.w.value))
            if ident in done:  # the final write after a transitional union starts from the union
                step = replace(step, old=done[ident])
            rec = self._write(step, at)
            done[ident] = rec.new if rec.ok else rec.old
            records.append(rec)
        audited = [r for r in records if not (r.ok and r.skipped)]
        self.audit.extend(audited)
        if self.sink is not None:
            for r in audited:
                self.sink(r)
        return records

    def _prepare(self, w: CgroupWrite, at: float) -> tuple[WriteRecord | None, _Step | None]:
        """Validate ``w`` and compare with the current value: a final record, or a step to execute."""
        res = RESOURCES.get(w.resource)
        keyed = res is None or res.kind in ("device", "pid")
        cached = None if keyed else self._cache.get(w.cgroup, {}).get(w.resource)
        if cached is not None and cached == w.value and type(cached) is type(w.value):
            # fast path: strategies re-plan the same canonical value every round (an equal but differently
            # spelled value, e.g. "0,1" for "0-1", takes the full path below and is found unchanged there)
            return WriteRecord(w.cgroup, w.resource, "", cached, cached, ok=True, skipped=True,
                               message="unchanged", reason=w.reason, at=at), None
        if res is None:
            return WriteRecord(w.cgroup, w.resource, "", None, w.value, ok=False, error="EINVAL",
                               message=f"unknown cgroup resource {w.resource!r}", reason=w.reason, at=at), None
        problem = validate(res, w.value)
        if problem is not None:
            return WriteRecord(w.cgroup, w.resource, "", None, w.value, ok=False, error="EINVAL",
                               message=problem, reason=w.reason, at=at), None
        new = normalize(res, w.value)
        key = key_of(w.resource, new)
        if res.kind == "cpuset" and new == "":
            return WriteRecord(w.cgroup, w.resource, "", self.read(w.cgroup, w.resource), new, ok=False,
                               skipped=True, message="refused: empty cpuset", reason=w.reason, at=at), None
        old = self.read(w.cgroup, w.resource, key)
        if res.cached and old is not None and old == new:
            return WriteRecord(w.cgroup, w.resource, "", old, new, ok=True, skipped=True,
                               message="unchanged", reason=w.reason, at=at), None
        return None, _Step(CgroupWrite(w.cgroup, w.resource, new, w.reason), old, new)

    def _keep_burst_within_quota(self, steps: dict[tuple[str, str], _Step], planned: dict[tuple[str, str],
                                 CgroupWrite], records: list[WriteRecord], at: float) -> None:
        """Clamp planned bursts to the quota they will run under, and lower a current burst that a planned
        quota would fall below (its own step, ordered before the quota by the shrink ranking)."""
        cgroups = {cg for cg, ident in steps if ident in (QUOTA, BURST)}
        for cg in cgroups:
            q_step = steps.get((cg, QUOTA))
            quota = q_step.new if q_step is not None else self.read(cg, QUOTA)
            if not isinstance(quota, int) or quota < 0:
                continue
            b_step = steps.get((cg, BURST))
            if b_step is not None:
                if int(b_step.new) > quota:
                    b_step.new = quota
                    b_step.w = replace(b_step.w, value=quota)
                    b_step.message = f"clamped to the quota {quota} us"
                    if b_step.old == quota:
                        del steps[(cg, BURST)]
                        records.append(WriteRecord(cg, BURST, "", quota, quota, ok=True, skipped=True,
                                                   message=f"unchanged (clamped to the quota {quota} us)",
                                                   reason=b_step.w.reason, at=at))
                continue
            if (cg, BURST) in planned:
                continue  # planned but refused or unchanged: its record already says so
            burst = self.read(cg, BURST)
            if isinstance(burst, int) and burst > quota:
                w = CgroupWrite(cg, BURST, quota, "burst lowered to the new quota")
                steps[(cg, BURST)] = _Step(w, burst, quota, f"clamped to the quota {quota} us")

    def _write(self, step: _Step, at: float) -> WriteRecord:
        w, old, new = step.w, step.old, step.new
        res = RESOURCES[w.resource]
        fs = self._fs(res)
        path = ""
        if fs is None:
            self.failed += 1
            return WriteRecord(w.cgroup, w.resource, "", old, new, ok=False, error="ENOENT",
                               message=f"no {res.tree} filesystem", reason=w.reason, at=at)
        ident = identity(w.resource, new)
        try:
            path, text = render(fs, self.version, w.cgroup, w.resource, new)
            fs.write(path, text)
        except OSError as exc:
            self._cache.get(w.cgroup, {}).pop(ident, None)
            self.failed += 1
            msg = exc.strerror or str(exc)
            return WriteRecord(w.cgroup, w.resource, path or str(exc.filename or ""), old, new, ok=False,
                               error=_errno_name(exc), message=f"{msg}; {step.message}" if step.message else msg,
                               reason=w.reason, at=at)
        if res.cached:
            self._cache.setdefault(w.cgroup, {})[ident] = new
        if w.resource == "cpu.idle":
            # the kernel sets an idle group's weight to its minimum (v1 reads 3) and back to the default (1024)
            # when idle is cleared: a cached weight no longer says what is in place
            self._cache.get(w.cgroup, {}).pop("cpu.shares", None)
        self.written += 1
        return WriteRecord(w.cgroup, w.resource, path, old, new, ok=True, message=step.message, reason=w.reason,
                           at=at)
