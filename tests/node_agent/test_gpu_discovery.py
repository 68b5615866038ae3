"""The host backend finds this machine's GPUs (``colo_node_agent.gpu_discovery``, docs/gpu.md "On the node"):
the NVIDIA driver's procfs in a temp dir (the files' real format), a fake ``nvidia-smi`` on ``PATH``, and the
``gpus`` setting that overrides or disables both."""

from __future__ import annotations

import logging
import shutil
import stat
from pathlib import Path

import pytest

from colo.messages import GPUInfo
from colo.settings import SettingsError, load_settings
from colo_node_agent.gpu_discovery import (
    MIB,
    bus_key,
    discover_gpus,
    host_gpus,
    merge,
    parse_smi,
    query_smi,
    read_procfs,
)
from colo_node_agent.service import host_config
from colo_node_agent.settings import ENV_PREFIX, NodeAgentSettings

# as the driver writes them (tabs after the colon; "Blacklisted" before "GPU Excluded" in older drivers)
A10G = ("Model: \t\t NVIDIA A10G\nIRQ:   \t\t 42\nGPU UUID: \t GPU-82523fd8-3897-f599-d088-ccd04ae45ec1\n"
        "Video BIOS: \t 94.04.42.00.01\nBus Type: \t PCIe\nDMA Size: \t 47 bits\nDMA Mask: \t 0x7fffffffffff\n"
        "Bus Location: \t 0000:00:1e.0\nDevice Minor: \t 3\nGPU Excluded: \t No\n")
K80 = ("Model: \t\t Tesla K80\nIRQ:   \t\t 33\nGPU UUID: \t GPU-c6398fd0-9366-8e15-5d6a-369da852f85b\n"
       "Video BIOS: \t 80.21.25.00.02\nBus Type: \t PCI\nDMA Size: \t 40 bits\nDMA Mask: \t 0xffffffffff\n"
       "Bus Location: \t 0000:00:04.0\nDevice Minor: \t 0\nBlacklisted:\t No\n")
A100_BUSES = ("0000:07:00.0", "0000:0f:00.0", "0000:47:00.0", "0000:4e:00.0", "0000:87:00.0", "0000:90:00.0",
              "0000:b7:00.0", "0000:bd:00.0")


def a100(bus: str, minor: int | str) -> str:
    return (f"Model: \t\t NVIDIA A100-SXM4-40GB\nIRQ:   \t\t 0\nGPU UUID: \t GPU-0000000{minor}-0000-0000-0000-"
            f"000000000000\nVideo BIOS: \t 92.00.45.00.03\nBus Type: \t PCIe\nDMA Size: \t 47 bits\n"
            f"DMA Mask: \t 0x7fffffffffff\nBus Location: \t {bus}\nDevice Minor: \t {minor}\n"
            f"GPU Firmware: \t N/A\nGPU Excluded:\t No\n")


def procfs(root: Path, files: dict[str, str]) -> Path:
    for bus, text in files.items():
        (root / bus).mkdir(parents=True)
        (root / bus / "information").write_text(text)
    return root


def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> Path:
    """``nvidia-smi`` on an otherwise empty ``PATH``: a shell script with ``body``; its arguments land in
    ``args``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / "nvidia-smi"
    exe.write_text(f'#!/bin/sh\necho "$@" > {tmp_path / "args"}\n{body}\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(bin_dir))
    return exe


@pytest.fixture
def no_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "empty-bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))


PROCFS_CASES = {
    "one GPU": ({"0000:00:1e.0": A10G}, [GPUInfo(index=3, model="NVIDIA A10G")]),
    "older driver (Blacklisted)": ({"0000:00:04.0": K80}, [GPUInfo(index=0, model="Tesla K80")]),
    "eight GPUs, minors not in bus order": (
        {bus: a100(bus, 7 - i) for i, bus in enumerate(A100_BUSES)},
        [GPUInfo(index=i, model="NVIDIA A100-SXM4-40GB") for i in range(8)]),
    "malformed lines around the fields": (
        {"0000:01:00.0": "garbage without colon\n\n:\t orphan value\nModel: \t\t Tesla T4\nDevice Minor: \t 1\n"},
        [GPUInfo(index=1, model="Tesla T4")]),
    "missing minor skipped": ({"0000:00:1e.0": A10G, "0000:01:00.0": "Model: \t\t Tesla T4\n"},
                              [GPUInfo(index=3, model="NVIDIA A10G")]),
    "non-numeric minor skipped": ({"0000:01:00.0": "Model: \t\t Tesla T4\nDevice Minor: \t ?\n"}, []),
    "excluded by the driver": ({"0000:00:1e.0": A10G.replace("GPU Excluded: \t No", "GPU Excluded: \t Yes")},
                               []),
    "repeated minor skipped": ({"0000:00:04.0": K80, "0000:00:05.0": K80.replace("0000:00:04.0", "0000:00:05.0")},
                               [GPUInfo(index=0, model="Tesla K80")]),
    "empty file": ({"0000:00:04.0": ""}, []),
}


@pytest.mark.parametrize("case", list(PROCFS_CASES))
def test_procfs_is_read_as_the_driver_writes_it(case: str, tmp_path: Path) -> None:
    files, want = PROCFS_CASES[case]
    got = read_procfs(procfs(tmp_path / "gpus", files))
    assert sorted(got.values(), key=lambda g: g.index) == want


def test_the_minor_is_the_index_and_the_bus_id_the_key(tmp_path: Path) -> None:
    got = read_procfs(procfs(tmp_path / "gpus", {bus: a100(bus, 7 - i) for i, bus in enumerate(A100_BUSES)}))
    assert got["0000:07:00.0"].index == 7 and got["0000:bd:00.0"].index == 0
    assert bus_key("00000000:BD:00.0") == bus_key("0000:bd:00.0") == "0000:bd:00.0"
    with pytest.raises(ValueError):
        bus_key("not a bus id")


def test_no_driver_and_unreadable_files_give_what_is_readable(tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    assert read_procfs(tmp_path / "absent") == {}
    root = procfs(tmp_path / "gpus", {"0000:00:1e.0": A10G})
    (root / "0000:00:1f.0" / "information").mkdir(parents=True)  # reading it fails (a directory)
    (root / "0000:00:20.0").mkdir()  # no information file at all
    procfs(root, {"0000:01:00.0": "Model: \t\t Tesla T4\n"})
    with caplog.at_level(logging.WARNING, "colo.node-agent.host"):
        assert list(read_procfs(root).values()) == [GPUInfo(index=3, model="NVIDIA A10G")]
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 2, logged
    assert "cannot read" in logged[0] and "0000:00:1f.0" in logged[0]
    assert "no valid 'Device Minor'" in logged[1] and "0000:01:00.0" in logged[1]


SMI_CASES = {
    "two GPUs": ("0, 00000000:07:00.0, NVIDIA A100-SXM4-40GB, 40960\n1, 00000000:0F:00.0, NVIDIA A100-SXM4-40GB, "
                 "40960\n", {"0000:07:00.0": (0, GPUInfo(index=0, model="NVIDIA A100-SXM4-40GB",
                                                             memory_bytes=40960 * MIB)),
                             "0000:0f:00.0": (1, GPUInfo(index=1, model="NVIDIA A100-SXM4-40GB",
                                                         memory_bytes=40960 * MIB))}),
    "comma in the name, memory N/A": ("0, 00000000:01:00.0, Odd, Name, [N/A]\n",
                                      {"0000:01:00.0": (0, GPUInfo(index=0, model="Odd, Name"))}),
    "malformed lines skipped": ("No devices were found\nx, 00000000:01:00.0, T4, 15360\n0, bad-bus, T4, 15360\n",
                                {}),
    "empty": ("", {}),
}


@pytest.mark.parametrize("case", list(SMI_CASES))
def test_nvidia_smi_csv(case: str) -> None:
    text, want = SMI_CASES[case]
    assert parse_smi(text) == want


def test_nvidia_smi_on_path_is_asked_for_csv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_smi(tmp_path, monkeypatch, "echo '0, 00000000:00:1E.0, NVIDIA A10G, 23028'")
    got = query_smi()
    assert got == {"0000:00:1e.0": (0, GPUInfo(index=0, model="NVIDIA A10G", memory_bytes=23028 * MIB))}
    assert (tmp_path / "args").read_text().split() == [
        "--query-gpu=index,pci.bus_id,name,memory.total", "--format=csv,noheader,nounits"]


@pytest.mark.parametrize(("body", "logged"), [
    ("echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.' >&2; exit 9",
     "exited 9 (NVIDIA-SMI has failed"),
    (f"exec {shutil.which('sleep')} 5", "gave no answer in"),  # exec: nothing left behind on the kill
], ids=["non-zero exit", "timeout"])
def test_a_failing_nvidia_smi_leaves_procfs(body: str, logged: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch,
                                            caplog: pytest.LogCaptureFixture) -> None:
    fake_smi(tmp_path, monkeypatch, body)
    root = procfs(tmp_path / "gpus", {"0000:00:1e.0": A10G})
    with caplog.at_level(logging.WARNING, "colo.node-agent.host"):
        assert query_smi(timeout_s=0.3) is None
        assert discover_gpus(root, timeout_s=0.3) == [GPUInfo(index=3, model="NVIDIA A10G")]
    assert logged in caplog.records[0].getMessage()


def test_nvidia_smi_memory_wins_matched_by_bus_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # minors in reverse bus order: nvidia-smi's index 0 is minor 1
    root = procfs(tmp_path / "gpus", {"0000:18:00.0": a100("0000:18:00.0", 1), "0000:28:00.0": a100("0000:28:00.0", 0)})
    fake_smi(tmp_path, monkeypatch, "echo '0, 00000000:18:00.0, NVIDIA A100-SXM4-40GB, 40960'\n"
                                    "echo '1, 00000000:28:00.0, NVIDIA A100-SXM4-40GB, 40536'")
    assert discover_gpus(root) == [GPUInfo(index=0, model="NVIDIA A100-SXM4-40GB", memory_bytes=40536 * MIB),
                                   GPUInfo(index=1, model="NVIDIA A100-SXM4-40GB", memory_bytes=40960 * MIB)]


def test_nvidia_smi_alone_and_nothing_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert merge({}, None) == []
    fake_smi(tmp_path, monkeypatch, "echo '1, 00000000:02:00.0, Tesla T4, 15360'\n"
                                    "echo '0, 00000000:01:00.0, Tesla T4, 15360'")
    assert discover_gpus(tmp_path / "no-driver") == [GPUInfo(index=0, model="Tesla T4", memory_bytes=15360 * MIB),
                                                     GPUInfo(index=1, model="Tesla T4", memory_bytes=15360 * MIB)]


def test_no_nvidia_smi_leaves_memory_unknown(tmp_path: Path, no_smi: None) -> None:
    assert query_smi() is None
    root = procfs(tmp_path / "gpus", {"0000:00:1e.0": A10G})
    assert discover_gpus(root) == [GPUInfo(index=3, model="NVIDIA A10G", memory_bytes=0)]


def test_the_setting_overrides_or_disables_discovery(tmp_path: Path, no_smi: None) -> None:
    root = procfs(tmp_path / "gpus", {"0000:00:1e.0": A10G})
    assert host_gpus("auto", root) == [GPUInfo(index=3, model="NVIDIA A10G")]
    assert host_gpus("off", root) == []
    given = '[{"index": 1, "model": "V100M32", "memory_bytes": 34359738368}, {"index": 0, "model": "V100M16"}]'
    assert host_gpus(given, root) == [GPUInfo(index=0, model="V100M16"),
                                      GPUInfo(index=1, model="V100M32", memory_bytes=32 << 30)]
    env = {f"{ENV_PREFIX}_BACKEND": "host", f"{ENV_PREFIX}_GPUS": given}
    settings = load_settings(NodeAgentSettings, ENV_PREFIX, env=env)
    assert settings.gpus == given and host_config(settings).gpus == given, "reaches the host backend"
    assert NodeAgentSettings().gpus == "auto"


@pytest.mark.parametrize(("value", "problems"), [
    ("on", ["gpus must be 'auto', 'off' or a JSON list"]),
    ('{"index": 0}', ["gpus: expected a JSON list, got dict"]),
    ('[{"model": "T4"}]', ["gpus[0]: Object missing required field `index`"]),
    ('[{"index": -1}]', ["gpus[0]: index must be >= 0, got -1"]),
    ('[{"index": 0}, {"index": 0}]', ["gpus[1]: index 0 repeated"]),
    ('[{"index": 0, "memory_bytes": -5}]', ["gpus[0]: memory_bytes must be >= 0, got -5"]),
    ('[{"index": 0, "modle": "T4"}]', ["gpus[0]: unknown field(s) 'modle'"]),
    ('[3]', ["gpus[0]: Expected `object`, got `int`"]),
    ('[{"index": "x"}, {"index": 0, "memory_bytes": -1}, {"index": 0}]',
     ["gpus[0]: Expected `int`, got `str` - at `$.index`", "gpus[1]: memory_bytes must be >= 0",
      "gpus[2]: index 0 repeated"]),
], ids=["word", "not a list", "no index", "negative index", "repeated index", "negative memory", "typo",
        "not an object", "every problem listed"])
def test_each_bad_gpus_setting_is_named(value: str, problems: list[str]) -> None:
    with pytest.raises(ValueError) as err:
        NodeAgentSettings(backend="host", gpus=value)
    text = str(err.value)
    for p in problems:
        assert p in text, text
    env = {f"{ENV_PREFIX}_BACKEND": "host", f"{ENV_PREFIX}_GPUS": value}
    with pytest.raises(SettingsError):
        load_settings(NodeAgentSettings, ENV_PREFIX, env=env)

