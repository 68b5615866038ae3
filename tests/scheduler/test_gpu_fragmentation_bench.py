"""Smoke run of bench/gpu_fragmentation.py on a tiny node and pod list of the trace's schemas (real files)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "gpu_fragmentation.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_fragmentation_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

NODES = """sn,cpu_milli,memory_mib,gpu,model
n0,64000,262144,2,P100
n1,96000,393216,8,G2
n2,104000,524288,2,T4
n3,32000,131072,4,V100M16
n4,8000,32768,0,
"""
PODS = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p0,12000,16384,1,1000,,LS,Running,0,10,0
p1,6000,12288,1,460,,LS,Running,0,10,0
p2,3152,8192,1,810,,LS,Running,0,10,0
p3,12500,20480,0,0,,BE,Running,0,10,0
p4,8000,32768,2,1000,,LS,Running,0,10,0
p5,16000,65536,8,1000,,LS,Running,0,10,0
p6,4000,4096,1,320,T4|P100,LS,Running,0,10,0
"""


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str, pods: str = PODS) -> dict[str, Any]:
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "pods.csv").write_text(pods)
    code = _bench().main(["--nodes", str(tmp_path / "nodes.csv"), "--pods", str(tmp_path / "pods.csv"),
                          "--seeds", "2", *extra])
    assert code == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    return result


def test_bench_runs_every_policy_on_a_tiny_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = _run(tmp_path, capsys, "--curve")
    assert result["gpus"] == 16 and result["nodes"] == 4  # the CPU-only node is left out
    assert set(result["policies"]) == {"Random", "DotProd", "GpuClustering", "GpuPacking", "BestFit", "FGD",
                                       "FGD-exact", "Ours"}
    for name, row in result["policies"].items():
        assert 0 < row["alloc_pct_at_100"] <= row["alloc_pct_at_130"] <= 100, name
        assert row["pods_per_s"] > 0
        assert "paper_alloc_pct_at_100" not in row  # the paper's figures are for the full trace only
    assert result["policies"]["BestFit"]["unallocated_reduction_vs_bestfit_pct_at_130"] == 0.0


def test_bench_workload_variant_and_random_ties(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = _run(tmp_path, capsys, "--workload", "gpushare80", "--ties", "random", "--policies", "FGD,Ours")
    assert result["workload"] == "gpushare80" and result["ties"] == "random"
    assert set(result["policies"]) == {"FGD", "Ours"}


def test_bench_reports_bad_rows_and_policies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _run(tmp_path, capsys, "--policies", "FGD,Nope")
    assert "Nope" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"pods.csv:6.*num_gpu=2 gpu_milli=500"):
        _run(tmp_path, capsys, pods=PODS.replace("p4,8000,32768,2,1000", "p4,8000,32768,2,500"))
