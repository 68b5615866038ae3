"""Property test of the API against the running service (real NATS and Redis from the fixtures): schemathesis
generates requests from the served OpenAPI document for every operation but the endless event stream
(tested in test_api_cluster.py) and checks each answer: no server error, a documented status, content type,
headers and a body matching the documented schema. Bounded by ``MAX_EXAMPLES`` per operation; the counts
(operations, cases, failures) go to ``out/test-artifacts/schemathesis.json``."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import positive_data_acceptance

from colo.messages import NodeSpec, PodRecord, PodSpec, Resources
from colo.runtime import ServiceRunner
from colo.settings import RuntimeSettings
from colo.store import Store
from colo_api import openapi
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

from .conftest import TOKEN, start_api

pytestmark = pytest.mark.integration

MAX_EXAMPLES = 30
"""Generated cases per operation (7 operations: well under a minute in all)."""
ARTIFACTS = Path(__file__).parents[2] / "out" / "test-artifacts"
COUNTS: Counter[str] = Counter()
FAILURES: list[str] = []


class _ServiceThread:
    """The API service on an event loop of its own thread (the schemathesis tests are synchronous)."""

    def __init__(self, nats_url: str, redis_url: str) -> None:
        self.prefix = f"test-{uuid.uuid4().hex[:12]}"
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="api-under-test", daemon=True)
        self.thread.start()
        settings = RuntimeSettings(nats_url=nats_url, redis_url=redis_url, store_prefix=self.prefix, sim=True)
        self.scheduler = ServiceRunner(SchedulerService(SchedulerSettings(seed=1)), settings)
        self.run(self.scheduler.start())
        self.runner: ServiceRunner = self.run(start_api(nats_url, redis_url, self.prefix,
                                                        f"http://127.0.0.1:{self.scheduler.http_port}",
                                                        admission_wait_s=0.1))
        self.store: Store = self.run(Store.connect(redis_url, prefix=self.prefix))
        self.run(self._seed())

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=60)

    async def _seed(self) -> None:
        r = Resources(cpu=8000, memory=16 * 1024**3, pods=110)
        await self.store.put_node(NodeSpec(name="n1", capacity=r, allocatable=r))
        await self.store.put_pod(PodRecord(spec=PodSpec(uid="shop-web-0", name="web-0", namespace="shop"),
                                           phase="Running", node="n1"))

    def close(self) -> None:
        async def stop() -> None:
            await self.runner.stop()
            await self.scheduler.stop()
            await self.store.delete_all()
            await self.store.close()

        self.run(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def service(nats_url: str, redis_url: str) -> Iterator[_ServiceThread]:
    s = _ServiceThread(nats_url, redis_url)
    try:
        yield s
    finally:
        s.close()
        operations = sorted(k for k in COUNTS if k != "cases")
        report = {"operations": len(operations), "cases": sum(COUNTS[k] for k in operations),
                  "failures": len(FAILURES), "per_operation": {k: COUNTS[k] for k in operations},
                  "max_examples": MAX_EXAMPLES, "failed": FAILURES[:20]}
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / "schemathesis.json").write_text(json.dumps(report, indent=2) + "\n")
        print(f"\nschemathesis: {report['operations']} operations, {report['cases']} cases, "
              f"{report['failures']} failures")


schema = schemathesis.openapi.from_dict(openapi.document()).exclude(path="/v1/events")
"""The document the service serves (test_openapi_docs.py checks the served one is this one)."""


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_openapi_document(case: Any, service: _ServiceThread) -> None:
    COUNTS[f"{case.operation.method.upper()} {case.operation.path}"] += 1
    # A manifest's validity goes beyond what JSON Schema says (quantities, names, references between objects):
    # a schema-valid body may rightly get 422, so the positive-data check is off for submit alone.
    excluded = [positive_data_acceptance] if case.operation.path == "/v1/submit" else []
    try:
        case.call_and_validate(base_url=f"http://127.0.0.1:{service.runner.http_port}",
                               headers={"Authorization": f"Bearer {TOKEN}"}, excluded_checks=excluded)
    except BaseException as exc:
        FAILURES.append(f"{case.method} {case.path}: {str(exc)[:300]}")
        raise
