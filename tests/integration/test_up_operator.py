"""What a new user meets under ``colo up`` (issue 14 follow-up): the REST API knows the scheduler (explain of a
bound pod answers 200), every file of ``examples/`` is admitted on a fresh cluster, a bare Pod is counted.

One ``colo up`` (embedded nats-server and redis-server, the five services and the API as processes) serves the
whole module."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p for p in (REPO / "examples").iterdir() if p.suffix in (".yaml", ".yml"))

pytestmark = pytest.mark.integration


class Up:
    """A running ``colo up``: its banner so far and the API's base URL."""

    def __init__(self, proc: subprocess.Popen[str], banner: str, api: str, state_dir: str) -> None:
        self.proc, self.banner, self.api, self.state_dir = proc, banner, api, state_dir

    def submit(self, body: str, wait_s: float = 10.0) -> tuple[int, Any]:
        resp = requests.post(f"{self.api}/v1/submit", params={"wait": str(wait_s)}, data=body.encode(),
                             headers={"Content-Type": "application/yaml"}, timeout=60)
        return resp.status_code, resp.json()

    def get(self, path: str) -> tuple[int, Any]:
        resp = requests.get(f"{self.api}{path}", timeout=30)
        return resp.status_code, resp.json()


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    tmp = tmp_path_factory.mktemp("up")
    env = {k: v for k, v in os.environ.items()
           if k not in ("COLO_NATS_URL", "COLO_REDIS_URL", "COLO_SCHEDULER_URL", "COLO_API_SCHEDULER_URL",
                        "COLO_API_TOKEN", "COLO_API_TOKEN_FILE", "COLO_HTTP_TOKEN_FILE")}
    env.update(COLO_STATE_DIR=str(tmp / "state"), NO_COLOR="1", TERM="dumb", COLUMNS="200")
    proc = subprocess.Popen([sys.executable, "-m", "colo.cli.main", "up", "--nodes-file",
                             str(REPO / "examples" / "nodes-a.json"), "--work-dir", str(tmp / "work")],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if "Ctrl-C stops everything" in line:
            break
    banner = "".join(lines)
    try:
        assert "Ctrl-C stops everything" in banner, banner
        services = json.loads((tmp / "state" / "up.json").read_text())["services"]
        yield Up(proc, banner, services["api"], str(tmp / "state"))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_bound(up: Up, ns: str, name: str, timeout_s: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    body: Any = {}
    while time.monotonic() < deadline:
        status, body = up.get(f"/v1/pods/{ns}/{name}")
        if status == 200 and body.get("node"):
            return dict(body)
        time.sleep(0.5)
    raise AssertionError(f"{ns}/{name} not bound within {timeout_s:.0f} s: {body}")


POD = """apiVersion: v1
kind: Pod
metadata: {name: solo-0, namespace: up-test}
spec:
  priority: 9500
  containers:
    - name: c
      resources:
        requests: {cpu: "1", memory: 1Gi}
        limits: {cpu: "1", memory: 1Gi}
"""


def test_banner_says_the_api_is_open(up: Up) -> None:
    assert "the API has no token" in up.banner, up.banner


def test_bare_pod_is_counted(up: Up) -> None:
    """A bare Pod used to be answered ``"pods": 0``."""
    status, out = up.submit(POD.replace("solo-0", "count-0"))
    assert status == 201, out
    assert [o["pods"] for o in out["objects"]] == [1], out


def test_explain_of_a_bound_pod(up: Up) -> None:
    """The API used to answer 503 "no scheduler URL" under ``colo up`` (the dashboard's decision panel too)."""
    status, out = up.submit(POD)
    assert status == 201, out
    _wait_bound(up, "up-test", "solo-0")
    status, decision = up.get("/v1/explain/up-test/solo-0")
    assert status == 200, decision
    assert decision.get("node"), decision


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_example_is_admitted(up: Up, path: Path) -> None:
    """``examples/quotas.yaml`` used to be refused: its parent had no min below its children's Σ min."""
    status, out = up.submit(path.read_text())
    assert status == 201, out
    refused = [o for o in out.get("objects", []) if o.get("admission") not in ("admitted", "accepted", None, "")]
    assert not refused, refused


REFUSED = """apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: team-greedy
  labels: {quota.scheduling.koordinator.sh/parent: org}
spec:
  min: {cpu: "1000", memory: 64Gi}
  namespaces: [greedy]
"""


def test_quotas_list_marks_refused_ones(up: Up) -> None:
    """The dashboard's "Elastic quotas" panel used to list a refused quota as if it were in force."""
    status, out = up.submit((REPO / "examples" / "quotas.yaml").read_text())
    assert status == 201, out
    status, out = up.submit(REFUSED)
    assert status == 422 and out["rejected"] == 1, out
    status, quotas = up.get("/v1/quotas")
    assert status == 200, quotas
    in_force = {q["name"]: q.get("in_force") for q in quotas["items"]}
    assert in_force == {"org": True, "team-a": True, "team-b": True, "team-greedy": False}, quotas


def test_explain_after_delete(up: Up, tmp_path: Path) -> None:
    """``colo explain`` of a pod deleted after it was bound (issue 14 follow-up: "unknown to this scheduler")."""
    status, out = up.submit(POD.replace("solo-0", "gone-0"))
    assert status == 201, out
    _wait_bound(up, "up-test", "gone-0")
    resp = requests.delete(f"{up.api}/v1/pods/up-test/gone-0", timeout=30)
    assert resp.status_code in (200, 202), resp.text
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and up.get("/v1/pods/up-test/gone-0")[1].get("state") != "Deleted":
        time.sleep(0.5)
    assert up.get("/v1/pods/up-test/gone-0")[1].get("state") == "Deleted"
    status, decision = up.get("/v1/explain/up-test/gone-0")
    assert status == 200, decision
    env = {**os.environ, "COLO_STATE_DIR": up.state_dir, "NO_COLOR": "1", "COLUMNS": "200"}
    for k in ("COLO_NATS_URL", "COLO_REDIS_URL", "COLO_SCHEDULER_URL"):
        env.pop(k, None)
    for ref in (["up-test/gone-0"], ["gone-0"]):
        cli = subprocess.run([sys.executable, "-m", "colo.cli.main", "explain", *ref], env=env,
                             capture_output=True, text=True, timeout=60)
        assert cli.returncode == 0, cli.stdout + cli.stderr
        assert "unknown to this scheduler" not in cli.stdout, cli.stdout


def test_explain_of_an_ambiguous_bare_name_leads_with_the_namespaces(up: Up) -> None:
    """``colo explain twin`` with ``twin`` in two namespaces used to lead with "unknown to this scheduler"."""
    for ns in ("twin-a", "twin-b"):
        status, out = up.submit(POD.replace("solo-0", "twin").replace("up-test", ns))
        assert status == 201, out
    env = {**os.environ, "COLO_STATE_DIR": up.state_dir, "NO_COLOR": "1", "COLUMNS": "300"}
    for k in ("COLO_NATS_URL", "COLO_REDIS_URL", "COLO_SCHEDULER_URL"):
        env.pop(k, None)
    cli = subprocess.run([sys.executable, "-m", "colo.cli.main", "explain", "twin"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert cli.returncode == 1, cli.stdout + cli.stderr
    assert cli.stdout.startswith("pod 'twin' is in several namespaces (twin-a, twin-b)"), cli.stdout
