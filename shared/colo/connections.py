"""How a process reaches NATS and Redis: server lists, credentials, TLS and Sentinel, from :class:`RuntimeSettings`.

One place turns the link settings (docs/security.md, docs/operations.md) into client arguments, so that
services, the ``colo`` commands and the simulator connect the same way:

- NATS (nats-py): ``COLO_NATS_URL`` may list several servers separated by commas (a cluster; the client
  fails over between them and learns the others from the servers); credentials from a ``.creds`` file, an
  nkey seed file or a user with a password file; TLS with a CA bundle, optionally a client certificate.
- Redis (redis-py): ACL user with a password file; TLS with a CA bundle (or a ``rediss://`` URL),
  optionally a client certificate; or, with ``COLO_REDIS_SENTINELS``, the primary named
  ``COLO_REDIS_SENTINEL_MASTER`` found and followed through Sentinel.

Secrets are read from files when a connection is made, never taken from the command line or logged.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import redis.asyncio as aioredis
from redis.asyncio.connection import SSLConnection
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelManagedConnection

from colo.settings import RuntimeSettings


class LinkError(ValueError):
    """A link setting names a file that cannot be read (the message names the setting and the path)."""


def nats_servers(url: str) -> list[str]:
    """The server URLs in ``url``: one URL or several separated by commas (blanks dropped).

    >>> nats_servers("nats://a:4222, nats://b:4222")
    ['nats://a:4222', 'nats://b:4222']
    """
    return [u.strip() for u in url.split(",") if u.strip()]


def _read_secret(path: str, setting: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError as exc:
        raise LinkError(f"{setting}: cannot read {path}: {exc.strerror or exc}") from exc


def _tls_context(ca: str, cert: str, key: str, setting: str) -> ssl.SSLContext:
    try:
        ctx = ssl.create_default_context(cafile=ca or None)
        if cert:
            ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise LinkError(f"{setting}: cannot load TLS files ({ca or '-'}, {cert or '-'}): {exc}") from exc
    return ctx


def nats_options(settings: RuntimeSettings | None) -> dict[str, Any]:
    """Keyword arguments for ``nats.connect`` beyond the servers: credentials and TLS of ``settings``
    (``{}`` for ``None`` or settings without any). Raises LinkError when a named file cannot be read."""
    if settings is None:
        return {}
    s = settings
    out: dict[str, Any] = {}
    if s.nats_creds_file:
        if not Path(s.nats_creds_file).is_file():
            raise LinkError(f"nats_creds_file: no such file {s.nats_creds_file}")
        out["user_credentials"] = s.nats_creds_file
    elif s.nats_nkey_seed_file:
        if not Path(s.nats_nkey_seed_file).is_file():
            raise LinkError(f"nats_nkey_seed_file: no such file {s.nats_nkey_seed_file}")
        out["nkeys_seed"] = s.nats_nkey_seed_file
    elif s.nats_user:
        out["user"] = s.nats_user
        if s.nats_password_file:
            out["password"] = _read_secret(s.nats_password_file, "nats_password_file")
    if s.nats_inbox_prefix:
        out["inbox_prefix"] = s.nats_inbox_prefix
    if s.nats_tls_ca_file or s.nats_tls_cert_file:
        out["tls"] = _tls_context(s.nats_tls_ca_file, s.nats_tls_cert_file, s.nats_tls_key_file, "nats_tls_*")
    return out


def sentinel_addresses(settings: RuntimeSettings) -> list[tuple[str, int]]:
    """``(host, port)`` of each Sentinel in ``settings.redis_sentinels`` (empty when none)."""
    out = []
    for part in filter(None, (p.strip() for p in settings.redis_sentinels.split(","))):
        host, _, port = part.rpartition(":")
        out.append((host.strip("[]"), int(port)))
    return out


def redis_options(settings: RuntimeSettings | None) -> dict[str, Any]:
    """Keyword arguments for a redis-py client beyond the URL: ACL user, password and TLS of ``settings``.
    Raises LinkError when a named file cannot be read."""
    if settings is None:
        return {}
    s = settings
    out: dict[str, Any] = {}
    if s.redis_username:
        out["username"] = s.redis_username
    if s.redis_password_file:
        out["password"] = _read_secret(s.redis_password_file, "redis_password_file")
    if s.redis_tls_ca_file or s.redis_tls_cert_file:
        out.update(ssl=True, ssl_ca_certs=s.redis_tls_ca_file or None, ssl_certfile=s.redis_tls_cert_file or None,
                   ssl_keyfile=s.redis_tls_key_file or None, ssl_cert_reqs="required")
    return out


class PrimaryFollowingConnection(SentinelManagedConnection):
    """A Sentinel-managed connection that asks the Sentinels for the primary each time it (re)connects.

    redis-py 8's ``send_packed_command`` reconnects a dropped connection through ``connect_check_health``,
    which skips ``SentinelManagedConnection.connect`` (where the primary is looked up): after ``READONLY`` from a
    demoted primary the connection was dropped and opened again to the same, demoted server, for as long as
    that server answered (``tests/integration/test_store_replicas.py``, graceful switchover)."""

    async def connect_check_health(self, check_health: bool = True, retry_socket_connect: bool = True) -> None:
        if not self.is_connected and self.connection_pool.is_master:
            self.host, self.port = await self.connection_pool.get_master_address()
        await super().connect_check_health(check_health=check_health, retry_socket_connect=retry_socket_connect)


class PrimaryFollowingSSLConnection(PrimaryFollowingConnection, SSLConnection):
    """:class:`PrimaryFollowingConnection` over TLS."""


def redis_client(url: str, settings: RuntimeSettings | None, retry: Retry, retry_on_error: list[type[Exception]]
                 ) -> aioredis.Redis:
    """A redis-py asyncio client (bytes responses) for ``url`` with the links of ``settings``.

    With Sentinels configured the client talks to whichever server the Sentinels name as the primary of
    ``settings.redis_sentinel_master`` and finds the new one after a failover (redis-py's
    ``SentinelConnectionPool``); the db number comes from ``url``'s path. Without, ``url`` is the server.
    Raises LinkError when a named file cannot be read.
    """
    opts = redis_options(settings)
    if settings is not None and settings.redis_sentinels:
        path = urlsplit(url).path.strip("/")
        db = int(path) if path.isdigit() else 0
        sentinel_kw = {k: v for k, v in opts.items() if k.startswith("ssl")}
        sentinel = Sentinel(sentinel_addresses(settings), sentinel_kwargs=sentinel_kw or None,  # type: ignore[no-untyped-call]
                            **opts)
        conn_class = PrimaryFollowingSSLConnection if opts.get("ssl") else PrimaryFollowingConnection
        client: aioredis.Redis = sentinel.master_for(settings.redis_sentinel_master, db=db, decode_responses=False,
                                                    retry=retry, retry_on_error=retry_on_error,
                                                    connection_class=conn_class)
        follow = getattr(retry, "follow", None)  # colo.store_retry.FailoverRetry: drop idle connections on errors
        if follow is not None:
            follow(client.connection_pool)
        return client
    if opts.pop("ssl", False) and url.startswith("redis://"):  # from_url picks the TLS connection by scheme
        url = "rediss://" + url.removeprefix("redis://")
    return aioredis.from_url(url, decode_responses=False, retry=retry, retry_on_error=retry_on_error, **opts)
