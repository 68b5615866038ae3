"""The interference signals' arithmetic without a kernel: schedstat deltas (exits, recycled ids, zero run
time), the sampler over a fake procfs, perf group reads and CPI, perf unavailable → −1."""

from __future__ import annotations

import errno
import logging
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest

from colo.messages import InterferenceSignals
from colo_node_agent.backends.host_interference import (
    InterferenceSampler,
    TaskTimes,
    added,
    parse_schedstat,
    runq_wait_ratio,
)
from colo_node_agent.backends.host_perf import (
    MAX_THREADS_PER_POD,
    PERF_COUNT_HW_CPU_CYCLES,
    PERF_COUNT_HW_INSTRUCTIONS,
    PERF_FORMAT_GROUP,
    Perf,
    PodCycles,
    attr_bytes,
    cpi,
    parse_group,
    probe,
)

T = TaskTimes


@dataclass(frozen=True)
class DeltaCase:
    name: str
    prev: dict[int, TaskTimes]
    cur: dict[int, TaskTimes]
    want: TaskTimes


DELTA_CASES = [
    DeltaCase("steady thread", {1: T(100, 10)}, {1: T(300, 60)}, T(200, 50)),
    DeltaCase("two threads summed", {1: T(100, 10), 2: T(50, 5)}, {1: T(200, 20), 2: T(150, 105)}, T(200, 110)),
    DeltaCase("new thread counts whole", {1: T(100, 10)}, {1: T(200, 20), 7: T(40, 30)}, T(140, 40)),
    DeltaCase("exited thread loses its tail", {1: T(100, 10), 2: T(500, 500)}, {1: T(200, 20)}, T(100, 10)),
    DeltaCase("recycled tid: counters went back", {3: T(9000, 900)}, {3: T(40, 4)}, T(40, 4)),
    DeltaCase("wait went back alone: also a new thread", {3: T(100, 900)}, {3: T(200, 4)}, T(200, 4)),
    DeltaCase("every thread exited", {1: T(100, 10)}, {}, T(0, 0)),
    DeltaCase("no change", {1: T(100, 10)}, {1: T(100, 10)}, T(0, 0)),
]


@pytest.mark.parametrize("case", DELTA_CASES, ids=lambda c: c.name)
def test_added_time_between_two_readings(case: DeltaCase) -> None:
    assert added(case.prev, case.cur) == case.want


@dataclass(frozen=True)
class RatioCase:
    name: str
    run_ns: int
    wait_ns: int
    want: float


RATIO_CASES = [
    RatioCase("alone", 1_000_000_000, 10_000_000, 0.01),
    RatioCase("two on one CPU", 500_000_000, 500_000_000, 1.0),
    RatioCase("zero run time is unknown", 0, 5_000, -1.0),
    RatioCase("negative run (reset) is unknown", -10, 5, -1.0),
    RatioCase("negative wait clamps to 0", 1000, -5, 0.0),
]


@pytest.mark.parametrize("case", RATIO_CASES, ids=lambda c: c.name)
def test_runq_wait_ratio(case: RatioCase) -> None:
    assert runq_wait_ratio(case.run_ns, case.wait_ns) == pytest.approx(case.want)


def test_parse_schedstat() -> None:
    assert parse_schedstat("550694708 15565592 78\n") == T(550694708, 15565592)
    with pytest.raises(ValueError):
        parse_schedstat("12\n")
    with pytest.raises(ValueError):
        parse_schedstat("a b c\n")


class FakeProc:
    """A procfs with ``<tid>/schedstat`` files and a pod group's thread list."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tids: list[int] = []

    def set(self, tid: int, run_ns: int, wait_ns: int) -> None:
        (self.root / str(tid)).mkdir(exist_ok=True)
        (self.root / str(tid) / "schedstat").write_text(f"{run_ns} {wait_ns} 1\n")
        if tid not in self.tids:
            self.tids.append(tid)

    def exit(self, tid: int) -> None:
        (self.root / str(tid) / "schedstat").unlink()
        (self.root / str(tid)).rmdir()

    def threads(self, cgroup: str) -> list[int]:
        return list(self.tids)  # stale on purpose after exit(): the sampler must cope


def test_sampler_over_report_windows_with_exits_and_forgotten_pods(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    s = InterferenceSampler(proc.threads, proc=str(tmp_path), count_cpi=False)
    assert s.signals("a", {}).runq_wait_ratio == -1  # never sampled
    proc.set(10, 1000, 100)
    s.sample({"a": "kubepods/poda"})  # baseline
    assert s.signals("a", {"cpu.some": 3.5}) == InterferenceSignals(
        runq_wait_ratio=-1.0, cpu_pressure_some=3.5, cpi=-1.0)  # nothing ran since the baseline
    proc.set(10, 3000, 1100)
    s.sample({"a": "kubepods/poda"})
    proc.set(11, 1000, 1000)  # a new thread, then the first exits before the next loop
    proc.exit(10)
    s.sample({"a": "kubepods/poda"})
    sig = s.signals("a", {})
    assert sig.runq_wait_ratio == pytest.approx((1000 + 1000) / (2000 + 1000), abs=1e-4)  # 4 decimals
    assert sig.cpu_pressure_some == -1 and sig.cpi == -1
    s.sample({})  # the pod ended
    assert s.pods == {}


class FakePerf:
    """perf_event_open and read on fake descriptors: per tid, cycles and instructions set by the test."""

    def __init__(self, refuse: int = 0) -> None:
        self.refuse = refuse
        self.next_fd = 100
        self.fds: dict[int, int] = {}  # fd → tid (leaders and members)
        self.counts: dict[int, tuple[int, int]] = {}
        self.closed: list[int] = []
        self.attrs: list[bytes] = []

    def open_event(self, attr: bytes, pid: int, cpu: int, group_fd: int, flags: int) -> int:
        if self.refuse:
            raise OSError(self.refuse, "refused")
        self.attrs.append(attr)
        self.next_fd += 1
        self.fds[self.next_fd] = pid
        return self.next_fd

    def read(self, fd: int, n: int) -> bytes:
        c, i = self.counts.get(self.fds[fd], (0, 0))
        return struct.pack("=QQQ", 2, c, i)

    def close(self, fd: int) -> None:
        self.closed.append(fd)
        del self.fds[fd]

    def perf(self) -> Perf:
        return Perf(self.open_event, self.read, self.close)


def test_attr_counts_cycles_and_instructions_in_one_group() -> None:
    for config in (PERF_COUNT_HW_CPU_CYCLES, PERF_COUNT_HW_INSTRUCTIONS):
        a = attr_bytes(config)
        typ, size, cfg, _, _, fmt = struct.unpack_from("=IIQQQQ", a, 0)
        assert (len(a), typ, size, cfg, fmt) == (64, 0, 64, config, PERF_FORMAT_GROUP)


@pytest.mark.parametrize(("data", "want"), [
    (struct.pack("=QQQ", 2, 3000, 1000), (3000, 1000)),
    (struct.pack("=QQQQ", 3, 5, 7, 9), (5, 7)),
], ids=["two values", "extra member ignored"])
def test_parse_group(data: bytes, want: tuple[int, int]) -> None:
    assert parse_group(data) == want


@pytest.mark.parametrize("data", [b"", struct.pack("=QQ", 1, 5), struct.pack("=QQ", 2, 5)],
                         ids=["empty", "one value", "short"])
def test_parse_group_refuses_short_reads(data: bytes) -> None:
    with pytest.raises(ValueError):
        parse_group(data)


@pytest.mark.parametrize(("cycles", "instructions", "want"), [
    (3000, 1000, 3.0), (500, 1000, 0.5), (100, 0, -1.0), (-1, 10, -1.0),
], ids=["memory bound", "superscalar", "no instructions", "negative cycles"])
def test_cpi(cycles: int, instructions: int, want: float) -> None:
    assert cpi(cycles, instructions) == want


def test_pod_cycles_add_exited_threads_final_counts_and_close_them() -> None:
    fake = FakePerf()
    pc = PodCycles(fake.perf())
    pc.update([1, 2])
    fake.counts = {1: (3000, 1000), 2: (1000, 1000)}
    pc.update([1, 2])
    assert (pc.cycles, pc.instructions) == (4000, 2000)
    fake.counts[2] = (1600, 1200)  # thread 2 counted more, then exited: its final read still counts
    pc.update([1])
    assert (pc.cycles, pc.instructions) == (4600, 2200)
    assert len(fake.closed) == 2 and list(pc.groups) == [1]
    pc.close()
    assert fake.fds == {}


def test_pod_cycles_cap_the_threads_counted() -> None:
    fake = FakePerf()
    pc = PodCycles(fake.perf())
    pc.update(list(range(1, MAX_THREADS_PER_POD + 10)))
    assert len(pc.groups) == MAX_THREADS_PER_POD and len(fake.fds) == 2 * MAX_THREADS_PER_POD


def test_sampler_cpi_over_a_window(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    fake = FakePerf()
    s = InterferenceSampler(proc.threads, proc=str(tmp_path), perf=fake.perf())
    assert s.perf is not None and fake.fds == {}  # the probe's group is closed again
    proc.set(5, 100, 0)
    s.sample({"a": "cg"})
    fake.counts = {5: (2000, 1000)}
    proc.set(5, 200, 50)
    s.sample({"a": "cg"})
    sig = s.signals("a", {})
    assert (sig.cpi, sig.runq_wait_ratio) == (2.0, 0.5)
    s.close()
    assert fake.fds == {}


@pytest.mark.parametrize("err", [errno.ENOENT, errno.EOPNOTSUPP, errno.EACCES, errno.ENOSYS],
                         ids=["no hw events (VM)", "not supported", "paranoid", "no syscall"])
def test_perf_unavailable_is_probed_once_logged_once_and_reported_as_minus_one(
        err: int, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    fake = FakePerf(refuse=err)
    proc = FakeProc(tmp_path)
    proc.set(5, 100, 0)
    with caplog.at_level(logging.INFO, logger="colo.node-agent.host"):
        s = InterferenceSampler(proc.threads, proc=str(tmp_path), perf=fake.perf())
        for run, wait in ((200, 10), (300, 20)):
            proc.set(5, run, wait)
            s.sample({"a": "cg", "b": "cg"})
    assert s.perf is None and f"errno {err}" in s.perf_problem
    assert [r.message for r in caplog.records if "perf" in r.message] == [
        f"perf hardware events unavailable ({s.perf_problem}): interference cpi reported as -1"]
    sig = s.signals("a", {})
    assert sig.cpi == -1.0 and sig.runq_wait_ratio == pytest.approx(0.1)


def test_the_real_probe_answers_without_raising() -> None:
    perf, why = probe()
    assert (perf is None) == bool(why)  # this machine (no virtual PMU): None, "errno 2 (ENOENT) ..."
