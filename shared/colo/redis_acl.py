"""Redis ACL users per service: key patterns from :class:`colo.keys.Keys`, only the commands the store uses.

Key patterns are derived from the key builder itself (every property and key function of
:class:`~colo.keys.Keys`, called with ``*`` for its argument), so a key added there is granted
without anyone writing a pattern by hand. A service either writes (``~pattern``) or only reads
(``%R~pattern``) each family; the families it writes are named by :class:`~colo.keys.Keys` member.

Commands: :data:`READ_COMMANDS` and :data:`WRITE_COMMANDS` are those the store modules send
(redis-py calls and the ``redis.call`` of the Lua scripts: Redis checks a script's calls against
the caller's ACL too), plus what redis-py sends on connect. ``tests/unit/test_redis_acl.py`` fails
when a store module sends a command left out here; ``tests/integration/test_security.py`` runs
the services as their ACL users and fails on any entry of ``ACL LOG``.
Reference: Redis documentation "ACL" (selectors ``%R~``, ``+cmd|sub``, ``resetchannels``).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from colo.keys import Keys

CONNECT_COMMANDS = ("auth", "hello", "ping", "select", "client|setname", "info")
"""What redis-py sends when it connects and checks a connection (``info``: the Sentinel client). Not
``client|setinfo``: Redis 7.0 does not know it (the ACL file would not load) and redis-py ignores its refusal."""

READ_COMMANDS = ("get", "mget", "exists", "hget", "hmget", "hgetall", "hvals", "smembers", "sismember",
                 "scard", "zrange", "zrangebyscore", "scan", "multi", "exec", "discard", "evalsha", "eval",
                 "script|load", "script|exists")
"""Commands every service may send (scripts and transactions included: a read-only user's script
still fails on a write, by the ACL of its key patterns)."""

WRITE_COMMANDS = ("set", "del", "unlink", "expire", "pexpire", "incr", "hset", "hdel", "hincrby", "sadd",
                  "srem", "zadd", "zrem", "wait")
"""Commands of services that write (``wait``: a bind or release acknowledged once replicas hold it,
:mod:`colo.store_wait`)."""


@dataclass(frozen=True)
class StoreGrant:
    """What one service does in Redis: ``writes`` names the :class:`~colo.keys.Keys` members whose keys it
    changes (``"*"`` = all); every other family it may only read. ``node_scoped``: of the families of
    :data:`NODE_KEYED` it writes only its own nodes' keys (a node agent)."""

    writes: tuple[str, ...] = ()
    node_scoped: bool = False


NODE_KEYED = ("node", "node_resource", "limits", "allocated", "node_pods")
"""Key families whose key name is a node name (``{p}:node:{name}``…)."""


GRANTS: dict[str, StoreGrant] = {
    "scheduler": StoreGrant(writes=("*",)),
    "slo-manager": StoreGrant(writes=("node_resource", "limits", "pod", "pods", "pod_state", "pod_groups",
                                      "workloads")),
    # reconciliation (colo_node_agent.reconcile) restores a running pod's binding and record and releases a
    # binding with no pod: binding, pod records, quota use and reservations; allocations of its own nodes only
    "node-agent": StoreGrant(writes=("nodes", "node", "limits", "pod_state", "allocated", "node_pods", "binding",
                                     "pod", "pods", "quota_used", "reservation"), node_scoped=True),
    "profiler": StoreGrant(writes=("checkpoint",)),
    "descheduler": StoreGrant(),
    "api": StoreGrant(),
}
"""The store grant of each service, by service name."""


def key_patterns(prefix: str = "colo") -> dict[str, str]:
    """Glob pattern of every key family of :class:`~colo.keys.Keys` under ``prefix``, by member name
    (``{"node": "colo:node:*", "nodes": "colo:nodes", ...}``). Raises ValueError for a bad prefix."""
    keys = Keys(prefix)
    out: dict[str, str] = {}
    for name, member in inspect.getmembers(type(keys)):
        if name.startswith("_") or name == "pattern":
            continue
        if isinstance(member, property):
            out[name] = str(getattr(keys, name))
        elif inspect.isfunction(member):
            # checkpoint() refuses "*" (its name is checked): build the pattern from a token instead
            out[name] = str(getattr(keys, name)("X")).removesuffix("X") + "*"
    return out


def _check(service: str) -> StoreGrant:
    try:
        grant = GRANTS[service]
    except KeyError:
        raise ValueError(f"unknown service {service!r} (known: {', '.join(sorted(GRANTS))})") from None
    unknown = set(grant.writes) - set(key_patterns()) - {"*"}
    if unknown:
        raise ValueError(f"{service}: writes unknown key families {sorted(unknown)}")
    return grant


def acl_rule(service: str, password_sha256: str, prefix: str = "colo", nodes: Sequence[str] = (),
             user: str = "") -> str:
    """The ``users.acl`` line of ``service`` (as ``user``, default the service name): ``user <user> on
    #<sha256> resetkeys resetchannels -@all +<cmd>… ~<written> %R~<read>…``. ``password_sha256``: hex SHA-256
    of the password (Redis stores no clear text); ``nodes``: a node-scoped service's nodes (its writes to the
    :data:`NODE_KEYED` families are limited to their keys; it reads every key).

    Raises ValueError for an unknown service or key family, or a node-scoped service without nodes."""
    grant = _check(service)
    if grant.node_scoped and not nodes:
        raise ValueError(f"{service}: give the names of the nodes it serves")
    patterns = key_patterns(prefix)
    written = sorted(patterns) if "*" in grant.writes else sorted(grant.writes)
    commands = [*CONNECT_COMMANDS, *READ_COMMANDS, *(WRITE_COMMANDS if written else ())]
    parts = [f"user {user or service}", "on", f"#{password_sha256}", "resetkeys", "resetchannels", "-@all"]
    parts += [f"+{c}" for c in commands]
    for name in written:
        if grant.node_scoped and name in NODE_KEYED:
            base = patterns[name].removesuffix("*")
            parts += [f"~{base}{n}" for n in nodes]
        else:
            parts.append(f"~{patterns[name]}")
    parts += [f"%R~{patterns[n]}" for n in sorted(patterns)
              if n not in written or (grant.node_scoped and n in NODE_KEYED)]
    return " ".join(parts)


def acl_file(rules: Iterable[str]) -> str:
    """A ``users.acl`` file: ``rules`` one per line, and the default user switched off (no anonymous access)."""
    return "\n".join(["user default off resetkeys -@all", *rules]) + "\n"
