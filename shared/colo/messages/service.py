"""What a service reports about itself: undeliverable messages (:class:`DeadLetter`) and configuration
changes put in force or refused (:class:`ConfigApplied`, :class:`ConfigRejected`)."""

from __future__ import annotations

from colo.messages.base import Message


class DeadLetter(Message, frozen=True):
    """A message that could not be decoded or handled (subject ``dlq.<service>``)."""

    service: str
    subject: str
    reason: str
    data: str
    at: float
    headers: dict[str, str] = {}


class ConfigApplied(Message, frozen=True):
    """A service put a new configuration in force (subject ``config.applied.<service>``).

    ``version`` = first 16 hex digits of the sha256 of the effective settings (sorted JSON), the same
    for the same settings wherever they come from; ``trigger`` what caused it (``start``, ``file``,
    ``kv``); ``sources`` each layer in force and its identity (file path and content hash, KV
    bucket/key and revision); ``restart_required`` settings that differ in the new configuration but
    only take effect after a restart (the running values stay). ``at`` in clock seconds.
    """

    service: str
    version: str
    trigger: str
    at: float
    sources: dict[str, str] = {}
    restart_required: list[str] = []
    warnings: list[str] = []
    """Combinations the service accepts but advises against, with the numbers (e.g. the slo-manager's
    batch-memory admission overlapping BE memory eviction, docs/slo-manager.md)."""


class ConfigRejected(Message, frozen=True):
    """A new configuration was refused (subject ``config.rejected.<service>``): ``errors`` lists every
    problem, one per entry; the configuration ``version_in_force`` stays. ``trigger``: ``file`` or ``kv``
    (the change that was tried), ``at`` in clock seconds."""

    service: str
    trigger: str
    errors: list[str]
    version_in_force: str
    at: float
