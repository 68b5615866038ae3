"""``colo get migrations``: the descheduler's jobs read back from the store, one row each."""

from __future__ import annotations

import time
from typing import Any

import pytest
from rich.console import Console

from colo.cli import main as cli
from colo.cli.migrations import age, migrations_table
from colo.messages import PodMigrationJob
from colo.migrations import list_jobs, save_job
from colo.settings import RuntimeSettings
from colo.store import Store


def _text(table: Any) -> str:
    console = Console(record=True, width=400)
    console.print(table)
    return console.export_text()


@pytest.mark.parametrize(("seconds", "text"), [(-3, "0s"), (42, "42s"), (60, "1m"), (7 * 60 + 59, "7m"),
                                               (3 * 3600, "3h"), (2 * 86400 + 5, "2d")])
def test_age(seconds: float, text: str) -> None:
    assert age(seconds) == text


@pytest.mark.integration
async def test_get_migrations_reads_the_store(store: Store, redis_url: str) -> None:
    now = time.time()
    running = PodMigrationJob(id="mig-a-1.000", uid="a", name="web-0", namespace="shop", workload="shop/web",
                              source="hot", target="cold", phase="Running", reservation="rsv-mig-a-1.000",
                              reason="evicted from hot, waiting for the replacement on cold", created_at=now - 7230)
    failed = PodMigrationJob(id="mig-b-2.000", uid="b", name="db-0", source="hot", target="cold", phase="Failed",
                             reason="no replacement bound on the reservation within 300 s", created_at=now - 630)
    await save_job(store, failed, 3600)
    await save_job(store, running, 3600)
    assert [j.id for j in await list_jobs(store)] == ["mig-a-1.000", "mig-b-2.000"]
    assert await store.redis.ttl(store.keys.migration_job(failed.id)) > 0  # a finished job expires
    assert await store.redis.ttl(store.keys.migration_job(running.id)) == -1
    settings = RuntimeSettings(redis_url=redis_url, store_prefix=store.keys.prefix)
    text = _text(await cli._get("migrations", cli.Connection(settings, "env", (), "")))
    rows = [[c.strip() for c in line.split("│")][1:-1] for line in text.splitlines() if "mig-" in line]
    assert rows[0] == ["mig-a-1.000", "Running", "shop/web-0 (a)", "hot", "cold", "rsv-mig-a-1.000", "2h",
                       "evicted from hot, waiting for the replacement on cold"]
    assert rows[1][:7] == ["mig-b-2.000", "Failed", "default/db-0 (b)", "hot", "cold", "-", "10m"]
    assert "2 migrations" in text
    assert cli.build_parser().parse_args(["get", "migrations"]).what == "migrations"


def test_empty_table() -> None:
    assert "0 migrations" in _text(migrations_table([], 0.0))
