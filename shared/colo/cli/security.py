"""``colo security init DIR``: write a development security setup (:mod:`colo.security`, docs/security.md)."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from rich.markup import escape

from colo.cli.output import console, err_console

_SPLIT = re.compile(r"[\s,]+")
_USER = re.compile(r"[A-Za-z0-9_-]+")


def _names(value: str) -> list[str]:
    """Node names in ``value``: ``N1,N2`` or the path of a JSON nodes file (a list of NodeSpec, as
    ``COLO_NODE_AGENT_NODES_FILE``). Raises ValueError for an unreadable or malformed file."""
    if value.endswith(".json"):
        try:
            specs = json.loads(Path(value).read_text())
            return [str(s["name"]) for s in specs]
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"{value}: not a nodes file (a JSON list of nodes with a name): {exc}") from exc
    return [n for n in _SPLIT.split(value) if n]


def _node_agents(args: argparse.Namespace) -> dict[str, tuple[str, ...]]:
    """User name → nodes of each node agent given by ``--nodes [USER=]NODES`` and ``--nodes-file``.
    Raises ValueError for a bad user name, a user given twice, a node served twice or an empty list."""
    from colo.security import node_agent_users

    named: list[tuple[str, list[str]]] = []
    for v in args.nodes or []:
        user, sep, rest = v.partition("=")
        named.append((user.strip(), _names(rest)) if sep else ("", _names(v)))
    if args.nodes_file:
        for line in Path(args.nodes_file).read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                named.append(("", _names(line)))
    users = node_agent_users([nodes for _, nodes in named])
    out: dict[str, tuple[str, ...]] = {}
    for (user, nodes), default in zip(named, users):
        name = user or default
        if not _USER.fullmatch(name):
            raise ValueError(f"node agent user {name!r}: use letters, digits, '-', '_'")
        if name in out:
            raise ValueError(f"node agent user {name!r} given twice")
        out[name] = tuple(nodes)
    return out


COMPOSE_MOUNT_DIR = "/run/colo-secrets"
"""Where compose.secure.yaml mounts the files of ``colo security init DIR --compose``."""
COMPOSE_NODE_AGENTS = ("node-agent-a=examples/nodes-a.json", "node-agent-b=examples/nodes-b.json")
"""compose.yaml's two node agents (their nodes files, relative to the repository root)."""
COMPOSE_INSTANCES = ("node-agent-a=agent-a", "node-agent-b=agent-b")
"""compose.yaml's ``COLO_INSTANCE`` of each node agent (their consumer names)."""


def _compose_defaults(args: argparse.Namespace) -> None:
    """``--compose``: what compose.yaml + compose.secure.yaml need, unless given: the service names ``nats`` and
    ``redis`` in the server certificate, files named under ``/run/colo-secrets``, JetStream in ``/data`` (the
    ``nats-data`` volume), the node agents ``node-agent-a``/``node-agent-b`` with compose.yaml's nodes files."""
    args.host = list(dict.fromkeys([*(args.host or []), "nats", "redis"]))
    args.mount_dir = args.mount_dir or COMPOSE_MOUNT_DIR
    args.jetstream_dir = args.jetstream_dir or "/data"
    if not args.nodes and not args.nodes_file:
        args.nodes = list(COMPOSE_NODE_AGENTS)
        args.instance = [*(args.instance or []), *COMPOSE_INSTANCES]


def cmd_security_init(args: argparse.Namespace) -> int:
    """Write the files of :func:`colo.security.init` into ``args.dir``; exit 2 on bad input."""
    from colo.security import SecurityPlan, init

    try:
        if args.compose:
            _compose_defaults(args)
        agents = _node_agents(args)
        if not agents:
            err_console.print("colo security init: give the node agents' nodes (--nodes n1,n2 once per node "
                              "agent, or --nodes-file)")
            return 2
        instances = dict(v.partition("=")[::2] for v in args.instance or [])
        plan = SecurityPlan(node_agents=agents, node_agent_instances=instances, hosts=tuple(args.host or ()),
                            store_prefix=args.store_prefix, nats_port=args.nats_port, redis_port=args.redis_port,
                            tls=not args.no_tls, jetstream_dir=args.jetstream_dir or "",
                            listen_host=args.listen_host, mount_dir=args.mount_dir or "")
        files = init(Path(args.dir), plan)
    except (ValueError, OSError) as exc:
        err_console.print(f"colo security init: {escape(str(exc))}")
        return 2
    console.print(f"wrote {len(files)} files into {escape(str(Path(args.dir).resolve()))}:")
    for f in files:
        console.print(f"  {escape(str(f))}")
    console.print("users: " + ", ".join(plan.users()) + "  (docs/security.md says how to start the servers)")
    return 0


def add_security_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``colo security init`` under ``sub``."""
    p = sub.add_parser("security", help="credentials, permissions and certificates for NATS, Redis and HTTP")
    ssub = p.add_subparsers(dest="security_cmd", required=True)
    i = ssub.add_parser("init", help="write a nats-server config with one user per service, Redis ACL users, a "
                                     "development CA and certificates, env files and an HTTP token into DIR")
    i.add_argument("dir", help="output directory (created 0700; files holding secrets are 0600)")
    i.add_argument("--nodes", action="append", metavar="[USER=]N1,N2|FILE.json",
                   help="the nodes of one node agent (repeat per node agent), as names or a JSON nodes file "
                        "(COLO_NODE_AGENT_NODES_FILE); USER names its user (default node-agent, or node-agent-N "
                        "for several): it may publish only these nodes' subjects")
    i.add_argument("--instance", action="append", metavar="USER=NAME",
                   help="the COLO_INSTANCE node agent USER runs with (repeatable): its consumers are named after "
                        "it, and its NATS user may touch no other consumer; written into its env file")
    i.add_argument("--nodes-file", help="one node agent per line: its node names, separated by blanks or commas")
    i.add_argument("--host", action="append", metavar="NAME",
                   help="an extra DNS name or IP of the servers' certificate (repeatable; e.g. nats, redis)")
    i.add_argument("--store-prefix", default="colo", help="the Redis key prefix granted (COLO_STORE_PREFIX)")
    i.add_argument("--listen-host", default="0.0.0.0",
                   help="the address nats-server and redis-server listen on (default 0.0.0.0, as in containers)")
    i.add_argument("--nats-port", type=int, default=4222)
    i.add_argument("--redis-port", type=int, default=6379)
    i.add_argument("--jetstream-dir", help="JetStream store_dir written in nats.conf (default: the server's)")
    i.add_argument("--no-tls", action="store_true", help="credentials only, no certificates or TLS settings")
    i.add_argument("--mount-dir", metavar="PATH",
                   help="the path at which containers mount DIR: nats.conf, redis-tls.conf and the services' env "
                        "files name their files under it (env/admin.env keeps the real paths, for the host)")
    i.add_argument("--compose", action="store_true",
                   help="for compose.secure.yaml (run from the repository root): --host nats --host redis, "
                        f"--mount-dir {COMPOSE_MOUNT_DIR}, --jetstream-dir /data and, unless --nodes is given, "
                        "compose.yaml's node agents node-agent-a/-b with examples/nodes-a.json, nodes-b.json")
    i.set_defaults(func=cmd_security_init)
