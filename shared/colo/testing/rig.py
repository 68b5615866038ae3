"""A service driven tick by tick in a test: the service on its own bus, a client bus that collects what it
publishes (``seen``, by subject family) and the virtual clock both share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from colo.bus import Bus
from colo.clock import VirtualClock


class Ticking(Protocol):
    """A service with a tick loop step (seconds of clock time in, its counters out)."""

    async def tick(self, now: float) -> dict[str, float]: ...


S = TypeVar("S", bound=Ticking)


@dataclass(kw_only=True)
class TickRig(Generic[S]):
    """``service`` under test, its ``bus``, the test's ``client`` bus and the shared ``clock``; subclasses add
    what their service needs (a store, a key-value bucket)."""

    service: S
    bus: Bus
    client: Bus
    clock: VirtualClock
    seen: dict[str, list[Any]] = field(default_factory=dict)

    async def settle(self) -> None:
        """Wait until both buses have handled every message delivered so far (20 s at most each)."""
        await self.bus.settle(timeout_s=20)
        await self.client.settle(timeout_s=20)

    async def tick(self, now: float) -> dict[str, float]:
        """Move the clock to ``now`` (seconds), settle, run one tick of the service, settle; its counters."""
        self.clock.advance_to(now)
        await self.settle()
        stats = await self.service.tick(now)
        await self.settle()
        return stats
