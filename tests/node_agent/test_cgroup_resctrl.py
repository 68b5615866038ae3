"""resctrl arithmetic and discovery on a fake /sys/fs/resctrl (REFERENCE.md §5 LLC / memory bandwidth)."""

from __future__ import annotations

import pytest

from colo_node_agent.cgroups import MemoryFS
from colo_node_agent.cgroups.resctrl import ResctrlInfo, ensure_groups, l3_mask, mba_percent, read_info


@pytest.mark.parametrize(("cbm", "start", "end", "min_bits", "want"), [
    (0x3FF, 10, 80, 1, 0xFE),      # REFERENCE.md §5 example
    (0x7FF, 0, 30, 1, 0xF),        # REFERENCE.md §5 example (BE default)
    (0x7FF, 0, 100, 1, 0x7FF),     # LS/LSR default: every way
    (0xFFFFF, 0, 30, 1, 0x3F),     # 20 ways: ceil(6.0) = 6
    (0xFFF, 50, 100, 1, 0xFC0),    # upper half of 12 ways
    (0x7FF, 0, 5, 2, 0x3),         # 1 way widened to min_cbm_bits 2
    (0x7FF, 99, 100, 2, 0x600),    # at the top: widened downwards
], ids=["ref-10-80", "ref-0-30", "all", "20-ways", "upper-half", "min-bits", "min-bits-top"])
def test_l3_mask(cbm: int, start: int, end: int, min_bits: int, want: int) -> None:
    assert l3_mask(cbm, start, end, min_bits) == want


@pytest.mark.parametrize(("start", "end"), [(30, 30), (50, 10), (0, 101), (-1, 30)],
                         ids=["empty", "reversed", "over-100", "negative"])
def test_l3_mask_rejects(start: int, end: int) -> None:
    with pytest.raises(ValueError):
        l3_mask(0x7FF, start, end)


@pytest.mark.parametrize(("percent", "gran", "min_bw", "want"), [
    (100, 10, 10, 100), (40, 10, 10, 40), (35, 10, 10, 40), (1, 10, 10, 10), (5, 10, 20, 20), (91, 10, 10, 100),
], ids=["full", "multiple", "rounded-up", "tiny", "min-bandwidth", "rounded-to-100"])
def test_mba_percent(percent: int, gran: int, min_bw: int, want: int) -> None:
    assert mba_percent(percent, gran, min_bw) == want


@pytest.mark.parametrize("bad", [0, 101, -5])
def test_mba_percent_rejects(bad: int) -> None:
    with pytest.raises(ValueError):
        mba_percent(bad)


def fake_resctrl(mba: bool = True) -> MemoryFS:
    root = "L3:0=7ff;1=7ff\nMB:0=100;1=100\n" if mba else "L3:0=7ff;1=7ff\n"
    fs = MemoryFS(dir_template={"schemata": root, "tasks": ""})
    fs.seed("schemata", root)
    fs.seed("tasks", "")
    fs.seed("info/L3/cbm_mask", "7ff\n")
    fs.seed("info/L3/min_cbm_bits", "1\n")
    if mba:
        fs.seed("info/MB/min_bandwidth", "10\n")
        fs.seed("info/MB/bandwidth_gran", "10\n")
    return fs


def test_read_info_and_groups() -> None:
    fs = fake_resctrl()
    assert read_info(fs) == ResctrlInfo(0x7FF, 1, (0, 1), (0, 1), 10, 10)
    assert read_info(fake_resctrl(mba=False)).mb_domains == ()
    assert ensure_groups(fs, ("LSR", "LS", "BE")) == []
    assert fs.read("BE/schemata").startswith("L3:0=7ff")
    assert ensure_groups(fs, ("BE",)) == []


def test_no_resctrl_raises() -> None:
    with pytest.raises(OSError):
        read_info(MemoryFS())
