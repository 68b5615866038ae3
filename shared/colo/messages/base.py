"""The base of every wire message and the Koordinator class vocabulary (REFERENCE.md §1)."""

from __future__ import annotations

from typing import Literal

import msgspec

PriorityClass = Literal["prod", "mid", "batch", "free", "none"]
"""Koordinator priority classes (REFERENCE.md §1)."""

QoSClass = Literal["SYSTEM", "LSE", "LSR", "LS", "BE"]
"""Koordinator QoS classes (REFERENCE.md §1)."""

PodPhase = Literal["Pending", "Running", "Succeeded", "Failed"]
"""Kubernetes pod phases."""


class Message(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Base of every wire message: frozen, keyword-only, defaults omitted on the wire, unknown fields ignored."""
