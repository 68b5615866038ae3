"""Inputs and outputs shared by the strategies."""

from __future__ import annotations

from dataclasses import dataclass, field

from colo.messages import QoSClass


@dataclass(frozen=True)
class PodView:
    """What a strategy sees of one pod: class, priority and usage/requests.

    ``cpu_*`` milli-cores, ``memory_*`` bytes; ``priority`` the Kubernetes priority value (lower is evicted
    first); ``cpu_limit``/``memory_limit`` 0 = unlimited.
    """

    uid: str
    qos: QoSClass
    priority: int = 0
    cpu_used: int = 0
    memory_used: int = 0
    cpu_request: int = 0
    memory_request: int = 0
    cpu_limit: int = 0
    memory_limit: int = 0


@dataclass(frozen=True)
class Eviction:
    """Evict pod ``uid``; ``reason`` is the Kubernetes-style reason, ``message`` says why with numbers."""

    uid: str
    reason: str
    message: str


@dataclass(frozen=True)
class EvictPlan:
    """An eviction strategy's result: the amount to release (milli-cores or bytes) and the victims chosen."""

    release: int = 0
    evictions: list[Eviction] = field(default_factory=list)
    skipped: str = ""
