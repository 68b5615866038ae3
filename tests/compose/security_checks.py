"""Refusals of the secure compose stack (compose.secure.yaml), checked from the host as an intruder would try.

Each check connects to a published port of the stack without the credentials ``colo security init`` gave the
services and returns a line for the summary naming what the server answered; it raises ``AssertionError`` when
the server let the client in. ``secrets`` is the directory of ``colo security init DIR --compose``.
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import nats
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from stack import Stack

# the services with an HTTP port on the host (compose.yaml's COLO_*_HOST_PORT variables)
HTTP_PORTS = {"scheduler": "COLO_SCHEDULER_HOST_PORT", "descheduler": "COLO_DESCHEDULER_HOST_PORT",
              "slo-manager": "COLO_SLO_MANAGER_HOST_PORT", "profiler": "COLO_PROFILER_HOST_PORT",
              "node-agent-a": "COLO_NODE_AGENT_A_HOST_PORT", "node-agent-b": "COLO_NODE_AGENT_B_HOST_PORT",
              "api": "COLO_API_HOST_PORT"}


async def _nats_connect(url: str, tls: ssl.SSLContext | None) -> str:
    """Connect to ``url`` without credentials; the error the client saw (``""`` when it got in)."""
    errors: list[str] = []

    async def on_error(exc: Exception) -> None:
        errors.append(repr(exc))

    try:
        nc = await nats.connect(url, tls=tls, allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=5,
                                error_cb=on_error, name="compose-test-intruder")
    except Exception as exc:  # noqa: BLE001 - any refusal is the answer wanted; its text is reported
        return repr(exc) + (f" (error callback: {errors[0]})" if errors else "")
    await nc.close()
    return ""


def nats_refuses_anonymous(stack: Stack, secrets: Path) -> str:
    """A client without credentials, over TLS with the stack's CA (so only authentication can stop it), and a
    plain-text client: both refused by the stack's nats-server."""
    port = stack.ports["COLO_NATS_HOST_PORT"]
    tls = ssl.create_default_context(cafile=str(secrets / "ca.pem"))
    over_tls = asyncio.run(_nats_connect(f"tls://127.0.0.1:{port}", tls))
    if not over_tls:
        raise AssertionError("NATS accepted a client without credentials (TLS, the stack's CA)")
    if "authorization" not in over_tls.lower():
        raise AssertionError(f"NATS refused a client without credentials, but not for authorization: {over_tls}")
    plain = asyncio.run(_nats_connect(f"nats://127.0.0.1:{port}", None))
    if not plain:
        raise AssertionError("NATS accepted a plain-text client without credentials")
    return f"NATS, no credentials: {over_tls[:160]}; plain text: {plain[:120]}"


def redis_refuses_anonymous(stack: Stack, secrets: Path) -> str:
    """A Redis connection over TLS with the client certificate but no user (the ``default`` user is off), one
    with the ``scheduler`` user and a wrong password, and a plain-text one: all refused."""
    port = stack.ports["COLO_REDIS_HOST_PORT"]
    tls = {"ssl": True, "ssl_ca_certs": str(secrets / "ca.pem"), "ssl_certfile": str(secrets / "client.pem"),
           "ssl_keyfile": str(secrets / "client-key.pem")}
    answers: list[str] = []
    for what, kw in (("no user", tls), ("wrong password", tls | {"username": "scheduler", "password": "x"}),
                     ("plain text", {})):
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=5, socket_connect_timeout=5,
                             retry=Retry(NoBackoff(), 0), **kw)  # one attempt: redis-py retries by default
        try:
            client.get("colo:nodes")
        except redis.RedisError as exc:
            answers.append(f"{what}: {type(exc).__name__}: {str(exc)[:80]}")
        else:
            raise AssertionError(f"Redis answered a client with {what}")
        finally:
            client.close()
    if "NOAUTH" not in answers[0] and "auth" not in answers[0].lower():
        raise AssertionError(f"Redis refused a client without a user, but not for authentication: {answers[0]}")
    return "Redis " + "; ".join(answers)


def _get(url: str, token: str = "") -> int:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return int(err.code)


def http_requires_token(stack: Stack, secrets: Path) -> str:
    """``/metrics`` of every service without the token: 401; with the token of ``secrets/http-token``: 200;
    ``/healthz`` without: 200."""
    token = (secrets / "http-token").read_text().splitlines()[0].strip()
    bad: list[str] = []
    for service, var in HTTP_PORTS.items():
        base = f"http://127.0.0.1:{stack.ports[var]}"
        got = (_get(base + "/metrics"), _get(base + "/metrics", "wrong"), _get(base + "/metrics", token),
               _get(base + "/healthz"))
        if got != (401, 401, 200, 200):
            bad.append(f"{service}: /metrics without token {got[0]}, wrong token {got[1]}, with token {got[2]}, "
                       f"/healthz {got[3]}")
    if bad:
        raise AssertionError("HTTP token not enforced as configured: " + "; ".join(bad))
    return (f"HTTP /metrics of {len(HTTP_PORTS)} services: 401 without the token and with a wrong one, 200 with "
            f"it; /healthz 200 without")


def explain_with_token(stack: Stack, secrets: Path, pod: str) -> str:
    """The scheduler's decision for ``pod`` (``NAMESPACE/NAME``) read through the API (which asks the
    token-protected scheduler with the services' token) and by the host's ``colo explain`` (the admin's
    ``COLO_HTTP_TOKEN_FILE``). Raises ``AssertionError`` when either is refused."""
    token = (secrets / "http-token").read_text().splitlines()[0].strip()
    url = f"http://127.0.0.1:{stack.ports['COLO_API_HOST_PORT']}/v1/explain/{pod}"
    status = _get(url, token)
    if status != 200:
        raise AssertionError(f"GET {url} with the token: HTTP {status}")
    scheduler = f"http://127.0.0.1:{stack.ports['COLO_SCHEDULER_HOST_PORT']}"
    text = stack.colo("explain", "--scheduler", scheduler, pod)
    if "node" not in text.lower():
        raise AssertionError(f"colo explain {pod}: {text[:300]}")
    return f"explain {pod}: API 200, colo explain answered ({len(text.splitlines())} lines)"


def no_permission_violations(stack: Stack, secrets: Path) -> str:
    """After the scenario: the stack's nats-server logged no ``Violation`` (every service published and
    subscribed within its permissions) and Redis's ``ACL LOG`` (read as ``colo-admin``) holds no refused
    command, key or channel; its failed ``auth`` entries are this module's wrong-password attempt. Raises
    ``AssertionError`` listing what was refused."""
    log = stack.compose("logs", "--no-color", "nats", quiet=True)
    violations = [line for line in log.splitlines() if "Violation" in line]
    admin = stack.admin_env
    client = redis.Redis(host="127.0.0.1", port=stack.ports["COLO_REDIS_HOST_PORT"], ssl=True,
                         ssl_ca_certs=str(secrets / "ca.pem"), ssl_certfile=str(secrets / "client.pem"),
                         ssl_keyfile=str(secrets / "client-key.pem"), username=admin["COLO_REDIS_USERNAME"],
                         password=Path(admin["COLO_REDIS_PASSWORD_FILE"]).read_text().strip(), socket_timeout=5)
    try:
        entries = client.execute_command("ACL", "LOG", "128")
    finally:
        client.close()
    rows = [{(k.decode() if isinstance(k, bytes) else k): v for k, v in _pairs(e)} for e in entries]
    refused = [r for r in rows if _text(r.get("reason")) != "auth"]
    if violations or refused:
        raise AssertionError(f"NATS violations: {violations[:5]}; Redis ACL LOG refusals: {refused[:5]}")
    auth = sum(int(r.get("count", 1)) for r in rows if _text(r.get("reason")) == "auth")
    return (f"no NATS permission violation in the server's log; Redis ACL LOG: no refused command/key, "
            f"{auth} failed auth (the wrong-password check)")


def _pairs(entry: object) -> list[tuple[object, object]]:
    """An ``ACL LOG`` entry as (field, value) pairs: redis-py gives a dict or a flat list."""
    if isinstance(entry, dict):
        return list(entry.items())
    flat = list(entry) if isinstance(entry, (list, tuple)) else []
    return list(zip(flat[::2], flat[1::2]))


def _text(v: object) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)
