"""Issue 13, gang groups that name one another asymmetrically or in a cycle (``a`` names ``b``, ``b`` names
``c``, ``c`` names ``a``): they form one group. Before, the Permit of ``a``'s last member saw its own group
``{a, b}`` satisfied and let every waiting member of ``b`` bind, while ``b``'s own group needed ``c``, which
never fitted: ``b`` stayed bound without ``c`` (a partial gang group bound)."""

from __future__ import annotations

import pytest
from gang_helpers import add_members, allocated_cpu, cluster, gang

GROUPS = {"a": ("a", "b"), "b": ("b", "c"), "c": ("c", "a")}
"""A cycle of gang groups."""
CHAIN = {"a": ("a", "b"), "b": ("b", "c"), "c": ()}
"""An asymmetric chain: ``c`` names no group."""


@pytest.mark.parametrize("groups", [GROUPS, CHAIN], ids=["cycle", "chain"])
@pytest.mark.parametrize("mode", ["Strict", "NonStrict"])
@pytest.mark.parametrize("first", ["a", "b", "c"])
@pytest.mark.parametrize("c_fits", [False, True], ids=["c-never-fits", "c-fits"])
def test_gangs_naming_each_other_bind_all_or_none(groups: dict[str, tuple[str, ...]], mode: str, first: str,
                                                  c_fits: bool) -> None:
    s = cluster(1, cpu=16_000)
    specs = {name: gang(name, 2, mode, groups=g, created_at=0.5 if name == first else 1.0)
             for name, g in groups.items()}
    for name, spec in specs.items():
        add_members(s, spec, 2, 1.0, cpu=1000 if c_fits or name != "c" else 50_000)
    placed: set[str] = set()
    for t in (2.0, 3.0, 4.0, 700.0, 701.0):  # 700: past the first wait timeout (600 s), members retried
        placed |= {p.pod.uid.split("-")[0] for p in s.schedule_cycle(t).placements}
        assert allocated_cpu(s) == 1000 * (len(s.waiting) + 2 * len(placed))
    assert placed == ({"a", "b", "c"} if c_fits else set()), f"bound: {sorted(placed)}"
