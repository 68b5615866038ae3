"""Cycles and instructions of a pod's threads through ``perf_event_open(2)`` (ctypes syscall), for its CPI.

Each counted thread gets one event group: a ``PERF_COUNT_HW_CPU_CYCLES`` leader and a
``PERF_COUNT_HW_INSTRUCTIONS`` member (``pid`` = the thread id, ``cpu`` = −1: the thread on any CPU; user and
kernel, hypervisor excluded), read together with ``PERF_FORMAT_GROUP`` so that both counters cover the same
scheduled time and multiplexing cancels out of their ratio. A thread that exits keeps its final counts readable
from the open descriptors, so a pod loses no cycles to exits: its last read is added before the descriptors are
closed. Per-thread events need no ``perf_event`` cgroup controller (the host backend does not make pod groups
in that hierarchy on cgroup v1).

CPI = Δcycles / Δinstructions over a window (−1 when no instruction was counted). Virtual machines without a
virtual PMU and kernels with ``perf_event_paranoid`` or seccomp refusing the call have no hardware events
(``ENOENT``, ``EOPNOTSUPP``, ``EACCES`` ...): :func:`probe` finds out once per process and the caller reports
−1 (docs/node-agent.md "Interference signals").
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

PERF_TYPE_HARDWARE = 0
PERF_COUNT_HW_CPU_CYCLES = 0
PERF_COUNT_HW_INSTRUCTIONS = 1
PERF_FORMAT_GROUP = 1 << 3
PERF_FLAG_FD_CLOEXEC = 1 << 3
ATTR_SIZE = 64
"""``PERF_ATTR_SIZE_VER0``: the fields up to ``config1`` are all that counting needs."""
_EXCLUDE_HV = 1 << 6
SYSCALL_NR = {"x86_64": 298, "aarch64": 241}
"""``__NR_perf_event_open`` per machine (``arch/x86/entry/syscalls/syscall_64.tbl``,
``include/uapi/asm-generic/unistd.h``)."""
MAX_THREADS_PER_POD = 32
"""Threads of one pod counted at most (2 descriptors each): CPI is a ratio, a subset of a large pod's threads
estimates it; bounds the agent's descriptors to 64 per LS pod."""

OpenFn = Callable[[bytes, int, int, int, int], int]
"""``(attr, pid, cpu, group_fd, flags) → fd``, raising OSError: the syscall, or a fake in tests."""
ReadFn = Callable[[int, int], bytes]
CloseFn = Callable[[int], None]


def attr_bytes(config: int) -> bytes:
    """A ``struct perf_event_attr`` (VER0, 64 bytes) counting hardware event ``config``, enabled at once,
    ``PERF_FORMAT_GROUP``, hypervisor excluded."""
    buf = bytearray(ATTR_SIZE)
    struct.pack_into("=IIQQQQQ", buf, 0, PERF_TYPE_HARDWARE, ATTR_SIZE, config, 0, 0, PERF_FORMAT_GROUP,
                     _EXCLUDE_HV)
    return bytes(buf)


def parse_group(data: bytes) -> tuple[int, int]:
    """(cycles, instructions) from a ``PERF_FORMAT_GROUP`` read: ``u64 nr`` then ``nr`` values, leader first.
    Raises ValueError when the buffer is short or holds fewer than two values."""
    if len(data) < 8:
        raise ValueError(f"perf group read of {len(data)} bytes: no count")
    (nr,) = struct.unpack_from("=Q", data, 0)
    if nr < 2 or len(data) < 8 * (1 + nr):
        raise ValueError(f"perf group read: {nr} values in {len(data)} bytes, want 2 (cycles, instructions)")
    cycles, instructions = struct.unpack_from("=QQ", data, 8)
    return int(cycles), int(instructions)


def cpi(d_cycles: int, d_instructions: int) -> float:
    """Cycles per instruction over a window; −1 when no instruction (or a negative count) was seen."""
    if d_instructions <= 0 or d_cycles < 0:
        return -1.0
    return d_cycles / d_instructions


def syscall_open() -> OpenFn:
    """The real ``perf_event_open`` through libc's ``syscall(2)``. Raises OSError(ENOSYS) on a machine whose
    syscall number is unknown here."""
    nr = SYSCALL_NR.get(platform.machine())
    if nr is None:
        raise OSError(errno.ENOSYS, f"perf_event_open: no syscall number for {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)
    fn = libc.syscall
    fn.restype = ctypes.c_long

    def open_event(attr: bytes, pid: int, cpu: int, group_fd: int, flags: int) -> int:
        buf = ctypes.create_string_buffer(attr, len(attr))
        fd = int(fn(ctypes.c_long(nr), buf, ctypes.c_int(pid), ctypes.c_int(cpu), ctypes.c_int(group_fd),
                    ctypes.c_ulong(flags)))
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"perf_event_open: {os.strerror(err)}")
        return fd

    return open_event


def _read(fd: int, n: int) -> bytes:
    return os.read(fd, n)


@dataclass
class Perf:
    """Opens, reads and closes event groups (the syscall and ``os`` calls, replaceable in tests)."""

    open_event: OpenFn
    read: ReadFn = _read
    close: CloseFn = os.close

    def open_group(self, tid: int) -> tuple[int, int]:
        """(leader fd, member fd) counting thread ``tid``. Raises OSError (the thread exited: ESRCH)."""
        leader = self.open_event(attr_bytes(PERF_COUNT_HW_CPU_CYCLES), tid, -1, -1, PERF_FLAG_FD_CLOEXEC)
        try:
            member = self.open_event(attr_bytes(PERF_COUNT_HW_INSTRUCTIONS), tid, -1, leader,
                                     PERF_FLAG_FD_CLOEXEC)
        except OSError:
            self.close(leader)
            raise
        return leader, member

    def read_group(self, leader: int) -> tuple[int, int]:
        """(cycles, instructions) counted so far. Raises OSError, ValueError."""
        return parse_group(self.read(leader, 8 * 3))


def probe(perf: Perf | None = None) -> tuple[Perf | None, str]:
    """Whether this process can count hardware events with ``perf`` (default: the real syscall): (Perf, "")
    or (None, why not). Tries one group on the calling thread (pid 0) and closes it."""
    try:
        perf = perf if perf is not None else Perf(syscall_open())
        leader, member = perf.open_group(0)
    except OSError as exc:
        return None, f"errno {exc.errno} ({errno.errorcode.get(exc.errno or 0, '?')}): {exc.strerror}"
    perf.close(member)
    perf.close(leader)
    return perf, ""


@dataclass
class PodCycles:
    """The cycle and instruction counts of one pod's threads: an event group per thread (at most
    :data:`MAX_THREADS_PER_POD`); ``cycles``/``instructions`` cumulative since the pod was first seen."""

    perf: Perf
    groups: dict[int, tuple[int, int]] = field(default_factory=dict)
    """tid → (leader fd, member fd)."""
    last: dict[int, tuple[int, int]] = field(default_factory=dict)
    """tid → (cycles, instructions) at the previous read."""
    cycles: int = 0
    instructions: int = 0

    def update(self, tids: list[int]) -> None:
        """Read every counted thread (adding what it counted since the previous read), close the groups of
        threads gone from ``tids`` and open groups for new ones while under the cap."""
        alive = set(tids)
        for tid in list(self.groups):
            self._read(tid)
            if tid not in alive:
                self._drop(tid)
        for tid in tids:
            if len(self.groups) >= MAX_THREADS_PER_POD:
                break
            if tid in self.groups:
                continue
            try:
                self.groups[tid] = self.perf.open_group(tid)
            except OSError:
                continue  # exited meanwhile, or out of descriptors: counted next time if still there
            self.last[tid] = (0, 0)

    def _read(self, tid: int) -> None:
        try:
            c, i = self.perf.read_group(self.groups[tid][0])
        except (OSError, ValueError):
            return
        c0, i0 = self.last.get(tid, (0, 0))
        self.cycles += max(c - c0, 0)
        self.instructions += max(i - i0, 0)
        self.last[tid] = (c, i)

    def _drop(self, tid: int) -> None:
        for fd in reversed(self.groups.pop(tid)):
            try:
                self.perf.close(fd)
            except OSError:
                pass
        self.last.pop(tid, None)

    def close(self) -> None:
        """Close every descriptor (the pod ended)."""
        for tid in list(self.groups):
            self._drop(tid)
