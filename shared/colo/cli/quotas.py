"""``colo get quotas``: the elastic quotas as the scheduler last published them (docs/cli.md, docs/quota.md).

Read from NATS, not Redis: the ``COLO_QUOTAS`` stream keeps the latest :class:`colo.messages.QuotaStatus`
per quota (``quota.status.<name>``, one message per subject), published by the scheduler whenever a
quota's used, request, runtime or pod counts change (at most once a cycle).
"""

from __future__ import annotations

from rich.table import Table

from colo import subjects
from colo.codec import decode
from colo.messages import RESOURCE_NAMES, QuotaStatus
from colo.quantity import format_cpu, format_memory
from colo.settings import RuntimeSettings

_CPU = frozenset({"cpu", "batch_cpu", "mid_cpu"})
_MEMORY = frozenset({"memory", "batch_memory", "mid_memory"})


async def latest_quota_statuses(nats_url: str, timeout_s: float = 5.0,
                                settings: RuntimeSettings | None = None) -> list[QuotaStatus]:
    """The latest QuotaStatus of every quota in the stream, sorted by name ([] when none was published);
    ``settings``: the link's credentials and TLS (:func:`colo.connections.nats_options`)."""
    import nats
    import nats.js.errors

    from colo.connections import nats_options, nats_servers

    nc = await nats.connect(servers=nats_servers(nats_url), connect_timeout=timeout_s, allow_reconnect=False,
                            **nats_options(settings))
    try:
        js = nc.jetstream(timeout=timeout_s)
        stream = subjects.QUOTA_STATUS.stream
        assert stream is not None
        try:
            info = await js.stream_info(stream, subjects_filter=subjects.QUOTA_STATUS.wildcard)
        except nats.js.errors.NotFoundError:
            return []
        out: list[QuotaStatus] = []
        for subject in sorted((info.state.subjects or {})):
            raw = await js.get_last_msg(stream, subject)
            if raw.data:
                out.append(decode(raw.data, QuotaStatus))
        return sorted(out, key=lambda s: s.name)
    finally:
        await nc.close()


def amounts(values: dict[str, int]) -> str:
    """``cpu=2 memory=4Gi pods=10``: the resources of a quota vector, cores and binary bytes; ``-`` for none."""
    parts = []
    for res in RESOURCE_NAMES:
        if res not in values:
            continue
        v = values[res]
        shown = format_cpu(v) if res in _CPU else format_memory(v) if res in _MEMORY else str(v)
        parts.append(f"{res}={shown}")
    return " ".join(parts) or "-"


def over(s: QuotaStatus) -> str:
    """The ``over`` cell: each resource whose used exceeds the runtime (``cpu>max`` when also over the max,
    e.g. after the max was lowered), ``-`` when none. The scheduler evicts such a quota's preemptible pods
    back within its runtime (docs/quota.md "Reclaim"); one still over holds only pods it may not evict
    (non-preemptible, or its min), or its evictions are under way."""
    parts = []
    for res in RESOURCE_NAMES:
        used, runtime = s.used.get(res, 0), s.runtime.get(res)
        if runtime is not None and used > runtime:
            parts.append(f"{res}>max" if res in s.max and used > s.max[res] else f"{res}>runtime")
    return " ".join(parts) or "-"


def quotas_table(statuses: list[QuotaStatus]) -> Table:
    """One row per quota: name, parent, min, max (absent = unlimited), used, runtime, over (:func:`over`),
    pods (placed), pending (queued pods)."""
    t = Table(title=f"{len(statuses)} quotas")
    for col in ("name", "parent", "min", "max", "used", "runtime", "over", "pods", "pending"):
        t.add_column(col, justify="right" if col in ("pods", "pending") else "left", overflow="fold")
    for s in statuses:
        t.add_row(s.name, s.parent, amounts(s.min), amounts(s.max) if s.max else "unlimited", amounts(s.used),
                  amounts(s.runtime), over(s), str(s.pods), str(s.pending))
    return t
