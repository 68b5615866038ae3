"""Supervision of the five service processes for a simulation run.

Each service runs as ``python -m colo_<name>`` with ``COLO_SIM=1`` and a fixed HTTP port
(so that ``/readyz`` can be polled); its output goes to ``<log_dir>/<run>-<service>.log``.
Only processes started here are ever signalled.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import aiohttp

from colo.embedded import free_port

SERVICES: tuple[tuple[str, str], ...] = (
    ("node-agent", "colo_node_agent"),
    ("profiler", "colo_profiler"),
    ("slo-manager", "colo_slo_manager"),
    ("scheduler", "colo_scheduler"),
    ("descheduler", "colo_descheduler"),
)
"""(service name, module) in tick order: node-agent → profiler → slo-manager → scheduler → descheduler."""

TICK_ORDER: tuple[str, ...] = tuple(name for name, _ in SERVICES)


class ServiceError(RuntimeError):
    """A service process failed to start, become ready, or exited unexpectedly (message has its log tail)."""


@dataclass
class _Proc:
    name: str
    module: str
    port: int
    proc: subprocess.Popen[bytes]
    log: IO[bytes]
    log_path: Path
    extra_env: dict[str, str]


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class Supervisor:
    """Starts, watches, restarts and stops the service processes of one run.

    ``env`` is the environment common to every service (URLs, COLO_SIM, store prefix,
    run-specific settings); ``log_dir`` receives one log file per service and run.
    """

    def __init__(self, run: str, env: dict[str, str], log_dir: Path,
                 services: tuple[tuple[str, str], ...] = SERVICES, ready_timeout_s: float = 60.0) -> None:
        self.run = run
        self.env = env
        self.log_dir = log_dir
        self.services = services
        self.ready_timeout_s = ready_timeout_s
        self.procs: dict[str, _Proc] = {}
        self.restarts: dict[str, int] = {}

    def _spawn(self, name: str, module: str, extra_env: dict[str, str] | None = None) -> _Proc:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        port = free_port()
        extra = dict(extra_env or {})
        env = {**os.environ, **self.env, **extra, "COLO_HTTP_PORT": str(port)}
        log_path = self.log_dir / f"{self.run}-{name}.log"
        log = log_path.open("ab")
        proc = subprocess.Popen([sys.executable, "-m", module], env=env, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        return _Proc(name, module, port, proc, log, log_path, extra)

    async def _wait_ready(self, p: _Proc) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        url = f"http://127.0.0.1:{p.port}/readyz"
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
            while time.monotonic() < deadline:
                if p.proc.poll() is not None:
                    raise ServiceError(f"{p.name} exited with code {p.proc.returncode} before ready:\n"
                                       f"{_tail(p.log_path)}")
                try:
                    async with http.get(url) as resp:
                        if resp.status == 200:
                            return
                except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
                    pass
                await asyncio.sleep(0.1)
        raise ServiceError(f"{p.name} not ready after {self.ready_timeout_s:.0f} s:\n{_tail(p.log_path)}")

    async def start_all(self) -> None:
        """Start every service and wait until all answer /readyz; raises ServiceError."""
        for name, module in self.services:
            self.procs[name] = self._spawn(name, module)
        await asyncio.gather(*(self._wait_ready(p) for p in self.procs.values()))

    async def start(self, name: str, module: str, extra_env: dict[str, str]) -> None:
        """Start one more service with ``extra_env`` on top of the common environment (kept on restart) and
        wait until it answers /readyz; raises ServiceError. For a service that needs the address of one
        started before (ports are known only once spawned): ``colo up`` gives the API the scheduler's URL."""
        self.procs[name] = self._spawn(name, module, extra_env)
        await self._wait_ready(self.procs[name])

    def check_alive(self) -> None:
        """Raise ServiceError when a service process has exited."""
        for p in self.procs.values():
            if p.proc.poll() is not None:
                raise ServiceError(f"{p.name} exited with code {p.proc.returncode}:\n{_tail(p.log_path)}")

    def kill(self, name: str) -> None:
        """SIGKILL one service (simulates a crash: no graceful shutdown)."""
        p = self.procs[name]
        p.proc.send_signal(signal.SIGKILL)
        p.proc.wait(timeout=10)
        p.log.close()

    async def restart(self, name: str, crash: bool = True) -> None:
        """Kill (``crash``) or stop gracefully one service, start it again and wait until ready."""
        if crash:
            self.kill(name)
        else:
            self._stop(self.procs[name])
        self.procs[name] = self._spawn(name, self.procs[name].module, self.procs[name].extra_env)
        self.restarts[name] = self.restarts.get(name, 0) + 1
        await self._wait_ready(self.procs[name])

    def _stop(self, p: _Proc, timeout_s: float = 10.0) -> int | None:
        if p.proc.poll() is None:
            p.proc.send_signal(signal.SIGTERM)
            try:
                p.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                p.proc.kill()
                p.proc.wait(timeout=5)
        p.log.close()
        return p.proc.returncode

    def stop_all(self) -> dict[str, int | None]:
        """SIGTERM every service (reverse order), SIGKILL after 10 s; returns exit codes."""
        codes = {}
        for name in reversed(list(self.procs)):
            codes[name] = self._stop(self.procs[name])
        return codes
