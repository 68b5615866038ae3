"""HeapFreezer: survivors leave the collector's reach, young garbage is still freed, and the
periodic full collection frees cyclic garbage that was frozen alive."""

from __future__ import annotations

import gc
import time
import weakref
from collections.abc import Iterator

import pytest

from colo_scheduler.heap import HeapFreezer


class Node:
    """An object that can sit in a reference cycle and be watched with a weakref."""

    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> tuple[weakref.ref[Node], list[Node]]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a), [a, b]


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()


def test_freeze_moves_survivors_and_collects_young_garbage_first() -> None:
    freezer = HeapFreezer(interval_s=1.0, full_interval_s=0.0)
    dead_ref, holder = cycle()
    holder.clear()  # cyclic garbage, not yet collected
    alive_ref, kept = cycle()
    before = gc.get_freeze_count()
    freezer.freeze()
    assert dead_ref() is None  # the young collection freed it
    assert alive_ref() is not None and gc.get_freeze_count() > before
    kept.clear()  # dies after being frozen: only a full collection finds it
    gc.collect()
    assert alive_ref() is not None
    freezer.full()
    assert alive_ref() is None
    assert freezer.stats()["full_collections"] == 1.0 and freezer.freezes == 1


@pytest.mark.parametrize(("interval", "full", "wait", "freezes", "fulls"), [
    (0.0, 0.0, 0.0, 0, 0),      # disabled
    (10.0, 0.0, 0.0, 0, 0),     # interval not reached
    (0.01, 0.0, 0.02, 1, 0),    # freeze
    (0.01, 0.01, 0.02, 0, 1),   # the full collection is due and refreezes
], ids=["off", "not-yet", "freeze", "full"])
def test_maybe_follows_the_intervals(interval: float, full: float, wait: float, freezes: int, fulls: int) -> None:
    freezer = HeapFreezer(interval, full)
    time.sleep(wait)
    freezer.maybe()
    assert (freezer.freezes, freezer.full_collections) == (freezes, fulls)


def test_negative_intervals_are_refused() -> None:
    with pytest.raises(ValueError, match="heap freeze"):
        HeapFreezer(-1.0, 0.0)
