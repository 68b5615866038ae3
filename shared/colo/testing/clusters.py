"""Replicated servers on loopback for the high-availability tests: a 3-server NATS cluster with JetStream
and a Redis primary + replica watched by 3 Sentinels (docs/operations.md "High availability").

Every member keeps its ports and its data directory for the life of the group, so a member killed with
``kill()`` (SIGKILL) comes back with ``start()`` as the same server: a NATS member with its JetStream store,
a Redis server on its port (Sentinel then turns a returning old primary into a replica). Only processes
started here are ever signalled; ``stop()`` ends every member and removes the directory.
"""

from __future__ import annotations

import functools
import json
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import redis

from colo.embedded import EmbeddedServerError, free_port, nats_server_binary, redis_server_binary

_START_TIMEOUT_S = 20.0
_STOP_TIMEOUT_S = 5.0


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the parent dies (Linux), so a killed test leaves no server."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _poll(what: str, ok: Callable[[], bool], proc: subprocess.Popen[bytes] | None, log: Path,
          timeout_s: float = _START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise EmbeddedServerError(f"{what} exited with code {proc.returncode}: "
                                      f"{log.read_text(errors='replace')[-2000:]}")
        try:
            if ok():
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise EmbeddedServerError(f"{what} not ready within {timeout_s:.0f} s: {log.read_text(errors='replace')[-2000:]}")


class Member:
    """One server process of a group: ``name``, ``port``, the command line it is (re)started with, its log.

    ``start()`` spawns it (a no-op while running); ``kill()`` sends SIGKILL and waits; ``stop()`` SIGTERM,
    then SIGKILL after 5 s.
    """

    def __init__(self, name: str, port: int, args: list[str], log_path: Path, monitor_port: int = 0) -> None:
        self.name = name
        self.port = port
        self.monitor_port = monitor_port
        """HTTP monitoring port (nats-server ``-m``); 0 = none."""
        self.args = args
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        """True while the process has not exited."""
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        """Spawn the server (its output appended to :attr:`log_path`); readiness is the group's business."""
        if self.running:
            return
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True,
                                         preexec_fn=_die_with_parent if sys.platform == "linux" else None)

    def kill(self) -> None:
        """SIGKILL (a crash: no shutdown, nothing flushed) and reap."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=_STOP_TIMEOUT_S)

    def stop(self) -> None:
        """SIGTERM, SIGKILL after 5 s."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=_STOP_TIMEOUT_S)

    def __repr__(self) -> str:
        return f"Member({self.name}, port={self.port}, running={self.running})"


class _Group:
    def __init__(self, prefix: str) -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = tempfile.TemporaryDirectory(prefix=prefix)
        self.dir = Path(self._tmp.name)
        self.members: list[Member] = []

    def stop(self) -> None:
        """Stop every member (reverse order) and remove the data directory (idempotent)."""
        for m in reversed(self.members):
            m.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


class NatsCluster(_Group):
    """``size`` nats-server processes (``nats-0`` …) clustered over routes on 127.0.0.1, cluster name
    ``colo``, JetStream with a store directory per server, a monitoring port each for ``/healthz``.

    ``url`` lists every client URL separated by commas (as ``COLO_NATS_URL`` takes it). Raises
    EmbeddedServerError when a server does not start or JetStream has no meta leader within 20 s.
    """

    def __init__(self, size: int = 3) -> None:
        super().__init__("colo-nats-cluster-")
        binary = nats_server_binary()
        ports = [(free_port(), free_port(), free_port()) for _ in range(size)]  # client, route, monitor
        routes = ",".join(f"nats://127.0.0.1:{r}" for _, r, _ in ports)
        for i, (client, route, monitor) in enumerate(ports):
            name = f"nats-{i}"
            args = [binary, "-n", name, "-a", "127.0.0.1", "-p", str(client), "-m", str(monitor),
                    "-js", "-sd", str(self.dir / name), "--cluster_name", "colo",
                    "--cluster", f"nats://127.0.0.1:{route}", "--routes", routes]
            self.members.append(Member(name, client, args, self.dir / f"{name}.log", monitor))

    @property
    def url(self) -> str:
        """Client URLs of every member, comma-separated."""
        return ",".join(f"nats://127.0.0.1:{m.port}" for m in self.members)

    def member(self, name: str) -> Member:
        """The member whose server name is ``name``; KeyError when none is."""
        for m in self.members:
            if m.name == name:
                return m
        raise KeyError(name)

    def _healthy(self, m: Member) -> bool:
        url = f"http://127.0.0.1:{m.monitor_port}/healthz"
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                return bool(resp.status == 200 and json.loads(resp.read()).get("status") == "ok")
        except OSError:
            return False

    def wait_healthy(self, m: Member, timeout_s: float = _START_TIMEOUT_S) -> None:
        """Block until ``m``'s ``/healthz`` reports JetStream current (it caught up with the cluster)."""
        _poll(m.name, lambda: self._healthy(m), m.proc, m.log_path, timeout_s)

    def start(self) -> NatsCluster:
        """Start every member and wait until each is healthy; on failure stop all and re-raise."""
        try:
            for m in self.members:
                m.start()
            for m in self.members:
                self.wait_healthy(m)
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> NatsCluster:
        return self.start()


class RedisSentinelGroup(_Group):
    """A Redis primary and a replica (``--replicaof``) with ``sentinels`` Sentinels (``redis-server
    --sentinel``) monitoring it as ``master`` with quorum 2, ``down-after-milliseconds`` ``down_after_ms`` and
    failover timeout 5 s, all on 127.0.0.1 without persistence (a returning server resynchronises from the
    primary Sentinel names).

    ``sentinels_setting`` is the ``COLO_REDIS_SENTINELS`` value. Raises EmbeddedServerError when a server
    does not start or the replica is not in sync within 20 s.
    """

    def __init__(self, master: str = "colo", sentinels: int = 3, down_after_ms: int = 1000) -> None:
        super().__init__("colo-redis-sentinel-")
        self.master = master
        binary = redis_server_binary()
        common = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no",
                  "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"]
        primary, replica = free_port(), free_port()
        for name, port, extra in (("redis-0", primary, []), ("redis-1", replica, ["--replicaof", "127.0.0.1",
                                                                                  str(primary)])):
            d = self.dir / name
            d.mkdir()
            self.members.append(Member(name, port, [binary, "--port", str(port), *common, "--dir", str(d), *extra],
                                       self.dir / f"{name}.log"))
        self.sentinels: list[Member] = []
        for i in range(sentinels):
            port = free_port()
            conf = self.dir / f"sentinel-{i}.conf"  # Sentinel rewrites its file: one each, writable
            conf.write_text(f"port {port}\nbind 127.0.0.1\ndaemonize no\ndir {self.dir}\n"
                            f"sentinel monitor {master} 127.0.0.1 {primary} 2\n"
                            f"sentinel down-after-milliseconds {master} {down_after_ms}\n"
                            f"sentinel failover-timeout {master} 5000\nsentinel parallel-syncs {master} 1\n")
            s = Member(f"sentinel-{i}", port, [binary, str(conf), "--sentinel"], self.dir / f"sentinel-{i}.log")
            self.sentinels.append(s)
            self.members.append(s)

    @property
    def sentinels_setting(self) -> str:
        """``host:port`` of every Sentinel, comma-separated."""
        return ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)

    def server(self, port: int) -> Member:
        """The Redis server (not Sentinel) listening on ``port``; KeyError when none does."""
        for m in self.members[:2]:
            if m.port == port:
                return m
        raise KeyError(port)

    def primary_port(self) -> int:
        """The port of the primary as the first answering Sentinel names it (``SENTINEL
        get-master-addr-by-name``). Raises EmbeddedServerError when no Sentinel answers."""
        for s in self.sentinels:
            reply = _ask(s.port, lambda c: c.sentinel_get_master_addr_by_name(self.master))
            if isinstance(reply, (list, tuple)) and len(reply) == 2:
                return int(reply[1])
        raise EmbeddedServerError("no Sentinel answers get-master-addr-by-name")

    def restart_as_replica(self, port: int) -> None:
        """Start the (killed) server on ``port`` again, empty, as a replica of the primary the Sentinels name now
        (``--replicaof``), as an operator brings a failed primary back: started as a primary it would be one, empty,
        until Sentinel reconfigures it, and a replica could copy its empty data set meanwhile."""
        m = self.server(port)
        primary = self.primary_port()
        args = list(m.args)
        if "--replicaof" in args:
            i = args.index("--replicaof")
            del args[i:i + 3]
        m.args = [*args, "--replicaof", "127.0.0.1", str(primary)]
        m.start()

    def failover_done(self, old_port: int) -> bool:
        """Whether a failover away from the primary on ``old_port`` is complete: every Sentinel names the same
        other server, and that server answers as a primary. Restarting the old primary before this (empty, as
        the soak does) can make it the primary again, and the promoted replica then copies its empty data set."""
        named = set()
        for s in self.sentinels:
            reply = _ask(s.port, lambda c: c.sentinel_get_master_addr_by_name(self.master))
            if not (isinstance(reply, (list, tuple)) and len(reply) == 2):
                return False
            named.add(int(reply[1]))
        if len(named) != 1 or old_port in named:
            return False
        info = _ask(named.pop(), lambda c: c.info("replication"))
        return isinstance(info, dict) and info.get("role") == "master"

    def _replica_synced(self, port: int) -> bool:
        info = _ask(port, lambda c: c.info("replication"))
        return isinstance(info, dict) and info.get("master_link_status") == "up"

    def wait_replica(self, port: int, timeout_s: float = _START_TIMEOUT_S) -> None:
        """Block until the server on ``port`` is a replica in sync with its primary."""
        m = self.server(port)
        _poll(f"replica {m.name}", lambda: self._replica_synced(port), m.proc, m.log_path, timeout_s)

    def start(self) -> RedisSentinelGroup:
        """Start the primary, the replica and the Sentinels; wait until the replica is in sync and every
        Sentinel knows the replica and the other Sentinels. On failure stop all and re-raise."""
        try:
            for m in self.members:
                m.start()
            for m in self.members:
                _poll(m.name, functools.partial(_pong, m.port), m.proc, m.log_path)
            self.wait_replica(self.members[1].port)
            for s in self.sentinels:
                _poll(s.name, functools.partial(self._sentinel_complete, s.port), s.proc, s.log_path)
        except BaseException:
            self.stop()
            raise
        return self

    def _sentinel_complete(self, port: int) -> bool:
        state = _ask(port, lambda c: c.sentinel_master(self.master))
        return (isinstance(state, dict) and int(state.get("num-slaves", 0)) >= 1
                and int(state.get("num-other-sentinels", 0)) >= len(self.sentinels) - 1)

    def __enter__(self) -> RedisSentinelGroup:
        return self.start()


def _pong(port: int) -> bool:
    return _ask(port, lambda c: c.ping()) is True


def _ask(port: int, call: Callable[[redis.Redis], Any]) -> Any:
    """``call(client)`` with a short-lived blocking client of 127.0.0.1:``port``; None when unreachable."""
    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1, socket_connect_timeout=1)
    try:
        return call(client)
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
        return None
    finally:
        client.close()


def start_replica(primary_port: int, work_dir: Path, timeout_s: float = _START_TIMEOUT_S) -> Member:
    """A redis-server replica of 127.0.0.1:``primary_port`` on a free port, data in ``work_dir`` (no
    persistence), started and in sync (``master_link_status:up``) when returned; ``stop()`` it when done.
    Raises EmbeddedServerError when it does not start or sync within ``timeout_s``."""
    port = free_port()
    args = [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--daemonize", "no", "--dir", str(work_dir), "--replicaof", "127.0.0.1", str(primary_port)]
    m = Member(f"replica-{port}", port, args, work_dir / f"replica-{port}.log")
    m.start()
    try:
        _poll(m.name, lambda: (lambda i: isinstance(i, dict) and i.get("master_link_status") == "up")(
            _ask(port, lambda c: c.info("replication"))), m.proc, m.log_path, timeout_s)
    except BaseException:
        m.stop()
        raise
    return m
