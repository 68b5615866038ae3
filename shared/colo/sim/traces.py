"""Reading the real public traces the simulation is built from.

The traces live in a directory chosen by :func:`traces_dir`: ``COLO_TRACES_DIR`` when
set, else ``<repo>/../shared/traces`` when it exists, else the download cache
``~/.cache/colo/traces`` (filled by ``colo traces fetch``, :mod:`colo.sim.fetch`).
Schemas, units and quirks are those of ``shared/traces/README.md``; every loader
names its file and columns and converts to Colo units (milli-cores, bytes, seconds).
Nothing here is synthetic: loaders only parse and filter.
"""

from __future__ import annotations

import csv
import gzip
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

CACHE_DIR = Path.home() / ".cache" / "colo" / "traces"
"""Where ``colo traces fetch`` downloads the traces."""

GIB = 2**30
MIB = 2**20
KIB = 2**10

NODE_LIST = "alibaba-gpu-v2023/openb_node_list_all_node.csv"
DLRM_TRACE = "alibaba-gpu-v2025/disaggregated_DLRM_trace.csv"
BATCH_TASK = "alibaba-v2017/batch_task.csv"
SERVER_EVENT = "alibaba-v2017/server_event.csv"
BITBRAINS_DIR = "bitbrains-gwa-t-12-rnd/2013-7"


class TraceError(RuntimeError):
    """A trace file is missing or unreadable; the message says which and how to get it."""


def _repo_root() -> Path:
    # shared/colo/sim/traces.py → repository root is three levels above the package dir
    return Path(__file__).resolve().parents[3]


def traces_dir(env: dict[str, str] | None = None) -> Path:
    """The directory holding the traces (see module docstring for the lookup order)."""
    environ = os.environ if env is None else env
    explicit = environ.get("COLO_TRACES_DIR")
    if explicit:
        return Path(explicit)
    sibling = _repo_root().parent / "shared" / "traces"
    if sibling.is_dir():
        return sibling
    return CACHE_DIR


def trace_path(relative: str, root: Path | None = None) -> Path:
    """Path of a trace file; raises TraceError naming the file and ``colo traces fetch`` when missing."""
    path = (root or traces_dir()) / relative
    if not path.exists():
        raise TraceError(
            f"trace file {path} not found; set COLO_TRACES_DIR or run `colo traces fetch` "
            f"to download the public traces into {CACHE_DIR}"
        )
    return path


@dataclass(frozen=True)
class TraceNode:
    """A node of ``openb_node_list_all_node.csv``: ``cpu_milli`` milli-cores, ``memory_bytes`` (MiB × 2^20)."""

    sn: str
    cpu_milli: int
    memory_bytes: int
    gpu: int
    model: str = ""
    """GPU model (``V100M16``, ``T4``, …; empty on CPU nodes)."""


def load_nodes(root: Path | None = None) -> list[TraceNode]:
    """Every node of alibaba-gpu-v2023 (1,523 rows; columns sn, cpu_milli, memory_mib, gpu, model)."""
    return list(_load_nodes(trace_path(NODE_LIST, root)))


@lru_cache(maxsize=8)
def _load_nodes(path: Path) -> tuple[TraceNode, ...]:
    with path.open(newline="") as f:
        return tuple(
            TraceNode(r["sn"], int(r["cpu_milli"]), int(r["memory_mib"]) * MIB, int(r["gpu"] or 0),
                      r.get("model") or "")
            for r in csv.DictReader(f)
        )


@dataclass(frozen=True)
class TraceService:
    """An online (LS) instance of the DLRM trace (role CN).

    ``cpu_request_milli``/``cpu_limit_milli`` from vCPUs × 1000, ``memory_*_bytes`` from
    GiB × 2^30, ``max_instance_per_node`` (−1 = no cap).
    """

    instance: str
    app: str
    cpu_request_milli: int
    cpu_limit_milli: int
    memory_request_bytes: int
    memory_limit_bytes: int
    max_instance_per_node: int


def load_services(root: Path | None = None, role: str = "CN") -> list[TraceService]:
    """The ``role`` (default CN: CPU-node) instances of alibaba-gpu-v2025, in file order (16,485 for CN)."""
    return list(_load_services(trace_path(DLRM_TRACE, root), role))


@lru_cache(maxsize=8)
def _load_services(path: Path, role: str) -> tuple[TraceService, ...]:
    out: list[TraceService] = []
    with path.open(newline="") as f:
        for r in csv.DictReader(f):
            if r["role"] != role:
                continue
            out.append(TraceService(
                instance=r["instance_sn"], app=r["app_name"],
                cpu_request_milli=round(float(r["cpu_request"]) * 1000),
                cpu_limit_milli=round(float(r["cpu_limit"]) * 1000),
                memory_request_bytes=round(float(r["memory_request"]) * GIB),
                memory_limit_bytes=round(float(r["memory_limit"]) * GIB),
                max_instance_per_node=int(r["max_instance_per_node"] or -1),
            ))
    return tuple(out)


@dataclass(frozen=True)
class TraceBatchTask:
    """A task of alibaba-v2017 ``batch_task.csv``.

    ``create_s``/``end_s`` seconds from trace start; ``instances``; ``plan_cpu`` in
    hundredths of a core (100 = 1 core, README §2); ``plan_mem`` normalized memory.
    """

    create_s: int
    end_s: int
    job_id: int
    task_id: int
    instances: int
    status: str
    plan_cpu: int
    plan_mem: float

    @property
    def duration_s(self) -> int:
        """end − create, seconds (the file has no start time)."""
        return self.end_s - self.create_s


def load_batch_tasks(root: Path | None = None) -> list[TraceBatchTask]:
    """Every row of ``batch_task.csv`` with both plan fields present (header line skipped)."""
    return list(_load_batch_tasks(trace_path(BATCH_TASK, root)))


@lru_cache(maxsize=8)
def _load_batch_tasks(path: Path) -> tuple[TraceBatchTask, ...]:
    out: list[TraceBatchTask] = []
    with path.open(newline="") as f:
        reader = csv.reader(f)
        next(reader)  # header added by the uploader (README §2)
        for r in reader:
            if len(r) < 8 or not r[6].strip() or not r[7].strip():
                continue
            out.append(TraceBatchTask(
                int(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4]), r[5].strip(),
                int(r[6]), float(r[7]),
            ))
    return tuple(out)


def v2017_median_machine_memory(root: Path | None = None) -> float:
    """Median normalized memory of the v2017 machines (``server_event.csv`` add events; 0.69 in the file)."""
    values: list[float] = []
    with trace_path(SERVER_EVENT, root).open(newline="") as f:
        for r in csv.reader(f):
            if len(r) >= 6 and r[2] == "add" and r[5]:
                values.append(float(r[5]))
    if not values:
        raise TraceError(f"{SERVER_EVENT}: no add events with memory")
    values.sort()
    return values[len(values) // 2]


@dataclass(frozen=True)
class VMSeries:
    """One Bitbrains VM: 300 s samples of CPU usage and memory usage/provisioned, as fractions 0–1."""

    vm: str
    cpu_util: tuple[float, ...]
    memory_util: tuple[float, ...]


def list_vms(root: Path | None = None) -> list[str]:
    """VM ids (file stems) of the Bitbrains directory, sorted numerically."""
    directory = (root or traces_dir()) / BITBRAINS_DIR
    if not directory.is_dir():
        raise TraceError(f"{directory} not found; run `colo traces fetch`")
    names = [p.name.removesuffix(".csv.gz") for p in directory.glob("*.csv.gz")]
    return sorted(names, key=lambda s: (len(s), s))


def load_vm(vm: str, root: Path | None = None) -> VMSeries:
    """The series of VM ``vm``.

    Columns ``CPU usage [%]`` (/100, clamped to [0, 1]) and ``Memory usage [KB]`` /
    ``Memory capacity provisioned [KB]``. Rows with 0 cores or 0 provisioned memory
    (gaps or powered-off intervals, README §5) repeat the previous sample (0 at the start).
    """
    return _load_vm(vm, trace_path(f"{BITBRAINS_DIR}/{vm}.csv.gz", root))


@lru_cache(maxsize=256)
def _load_vm(vm: str, path: Path) -> VMSeries:
    cpu: list[float] = []
    mem: list[float] = []
    last_cpu, last_mem = 0.0, 0.0
    with gzip.open(path, "rt") as f:
        next(f)
        for line in f:
            cols = line.split(";")
            if len(cols) < 7:
                continue
            cores, mem_prov = float(cols[1]), float(cols[5])
            if cores > 0 and mem_prov > 0:
                last_cpu = min(max(float(cols[4]) / 100.0, 0.0), 1.0)
                last_mem = min(max(float(cols[6]) / mem_prov, 0.0), 1.0)
            cpu.append(last_cpu)
            mem.append(last_mem)
    return VMSeries(vm, tuple(cpu), tuple(mem))



@dataclass(frozen=True)
class VMSamples:
    """One Bitbrains VM's valid 300 s samples in the trace's own units, gap rows left out.

    Every array has shape ``(n,)`` in timestamp order and is read-only (the result is
    cached): ``at_s`` Unix seconds; ``cores``; ``cpu_capacity_mhz`` (CPU capacity
    provisioned); ``cpu_usage_mhz``; ``memory_provisioned_kb``; ``memory_usage_kb``
    (KB = 1024 bytes). ``gap_rows`` counts the rows skipped because they report 0 cores
    or 0 provisioned memory (README §5: gaps or powered-off intervals, ~6 % of rows) —
    they are missing data, not zero usage.
    """

    vm: str
    at_s: npt.NDArray[np.float64]
    cores: npt.NDArray[np.float64]
    cpu_capacity_mhz: npt.NDArray[np.float64]
    cpu_usage_mhz: npt.NDArray[np.float64]
    memory_provisioned_kb: npt.NDArray[np.float64]
    memory_usage_kb: npt.NDArray[np.float64]
    gap_rows: int


def load_vm_samples(vm: str, root: Path | None = None) -> VMSamples:
    """The raw valid samples of VM ``vm`` (columns 0–3, 5, 6 of ``<vm>.csv.gz``, separator ``;\\t``).

    Unlike :func:`load_vm`, nothing is normalized or filled: gap rows are dropped and
    counted. Raises TraceError when the file is missing or has no valid row.
    """
    return _load_vm_samples(vm, trace_path(f"{BITBRAINS_DIR}/{vm}.csv.gz", root))


@lru_cache(maxsize=256)
def _load_vm_samples(vm: str, path: Path) -> VMSamples:
    rows: list[tuple[float, float, float, float, float, float]] = []
    gaps = 0
    with gzip.open(path, "rt") as f:
        next(f)  # header row
        for line in f:
            cols = line.split(";")
            if len(cols) < 7:
                continue
            cores, mem_prov = float(cols[1]), float(cols[5])
            if cores <= 0 or mem_prov <= 0:
                gaps += 1
                continue
            rows.append((float(cols[0]), cores, float(cols[2]), float(cols[3]), mem_prov, float(cols[6])))
    if not rows:
        raise TraceError(f"{path}: no valid sample (every row reports 0 cores or 0 memory)")
    table = np.array(rows, dtype=np.float64)
    table = table[np.argsort(table[:, 0], kind="stable")]
    table.setflags(write=False)
    return VMSamples(vm, at_s=table[:, 0], cores=table[:, 1], cpu_capacity_mhz=table[:, 2],
                     cpu_usage_mhz=table[:, 3], memory_provisioned_kb=table[:, 4],
                     memory_usage_kb=table[:, 5], gap_rows=gaps)
