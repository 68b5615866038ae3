"""Servers started with the configuration of ``colo security init`` (tests of docs/security.md).

:func:`secured_servers` writes a setup with :func:`colo.security.init` on free ports, starts a
nats-server with its ``nats.conf`` and a redis-server with its ACL file and TLS include, and
:func:`runtime_settings` gives the :class:`~colo.settings.RuntimeSettings` of one of its users
(read from the user's env file, as a deployment would).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from colo.embedded import ServerHandle, _spawn, free_port, nats_server_binary, redis_server_binary
from colo.security import SecurityPlan, init, node_agent_users
from colo.settings import RuntimeSettings, load_runtime_settings


@dataclass
class SecuredServers:
    """A running secured nats-server and redis-server and the directory of their setup."""

    dir: Path
    plan: SecurityPlan
    nats: ServerHandle
    redis: ServerHandle

    @property
    def nats_url(self) -> str:
        """``tls://127.0.0.1:<port>`` (``nats://`` without TLS)."""
        return f"{'tls' if self.plan.tls else 'nats'}://127.0.0.1:{self.nats.port}"

    @property
    def redis_url(self) -> str:
        """``rediss://127.0.0.1:<port>/0`` (``redis://`` without TLS)."""
        return f"{'rediss' if self.plan.tls else 'redis'}://127.0.0.1:{self.redis.port}/0"

    def env(self, user: str) -> dict[str, str]:
        """The variables of ``user``'s env file, plus the servers' URLs."""
        out = {"COLO_NATS_URL": self.nats_url, "COLO_REDIS_URL": self.redis_url}
        for line in (self.dir / "env" / f"{user}.env").read_text().splitlines():
            key, _, value = line.partition("=")
            out[key] = value
        return out

    def runtime_settings(self, user: str, **extra: str) -> RuntimeSettings:
        """:class:`RuntimeSettings` of ``user`` (its env file), ``extra`` as more ``COLO_*`` variables."""
        return load_runtime_settings({**self.env(user), **extra})


def start_nats_with_config(config: Path, port: int) -> ServerHandle:
    """nats-server with ``config`` (which listens on ``port``). Raises EmbeddedServerError."""
    tmp = tempfile.TemporaryDirectory(prefix="colo-nats-secure-")
    proc = _spawn("nats-server", [nats_server_binary(), "-c", str(config)], port, tmp)
    return ServerHandle("nats-server", f"nats://127.0.0.1:{port}", port, proc, tmp, Path(tmp.name) / "nats-server.log")


def start_redis_with_include(include: Path, port: int) -> ServerHandle:
    """redis-server (no persistence) with the directives of ``include`` (which sets its port). Raises
    EmbeddedServerError."""
    tmp = tempfile.TemporaryDirectory(prefix="colo-redis-secure-")
    conf = Path(tmp.name) / "redis.conf"
    conf.write_text(f'save ""\nappendonly no\ndir {tmp.name}\ninclude {include}\n')
    proc = _spawn("redis-server", [redis_server_binary(), str(conf)], port, tmp)
    return ServerHandle("redis-server", f"redis://127.0.0.1:{port}/0", port, proc, tmp,
                        Path(tmp.name) / "redis-server.log")


@contextmanager
def secured_servers(node_lists: Sequence[Sequence[str]], tls: bool = True,
                    extra_env: Mapping[str, str] | None = None,
                    instances: Mapping[str, str] | None = None) -> Iterator[SecuredServers]:
    """A setup of ``colo security init`` for node agents serving ``node_lists`` (``instances``: the
    ``COLO_INSTANCE`` of some of their users) in a temp dir, with both servers running on free ports;
    everything stopped and removed on exit."""
    with tempfile.TemporaryDirectory(prefix="colo-security-") as d:
        out = Path(d) / "security"
        plan = SecurityPlan(node_agents=node_agent_users(node_lists), nats_port=free_port(), redis_port=free_port(),
                            tls=tls, jetstream_dir=str(Path(d) / "js"), listen_host="127.0.0.1", extra_env=dict(extra_env or {}),
                            node_agent_instances=dict(instances or {}))
        init(out, plan)
        nats = start_nats_with_config(out / "nats.conf", plan.nats_port)
        try:
            redis = start_redis_with_include(out / "redis-tls.conf", plan.redis_port)
        except BaseException:
            nats.stop()
            raise
        try:
            yield SecuredServers(out.resolve(), plan, nats, redis)
        finally:
            redis.stop()
            nats.stop()
