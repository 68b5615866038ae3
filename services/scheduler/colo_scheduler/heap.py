"""Keeping Python's cyclic garbage collector off the scheduler's latency path.

The scheduler holds every bound pod (spec, scheduling state, decision record): some tens of
container objects per pod, a million or more on a busy cluster. CPython runs a full (generation
2) collection whenever a quarter of that heap's size has been promoted since the last one;
with pods arriving and finishing at thousands per second that is every few seconds, and each
pass over the whole heap stops the process for 100–400 ms (measured with bench/scheduler_e2e.py
on 1,000 nodes and 27,000 pods: eight pauses in nine seconds, the longest 388 ms).

:class:`HeapFreezer` moves the survivors to the permanent generation (:func:`gc.freeze`) every
``interval_s``, right after a young collection (:func:`gc.collect` of generation 1, which frees
what already became cyclic garbage), so that collections only ever walk objects younger than
the last freeze. Cyclic garbage that was still alive at a freeze is no longer collected until
:meth:`HeapFreezer.full`, which unfreezes and runs one full collection every
``full_interval_s`` (one long pause per interval instead of one every few seconds). The same
technique as Instagram's ``gc.freeze()`` after warm-up (CPython docs of :func:`gc.freeze`).
"""

from __future__ import annotations

import gc
import logging
import time

log = logging.getLogger("colo.scheduler.heap")


class HeapFreezer:
    """Freezes the heap every ``interval_s`` and collects it in full every ``full_interval_s``
    (seconds of :func:`time.monotonic`; 0 disables freezing, resp. the full collections).

    Raises ValueError for negative intervals.
    """

    def __init__(self, interval_s: float, full_interval_s: float) -> None:
        if interval_s < 0 or full_interval_s < 0:
            raise ValueError(f"heap freeze intervals must be >= 0, got {interval_s}, {full_interval_s}")
        self.interval_s = interval_s
        self.full_interval_s = full_interval_s
        now = time.monotonic()
        self._last_freeze = now
        self._last_full = now
        self.freezes = 0
        self.full_collections = 0
        self.last_full_ms = 0.0

    def maybe(self) -> None:
        """Freeze when ``interval_s`` passed since the last freeze; a full collection when
        ``full_interval_s`` passed since the last one. Call between scheduling cycles."""
        if self.interval_s <= 0:
            return
        now = time.monotonic()
        if self.full_interval_s > 0 and now - self._last_full >= self.full_interval_s:
            self.full()
        elif now - self._last_freeze >= self.interval_s:
            self.freeze()

    def freeze(self) -> None:
        """Collect the young generations, then move every tracked object to the permanent one."""
        gc.collect(1)
        gc.freeze()
        self._last_freeze = time.monotonic()
        self.freezes += 1

    def full(self) -> None:
        """Unfreeze, collect everything (one long pause), freeze again."""
        t0 = time.perf_counter()
        gc.unfreeze()
        collected = gc.collect()
        gc.freeze()
        self.last_full_ms = (time.perf_counter() - t0) * 1e3
        self._last_full = self._last_freeze = time.monotonic()
        self.full_collections += 1
        log.info("full garbage collection: %d objects freed in %.0f ms", collected, self.last_full_ms)

    def stats(self) -> dict[str, float]:
        """``frozen`` objects now, ``freezes``, ``full_collections``, ``last_full_ms``."""
        return {"frozen": float(gc.get_freeze_count()), "freezes": float(self.freezes),
                "full_collections": float(self.full_collections), "last_full_ms": round(self.last_full_ms, 1)}
