"""``colo reserve`` (arguments → ReservationSpec, published on reservation.submitted) and ``colo get reservations``."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from rich.console import Console

from colo import subjects
from colo.cli import main as cli
from colo.cli.reserve import build_spec, parse_duration, reservations_table
from colo.messages import NodeResource, NodeSpec, ReservationOwner, ReservationSpec, Resources
from colo.reservations import ReservationStore
from colo.settings import RuntimeSettings
from colo.store import Store

GI = 2**30


def _text(table: Any) -> str:
    console = Console(record=True, width=400)
    console.print(table)
    return console.export_text()


def args(*argv: str) -> Any:
    return cli.build_parser().parse_args(["reserve", *argv])


@pytest.mark.parametrize(("text", "seconds"), [("90", 90.0), ("90s", 90.0), ("15m", 900.0), ("2h", 7200.0),
                                               ("1.5d", 129600.0)])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(["r1", "--cpu", "4", "--memory", "8Gi", "--owner-app", "shop/web", "--ttl", "2h", "--reusable"],
                     ReservationSpec(name="r1", requests=Resources(cpu=4000, memory=8 * GI),
                                     owners=[ReservationOwner(workload="shop/web")], allocate_once=False,
                                     ttl_s=7200.0, created_at=100.0), id="owner-app-reusable"),
        pytest.param(["r2", "--cpu", "500m", "--owner-uid", "pod-1", "--node", "n3"],
                     ReservationSpec(name="r2", node="n3", requests=Resources(cpu=500),
                                     owners=[ReservationOwner(uid="pod-1")], ttl_s=3600.0, created_at=100.0),
                     id="owner-uid-on-a-node"),
        pytest.param(["r3", "--memory", "1Gi", "--owner-label", "team=a", "--owner-label", "tier=x",
                      "--namespace", "ml"],
                     ReservationSpec(name="r3", namespace="ml", requests=Resources(memory=GI),
                                     owners=[ReservationOwner(namespace="ml", match_labels={"team": "a", "tier": "x"})],
                                     ttl_s=3600.0, created_at=100.0), id="owner-labels-in-a-namespace"),
        pytest.param(["r4", "--batch-cpu", "16", "--batch-memory", "32Gi", "--owner-app", "ml/train"],
                     ReservationSpec(name="r4", requests=Resources(batch_cpu=16_000, batch_memory=32 * GI),
                                     owners=[ReservationOwner(workload="ml/train")], ttl_s=3600.0, created_at=100.0),
                     id="batch-room"),
    ],
)
def test_arguments_make_the_spec(argv: list[str], expected: ReservationSpec) -> None:
    assert build_spec(args(*argv), 100.0) == (expected, [])


@pytest.mark.parametrize(
    ("argv", "problems"),
    [
        pytest.param(["r1", "--cpu", "lots", "--owner-uid", "p"], ["--cpu:"], id="cpu"),
        pytest.param(["r1", "--owner-app", "web"], ["--owner-app: 'web' is not NAMESPACE/APP"], id="owner-app"),
        pytest.param(["r1", "--owner-label", "team"], ["--owner-label: 'team' is not KEY=VALUE"], id="label"),
        pytest.param(["r1", "--cpu", "1"], ["an owner is needed"], id="no-owner"),
        pytest.param(["r1", "--owner-uid", "p", "--ttl", "soon"], ["--ttl:"], id="ttl"),
        pytest.param(["R_1", "--owner-uid", "p"], ["name:"], id="name"),
        pytest.param(["r1", "--cpu", "x", "--memory", "y", "--ttl", "z"], ["--cpu:", "--memory:", "--ttl:"],
                     id="every-problem"),
    ],
)
def test_bad_arguments_submit_nothing(argv: list[str], problems: list[str], capsys: Any) -> None:
    spec, got = build_spec(args(*argv), 100.0)
    assert spec is None and len(got) == len(problems)
    assert all(g.startswith(p) for g, p in zip(got, problems)), got
    assert cli.main(["reserve", *argv]) == 1  # before connecting to anything
    assert "nothing submitted" in capsys.readouterr().out


@pytest.mark.integration
async def test_reserve_publishes_and_get_lists(bus_factory: Any, store: Store, nats_url: str, redis_url: str,
                                               monkeypatch: Any) -> None:
    monkeypatch.setenv("COLO_NATS_URL", nats_url)
    monkeypatch.setenv("COLO_REDIS_URL", redis_url)
    got: list[ReservationSpec] = []

    async def on_reservation(m: ReservationSpec) -> None:
        got.append(m)

    tester = await bus_factory("tester")
    await tester.subscribe(subjects.RESERVATION_SUBMITTED, on_reservation, durable="rsv")
    rc = await asyncio.to_thread(cli.main, ["reserve", "gpu-hold", "--cpu", "4", "--memory", "8Gi",
                                            "--owner-app", "ml/train", "--ttl", "2h"])
    assert rc == 0
    await tester.settle()
    assert len(got) == 1 and got[0].name == "gpu-hold" and got[0].requests == Resources(cpu=4000, memory=8 * GI)
    now = time.time()
    rs = ReservationStore(store.redis, store.keys)
    alloc = Resources(cpu=8000, memory=16 * GI)
    await store.put_node(NodeSpec(name="n1", capacity=alloc, allocatable=alloc))
    await rs.put_pending(got[0], now, "0/1 nodes are available: 1 Insufficient cpu")
    await rs.reserve("held", "n1", Resources(cpu=2000, memory=GI), at=now, ttl_s=600, allocate_once=False,
                     owners=(ReservationOwner(owner_kind="Job", owner_name="etl"),), created_at=now + 1)
    settings = RuntimeSettings(redis_url=redis_url, store_prefix=store.keys.prefix)
    text = _text(await cli._get("reservations", cli.Connection(settings, "env", (), "")))
    rows = [[c.strip() for c in line.split("│")][1:-1] for line in text.splitlines()
            if "gpu-hold" in line or "held" in line]
    assert rows[0][:10] == ["gpu-hold", "Pending", "-", "app=ml/train", "4", "8Gi", "-", "-", "once", "in 1h"]
    assert rows[0][11].startswith("0/1 nodes are available")
    assert rows[1][:10] == ["held", "Available", "n1", "Job/etl", "2", "1Gi", "-", "-", "reusable", "in 9m"]
    assert "2 reservations" in text
    assert cli.build_parser().parse_args(["get", "reservations"]).what == "reservations"


def test_empty_table() -> None:
    assert "0 reservations" in _text(reservations_table([], 0.0))


@pytest.mark.integration
async def test_batch_room_is_listed_and_delete_reservation_aborts_and_frees_it(store: Store, redis_url: str,
                                                                               monkeypatch: Any, capsys: Any) -> None:
    """``colo get reservations`` shows batch amounts; ``colo delete reservation`` ends an Available one
    (its room back on the node) and a Pending one as Aborted; an unknown name exits 1."""
    monkeypatch.setenv("COLO_REDIS_URL", redis_url)
    monkeypatch.setenv("COLO_STORE_PREFIX", store.keys.prefix)
    now = time.time()
    rs = ReservationStore(store.redis, store.keys)
    alloc = Resources(cpu=8000, memory=16 * GI)
    await store.put_node(NodeSpec(name="n1", capacity=alloc, allocatable=alloc))
    await store.put_node_resource(NodeResource(node="n1", batch_cpu=32000, batch_memory=64 * GI))
    held = Resources(batch_cpu=16000, batch_memory=32 * GI)
    assert (await rs.reserve("batch-room", "n1", held, at=now, ttl_s=600,
                             owners=(ReservationOwner(owner_kind="Job", owner_name="train"),))).ok
    await rs.put_pending(ReservationSpec(name="later", owners=[ReservationOwner(workload="ml/x")],
                                         requests=Resources(cpu=1000), created_at=now), now, "waiting")
    settings = RuntimeSettings(redis_url=redis_url, store_prefix=store.keys.prefix)
    text = _text(await cli._get("reservations", cli.Connection(settings, "env", (), "")))
    (row,) = [[c.strip() for c in line.split("│")][1:-1] for line in text.splitlines() if "batch-room" in line]
    assert row[4:8] == ["0", "0", "16", "32Gi"]
    assert (await store.allocated("n1")).batch_cpu == 16000
    assert await asyncio.to_thread(cli.main, ["delete", "reservation", "batch-room"]) == 0
    rec = await rs.get("batch-room")
    assert rec is not None and (rec.state, rec.reason) == ("Aborted", "deleted by colo delete")
    assert (await store.allocated("n1")).batch_cpu == 0
    assert await asyncio.to_thread(cli.main, ["delete", "reservation", "later"]) == 0
    pending = await rs.get("later")
    assert pending is not None and pending.state == "Aborted" and await rs.pending() == []
    assert await asyncio.to_thread(cli.main, ["delete", "reservation", "batch-room"]) == 0
    assert "already ended: Aborted" in capsys.readouterr().out
    assert await asyncio.to_thread(cli.main, ["delete", "reservation", "nope"]) == 1
