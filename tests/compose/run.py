"""``make compose-test``: the compose stack of compose.yaml, run for real on a Docker Engine started here.

Steps (each timed; the summary goes to ``out/compose-test/summary.txt``, the daemon's and the stack's logs
beside it):

1. start a private dockerd (:mod:`dockerd`; state cached in ``~/.cache/colo/compose-test/docker``);
2. make the base images available: present, pulled, or local stand-ins (:mod:`standins`);
3. ``colo security init DIR --compose`` (a fresh CA, certificates and users each run), ``docker compose up
   --build -d`` with compose.secure.yaml merged, and wait for every healthcheck; then from the host: NATS and
   Redis refuse clients without credentials, ``/metrics`` of every service answers 401 without the token
   (:mod:`security_checks`);
4. ``colo submit`` a first batch of pods from the host; wait until every one is Running on a node;
5. ``docker compose kill scheduler``; submit a second batch while it is down (``--no-wait``); start it again;
6. submit a third batch; wait until every pod of the three batches is Running on a node, each exactly once;
7. ``docker compose down -v``; stop the daemon.

Step 7 runs whatever failed before, and checks that no container, network or volume of the project is left. Exit status 0 when every check held, 1 otherwise.
``COMPOSE_TEST_OVERRIDES`` (paths separated by ``:``) adds compose files merged after compose.yaml;
``--insecure`` (``make compose-test COMPOSE_SECURE=0``) runs compose.yaml alone, open NATS and Redis, as a
laptop user starts it with plain ``docker compose up``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import security_checks
import yaml
from dockerd import Dockerd
from stack import Stack, base_images
from standins import ensure_base_images

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "compose-test"
_RUNNING_TIMEOUT_S = 180.0


class Summary:
    """Step lines with wall times, written to ``path`` as they happen (a run cut short still leaves them)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.start = time.monotonic()
        self.lines: list[str] = []
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")

    def log(self, line: str) -> None:
        stamp = f"[{time.monotonic() - self.start:7.1f}s]"
        print(f"{stamp} {line}", flush=True)

    def add(self, line: str) -> None:
        self.lines.append(line)
        self.log(line)
        self.path.write_text("\n".join(self.lines) + "\n")

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        t0 = time.monotonic()
        self.log(f"-- {name}")
        try:
            yield
        except BaseException:
            self.add(f"FAIL  {name:<58} {time.monotonic() - t0:7.1f} s")
            raise
        self.add(f"ok    {name:<58} {time.monotonic() - t0:7.1f} s")


def pods_manifest(batch: int, count: int) -> str:
    """A ``kind: List`` of ``count`` small pods ``b<batch>-<i>`` in namespace ``compose-test``: even ones LS
    (priority 9500, 500m CPU requested, 1 core limit), odd ones BE (priority 5500, 500m); 256 MiB each (the
    example nodes hold hundreds)."""
    def pod(i: int) -> dict[str, Any]:
        labels = {"app": f"batch{batch}"} | ({} if i % 2 == 0 else {"koordinator.sh/qosClass": "BE"})
        limit_cpu = "1" if i % 2 == 0 else "500m"
        return {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"b{batch}-{i}", "namespace": NAMESPACE, "labels": labels},
            "spec": {"priority": 9500 if i % 2 == 0 else 5500, "containers": [{
                "name": "app", "image": "busybox",
                "resources": {"requests": {"cpu": "500m", "memory": "256Mi"},
                              "limits": {"cpu": limit_cpu, "memory": "256Mi"}}}]},
        }
    items = [pod(i) for i in range(count)]
    return str(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}, sort_keys=False))


def pod_records(stack: Stack) -> list[dict[str, Any]]:
    """The store's pod records of namespace ``compose-test`` (``colo get pods -o json``)."""
    data = json.loads(stack.colo("get", "pods", "-n", NAMESPACE, "-o", "json"))
    items: list[dict[str, Any]] = data.get("items", []) if isinstance(data, dict) else data
    return items


def wait_running(stack: Stack, names: list[str]) -> str:
    """Wait until every pod of ``names`` is Running on a node and no pod name appears twice; a line for the
    summary (seconds until every pod had a node, until every pod ran). Raises ``AssertionError`` with what is
    missing after 180 s, or at once for a pod recorded twice."""
    start = time.monotonic()
    deadline = start + _RUNNING_TIMEOUT_S
    bound_s: float | None = None
    while True:
        records = pod_records(stack)
        seen = [r["spec"]["name"] for r in records]
        dup = sorted({n for n in seen if seen.count(n) > 1})
        if dup:
            raise AssertionError(f"pods recorded twice: {dup}")
        by_name = {r["spec"]["name"]: r for r in records}
        if bound_s is None and all(by_name.get(n, {}).get("node") for n in names):
            bound_s = time.monotonic() - start
        not_running = {n: (by_name[n]["phase"], by_name[n].get("node")) if n in by_name else "absent"
                       for n in names if n not in by_name or by_name[n]["phase"] != "Running"
                       or not by_name[n].get("node")}
        if not not_running:
            nodes = sorted({by_name[n]["node"] for n in names})
            return (f"{len(names)} pods Running on {len(nodes)} nodes ({', '.join(nodes)}), no duplicates; "
                    f"all bound after {bound_s or 0.0:.1f} s, all Running after {time.monotonic() - start:.1f} s")
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(not_running)} of {len(names)} pods not Running after "
                                 f"{_RUNNING_TIMEOUT_S:.0f} s: {dict(list(not_running.items())[:10])}")
        time.sleep(1.0)


def submit(stack: Stack, out: Path, batch: int, count: int, *extra: str) -> list[str]:
    path = out / f"pods-batch{batch}.yaml"
    path.write_text(pods_manifest(batch, count))
    stack.colo("submit", *extra, str(path))
    return [f"b{batch}-{i}" for i in range(count)]


def write_secrets(secrets: Path, summary: Summary) -> None:
    """``colo security init SECRETS --compose`` from the repository root, as docs/compose.md tells a user.
    Raises ``RuntimeError`` with its output when it fails."""
    cmd = [sys.executable, "-m", "colo.cli.main", "security", "init", str(secrets), "--compose"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLO_")}
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"colo security init failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    summary.add("      " + done.stdout.strip().splitlines()[-1])


def scenario(stack: Stack, out: Path, summary: Summary, pods_per_batch: int) -> None:
    """Steps 3–6 of the module docstring."""
    if stack.secrets is not None:
        with summary.step("colo security init SECRETS --compose"):
            write_secrets(stack.secrets, summary)
    with summary.step("docker compose up --build -d"):
        stack.compose("up", "--build", "-d", timeout=1800.0)
    services = sorted(stack.health())
    with summary.step(f"wait for every healthcheck ({len(services)} services)"):
        stack.wait_healthy(services)
    if stack.secrets is not None:
        secrets = stack.secrets
        for name, check in (("NATS refuses a client without credentials", security_checks.nats_refuses_anonymous),
                            ("Redis refuses a connection without a user", security_checks.redis_refuses_anonymous),
                            ("HTTP /metrics without the token: 401", security_checks.http_requires_token)):
            with summary.step(name):
                summary.add("      " + check(stack, secrets))
    names: list[str] = []
    with summary.step(f"colo submit batch 1 ({pods_per_batch} pods), all Running"):
        names += submit(stack, out, 1, pods_per_batch)
        summary.add("      " + wait_running(stack, names))
    if stack.secrets is not None:
        with summary.step("explain through the API and colo explain (scheduler behind the token)"):
            summary.add("      " + security_checks.explain_with_token(stack, stack.secrets, f"{NAMESPACE}/b1-0"))
    with summary.step("docker compose kill scheduler"):
        stack.compose("kill", "scheduler")
    with summary.step(f"colo submit --no-wait batch 2 ({pods_per_batch} pods), scheduler down"):
        names += submit(stack, out, 2, pods_per_batch, "--no-wait")
    with summary.step("docker compose start scheduler, healthy again"):
        stack.compose("start", "scheduler")
        stack.wait_healthy(["scheduler"])
    with summary.step(f"colo submit batch 3 ({pods_per_batch} pods), all 3 batches Running"):
        names += submit(stack, out, 3, pods_per_batch)
        summary.add("      " + wait_running(stack, names))
    with summary.step("every service still healthy"):
        stack.wait_healthy(services, timeout_s=60.0)
    if stack.secrets is not None:
        with summary.step("no permission violation (NATS log, Redis ACL LOG)"):
            summary.add("      " + security_checks.no_permission_violations(stack, stack.secrets))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "out" / "compose-test")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "colo" / "compose-test")
    parser.add_argument("--pods", type=int, default=10, help="pods per batch (3 batches)")
    parser.add_argument("--insecure", action="store_true",
                        help="compose.yaml alone (open NATS and Redis), without compose.secure.yaml")
    args = parser.parse_args(argv)
    out: Path = args.out
    cache: Path = args.cache
    overrides = [Path(p).resolve() for p in os.environ.get("COMPOSE_TEST_OVERRIDES", "").split(":") if p]
    summary = Summary(out / "summary.txt")
    run_dir = Path(tempfile.mkdtemp(prefix="colo-ct-"))
    secrets = None if args.insecure else run_dir / "secrets"
    files = ["compose.yaml"] + ([] if secrets is None else ["compose.secure.yaml"]) + [str(o) for o in overrides]
    summary.add(f"compose test of {REPO} ({' + '.join(files)})")
    daemon = Dockerd(cache / "docker", run_dir / "d", out / "dockerd.log")
    ok = False
    stack: Stack | None = None
    try:
        with summary.step("start dockerd (own socket, data root cached)"):
            daemon.start()
        with summary.step("base images: present, pulled or stand-ins built"):
            built = ensure_base_images(base_images(REPO), cache, daemon.env, summary.log)
            summary.add(f"      stand-ins built this run: {', '.join(built) or 'none (cached or pulled)'}")
        stack = Stack(REPO, daemon.env, run_dir / "config", summary.log, overrides, secrets=secrets)
        scenario(stack, out, summary, args.pods)
        ok = True
    except Exception:
        summary.add("error: " + traceback.format_exc().strip().replace("\n", "\n       "))
    finally:
        ok = _teardown(stack, daemon, out, summary) and ok
        shutil.rmtree(run_dir, ignore_errors=True)
    summary.add(f"{'PASS' if ok else 'FAIL'}  total wall time {time.monotonic() - summary.start:.1f} s")
    return 0 if ok else 1


def _teardown(stack: Stack | None, daemon: Dockerd, out: Path, summary: Summary) -> bool:
    """Logs, ``docker compose down -v``, daemon stop; False when a step of it failed."""
    ok = True
    steps: list[tuple[str, Callable[[], object]]] = []
    if stack is not None:
        steps += [("docker compose logs -> compose.log",
                   lambda: (out / "compose.log").write_text(stack.compose("logs", "--no-color", check=False))),
                  ("docker compose down -v, nothing of the project left", lambda: _down(stack)),
                  # images replaced by this run's builds; the current ones and the build cache stay cached
                  ("docker image prune (dangling images)", lambda: stack.docker("image", "prune", "-f"))]
    steps.append(("stop dockerd", daemon.stop))
    for name, fn in steps:
        try:
            with summary.step(name):
                fn()
        except Exception as err:
            summary.add(f"error: {err}")
            ok = False
    return ok


def _down(stack: Stack) -> None:
    stack.compose("down", "-v", "--remove-orphans")
    left = stack.compose("ps", "-a", "-q").split()
    label = "label=com.docker.compose.project=colo"
    for kind in ("network", "volume"):
        left += stack.docker(kind, "ls", "-q", "--filter", label).split()
    if left:
        raise AssertionError(f"left after down: {left}")


if __name__ == "__main__":
    sys.exit(main())
