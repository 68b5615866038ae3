"""The GPUs of this machine, for the host backend's ``NodeSpec.gpus`` (docs/gpu.md "On the node").

Two sources, both NVIDIA's:

* the driver's procfs, ``/proc/driver/nvidia/gpus/<pci-bus-id>/information`` (no tool needed), one file per GPU
  of ``Key: <tabs/spaces> value`` lines such as ``Model: \\t\\t NVIDIA A10G``, ``Bus Location: \\t 0000:00:1e.0``,
  ``Device Minor: \\t 3``, ``GPU Excluded: \\t No`` (``Blacklisted:`` in older drivers). The index is the
  Device Minor (``/dev/nvidia<minor>``); the file gives no memory size.
* ``nvidia-smi --query-gpu=index,pci.bus_id,name,memory.total --format=csv,noheader,nounits`` when it is on
  ``PATH`` (memory in MiB), run with a timeout. Its memory wins; its GPUs are matched to the procfs ones by PCI
  bus id, because the minor number need not follow nvidia-smi's (PCI-ordered) index. Without procfs its
  index is used.

Without nvidia-smi ``memory_bytes`` stays 0 (unknown): DeviceShare books milli-GPU only and does not read it.
The model is the driver's name as written (``NVIDIA A100-SXM4-40GB``); DeviceShare matches a pod's
``colo.io/gpu-spec`` names against it exactly. An unreadable or malformed file or output line is logged and
skipped; no GPU found = ``[]``.

The ``gpus`` setting (:func:`gpu_setting_problems`): ``auto`` (discover), ``off`` (none), or a JSON list of
``{index, model, memory_bytes}`` registered as given (a driver layout this module does not read, or the trace's
model names such as ``V100M16``).
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
from pathlib import Path

import msgspec

from colo.messages import GPUInfo

log = logging.getLogger("colo.node-agent.host")

PROC_ROOT = "/proc/driver/nvidia/gpus"
"""The NVIDIA driver's per-GPU procfs directories (one per PCI bus id)."""
NVIDIA_SMI = "nvidia-smi"
"""The tool looked up on ``PATH``."""
SMI_QUERY = ("--query-gpu=index,pci.bus_id,name,memory.total", "--format=csv,noheader,nounits")
"""nvidia-smi's arguments: one ``index, bus id, name, MiB`` line per GPU."""
SMI_TIMEOUT_S = 10.0
"""nvidia-smi can hang on a wedged GPU; the agent starts without its answer after this many seconds."""
MIB = 1 << 20


def parse_information(text: str) -> dict[str, str]:
    """The ``Key: value`` lines of one procfs ``information`` file (keys and values stripped; the value is
    everything after the first ``:``, as ``Bus Location: 0000:01:00.0`` needs). Lines without ``:`` are
    ignored."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def bus_key(bus_id: str) -> str:
    """A PCI bus id in one form, ``dddd:bb:dd.f`` lowercase: procfs writes ``0000:c1:00.0``, nvidia-smi
    ``00000000:C1:00.0``. Raises ValueError when ``bus_id`` is not ``domain:bus:device.function``."""
    domain, bus, devfn = bus_id.strip().split(":")
    device, function = devfn.split(".")
    return f"{int(domain, 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}.{int(function, 16):x}"


def _procfs_gpu(path: Path) -> tuple[str, GPUInfo] | None:
    """(bus key, GPU) of one ``<bus id>/information`` file; None (logged) when unreadable, malformed or
    excluded by the driver."""
    try:
        info = parse_information(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("GPU discovery: cannot read %s (%s); skipped", path, exc)
        return None
    minor = info.get("Device Minor", "")
    if not minor.isdigit():
        log.warning("GPU discovery: %s has no valid 'Device Minor' (got %r); skipped", path, minor or None)
        return None
    if "yes" in (info.get("GPU Excluded", "").lower(), info.get("Blacklisted", "").lower()):
        log.info("GPU discovery: %s is excluded by the driver; skipped", path)
        return None
    try:
        key = bus_key(info.get("Bus Location") or path.parent.name)
    except ValueError:
        key = path.parent.name.lower()
    return key, GPUInfo(index=int(minor), model=info.get("Model", ""))


def read_procfs(root: str | Path = PROC_ROOT) -> dict[str, GPUInfo]:
    """Bus key → GPU for every readable ``<root>/*/information`` (none when ``root`` does not exist: no NVIDIA
    driver). A second GPU with a minor already seen is logged and skipped."""
    base = Path(root)
    if not base.is_dir():
        return {}
    out: dict[str, GPUInfo] = {}
    minors: set[int] = set()
    for path in sorted(base.glob("*/information")):
        found = _procfs_gpu(path)
        if found is None:
            continue
        if found[1].index in minors:
            log.warning("GPU discovery: %s repeats Device Minor %d; skipped", path, found[1].index)
            continue
        minors.add(found[1].index)
        out[found[0]] = found[1]
    return out


def parse_smi(text: str) -> dict[str, tuple[int, GPUInfo]]:
    """Bus key → (nvidia-smi index, GPU) of nvidia-smi's CSV (:data:`SMI_QUERY`). A model name may hold
    commas (the middle fields are joined); a memory of ``[N/A]`` is 0; a malformed line is logged and
    skipped."""
    out: dict[str, tuple[int, GPUInfo]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        try:
            if len(fields) < 4:
                raise ValueError("expected index, pci.bus_id, name, memory.total")
            index, key, name = int(fields[0]), bus_key(fields[1]), ", ".join(fields[2:-1])
            mib = int(fields[-1]) if fields[-1].isdigit() else 0
        except ValueError as exc:
            log.warning("GPU discovery: nvidia-smi line %r not understood (%s); skipped", line, exc)
            continue
        out[key] = (index, GPUInfo(index=index, model=name, memory_bytes=mib * MIB))
    return out


def query_smi(timeout_s: float = SMI_TIMEOUT_S) -> dict[str, tuple[int, GPUInfo]] | None:
    """nvidia-smi's GPUs (:func:`parse_smi`); None when it is not on ``PATH``, fails, or takes longer than
    ``timeout_s`` (logged, except when absent)."""
    exe = shutil.which(NVIDIA_SMI)
    if exe is None:
        return None
    try:
        done = subprocess.run([exe, *SMI_QUERY], capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        log.warning("GPU discovery: %s gave no answer in %.0f s; using procfs only", exe, timeout_s)
        return None
    except OSError as exc:
        log.warning("GPU discovery: cannot run %s (%s); using procfs only", exe, exc)
        return None
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip().splitlines()
        log.warning("GPU discovery: %s exited %d (%s); using procfs only", exe, done.returncode,
                    why[0] if why else "no output")
        return None
    return parse_smi(done.stdout)


def merge(procfs: dict[str, GPUInfo], smi: dict[str, tuple[int, GPUInfo]] | None) -> list[GPUInfo]:
    """The node's GPUs by index: procfs's (index = minor) with nvidia-smi's memory (and its name where procfs
    has none) matched by bus id; nvidia-smi's alone when procfs found nothing."""
    if not procfs:
        return sorted((g for _, g in (smi or {}).values()), key=lambda g: g.index)
    out: list[GPUInfo] = []
    for key, g in procfs.items():
        seen = (smi or {}).get(key)
        if seen is not None:
            g = msgspec.structs.replace(g, model=g.model or seen[1].model, memory_bytes=seen[1].memory_bytes)
        out.append(g)
    return sorted(out, key=lambda g: g.index)


def discover_gpus(proc_root: str | Path = PROC_ROOT, timeout_s: float = SMI_TIMEOUT_S) -> list[GPUInfo]:
    """This machine's GPUs from procfs and nvidia-smi (module doc); ``[]`` when neither knows any."""
    gpus = merge(read_procfs(proc_root), query_smi(timeout_s))
    if gpus:
        log.info("GPU discovery: %s", ", ".join(f"{g.index}: {g.model or '?'} "
                                                f"({g.memory_bytes // MIB} MiB)" for g in gpus))
    return gpus


def gpu_setting_problems(setting: str) -> list[str]:
    """Every problem of the ``gpus`` setting (empty when valid): not ``auto``/``off``/JSON, not a list, an
    entry that is not ``{index, model, memory_bytes}`` (unknown fields included, so a typo is not dropped), a negative index or memory, a repeated index."""
    if setting in ("auto", "off"):
        return []
    try:
        entries = json.loads(setting)
    except json.JSONDecodeError as exc:
        return [f"gpus must be 'auto', 'off' or a JSON list of {{index, model, memory_bytes}}, got {setting!r} "
                f"({exc.msg})"]
    if not isinstance(entries, list):
        return [f"gpus: expected a JSON list, got {type(entries).__name__}"]
    out: list[str] = []
    seen: set[int] = set()
    for i, entry in enumerate(entries):
        unknown = sorted(set(entry) - set(GPUInfo.__struct_fields__)) if isinstance(entry, dict) else []
        if unknown:
            out.append(f"gpus[{i}]: unknown field(s) {', '.join(map(repr, unknown))} "
                       f"(known: {', '.join(GPUInfo.__struct_fields__)})")
        try:
            g = msgspec.convert(entry, GPUInfo)
        except msgspec.ValidationError as exc:
            out.append(f"gpus[{i}]: {exc}")
            continue
        if g.index < 0:
            out.append(f"gpus[{i}]: index must be >= 0, got {g.index}")
        elif g.index in seen:
            out.append(f"gpus[{i}]: index {g.index} repeated")
        seen.add(g.index)
        if g.memory_bytes < 0:
            out.append(f"gpus[{i}]: memory_bytes must be >= 0, got {g.memory_bytes}")
    return out


def host_gpus(setting: str, proc_root: str | Path = PROC_ROOT,
              timeout_s: float = SMI_TIMEOUT_S) -> list[GPUInfo]:
    """The GPUs the host node registers for a valid ``gpus`` setting (:func:`gpu_setting_problems`):
    discovered (``auto``), none (``off``) or the given list, by index."""
    if setting == "off":
        return []
    if setting == "auto":
        return discover_gpus(proc_root, timeout_s)
    return sorted(msgspec.convert(json.loads(setting), list[GPUInfo]), key=lambda g: g.index)
