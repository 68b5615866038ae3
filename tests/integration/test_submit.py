"""``colo submit`` against a real nats-server: each object of a mixed manifest on its subject, PodGroups and
quotas before the workloads and pods of the same file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from colo import subjects
from colo.cli.submit import describe, publications, publish
from colo.manifests import load_manifest
from colo.testing.fixtures import BusFactory

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).parents[2] / "examples"


async def test_every_kind_published_on_its_subject_in_order(bus_factory: BusFactory, nats_url: str,
                                                           tmp_path: Path) -> None:
    text = "\n---\n".join((EXAMPLES / name).read_text() for name in (
        "podgroups.yaml", "quotas.yaml", "reservation.yaml", "job-gang.yaml", "pods.yaml"))
    path = tmp_path / "all.yaml"
    path.write_text(text)
    manifest = load_manifest(path, now=5.0)
    await publish(publications(manifest), nats_url, connect_attempts=1)

    client = await bus_factory("test-client")
    seen: list[tuple[str, Any]] = []

    def sink(name: str) -> Any:
        async def collect(msg: Any, info: Any) -> None:
            seen.append((name, msg, info.stream_seq))  # type: ignore[arg-type]
        return collect

    for name, subject in (("quota", subjects.QUOTA_SPEC), ("podgroup", subjects.PODGROUP_SUBMITTED),
                          ("reservation", subjects.RESERVATION_SUBMITTED), ("workload", subjects.WORKLOAD_SUBMITTED),
                          ("pod", subjects.POD_SUBMITTED)):
        await client.subscribe(subject, sink(name), durable=name)
    await client.settle(timeout_s=20)
    kinds = [name for name, *_ in seen]
    assert kinds.count("quota") == 3 and kinds.count("podgroup") == 2 and kinds.count("reservation") == 1
    assert kinds.count("workload") == 3 and kinds.count("pod") == len(manifest.pods) > 0
    assert sorted(m.name for n, m, *_ in seen if n == "quota") == ["org", "team-a", "team-b"]
    job = next(m for n, m, *_ in seen if n == "workload" and m.kind == "Job")
    assert job.pod_group is not None and job.pod_group.min_member == 8 and describe(job) == "job/train (8 pods)"
    # the PodGroups share a stream with the workloads: published (and so delivered) before them
    jobs_stream = [(n, seq) for n, _, seq in seen if n in ("podgroup", "workload", "reservation")]  # type: ignore[misc]
    assert [n for n, _ in sorted(jobs_stream, key=lambda x: x[1])] == ["podgroup", "podgroup", "reservation",
                                                                        "workload", "workload", "workload"]
