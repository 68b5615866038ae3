"""The ``colo`` command: up, submit, delete, reserve, get, describe, explain, events, kv, sub, traces fetch, sim
(docs/cli.md). One module per command group: :mod:`.connection` (where commands connect), :mod:`.submit`,
:mod:`.get` / :mod:`.describe` / :mod:`.delete` / :mod:`.delete_node` (pods and nodes), :mod:`.events`,
:mod:`.natsops` (``kv``, ``sub``), :mod:`.up`; this module only parses arguments.
"""

from __future__ import annotations

import argparse
import sys

from rich.markup import escape

from colo import subjects as S
from colo.cli.connection import (  # noqa: F401 (re-exported: the connection API of every command)
    CONNECT_ATTEMPTS,
    Connection,
    _settings,
    _up_state,
    connection,
    endpoints_path,
    resolve_connection,
    running_up_env,
    running_up_services,
)
from colo.cli.events import cmd_events, describe, follow_events, format_time, key_fields  # noqa: F401
from colo.cli.get import (  # noqa: F401 (colo get's tables live in get.py; re-exported)
    GET_KINDS,
    MAX_DECISION_LOOKUPS,
    _get,
    _nodes_table,
    pod_reason,
    pods_table,
    unschedulable_messages,
    waiting_pods,
)
from colo.cli.output import _mem, console, err_console  # noqa: F401
from colo.cli.reserve import add_reserve_parser
from colo.cli.up import CTRL_C_GRACE_S, cmd_up, stop_summary  # noqa: F401
from colo.settings import SettingsError


def cmd_explain(args: argparse.Namespace) -> int:
    """``colo explain UID | NAMESPACE/NAME | NAME -n NAMESPACE``: the scheduler's decision record of a pod."""
    from colo.cli.explain import cmd_explain as run

    return run(args, console, running_up_services(), lambda: connection("redis"))


def cmd_submit(args: argparse.Namespace) -> int:
    """``colo submit FILE``: every object of a manifest on its subject, then admission's answers
    (:mod:`colo.cli.submit`)."""
    from colo.cli.submit import cmd_submit as run

    return run(args, console, err_console, lambda: connection("nats").settings, CONNECT_ATTEMPTS)


def cmd_get(args: argparse.Namespace) -> int:
    """``colo get KIND [NAME]``: tables (or ``-o json|yaml|wide``) from the Redis snapshot, quotas from the quota
    stream (:mod:`colo.cli.get`)."""
    from colo.cli.get import cmd_get as run

    return run(args, connection("nats" if GET_KINDS[args.what] == "quotas" else "redis"))


def cmd_describe(args: argparse.Namespace) -> int:
    """``colo describe pod|node NAME``: everything the store knows of one object (:mod:`colo.cli.describe`)."""
    from colo.cli.describe import cmd_describe as run

    return run(args, connection("redis"))


def cmd_delete(args: argparse.Namespace) -> int:
    """``colo delete pod NAME``: end a pod through the bus (:mod:`colo.cli.delete`); ``colo delete node NAME``:
    forget a node (:mod:`colo.cli.delete_node`); ``colo delete reservation NAME``: end a reservation in the store
    (:func:`colo.cli.reserve.cmd_delete_reservation`)."""
    from colo.cli.delete import cmd_delete as run

    if args.force and args.what not in ("node", "nodes"):
        err_console.print("[red]--force applies to nodes only[/]", highlight=False)
        return 1
    if args.what in ("node", "nodes"):
        from colo.cli.delete_node import cmd_delete_node

        return cmd_delete_node(args, connection("nats", "redis"))
    if args.what in ("reservation", "reservations"):
        from colo.cli.reserve import cmd_delete_reservation

        return cmd_delete_reservation(args, connection("redis").settings)
    return run(args, connection("nats", "redis"))


def cmd_traces_fetch(args: argparse.Namespace) -> int:
    """Download the traces into the cache; verify sha256."""
    from pathlib import Path

    from colo.sim.fetch import FetchError, fetch_all
    from colo.sim.traces import CACHE_DIR

    try:
        written = fetch_all(Path(args.dest) if args.dest else CACHE_DIR, log=console.print)
    except FetchError as exc:
        console.print(f"[red]{escape(str(exc))}[/]", highlight=False, soft_wrap=True)
        return 1
    console.print(f"{len(written)} file(s) written; traces ready")
    return 0


def cmd_sim(args: argparse.Namespace) -> int:
    """The demo (see colo.sim.demo)."""
    from colo.sim.demo import run_demo

    return run_demo(args, console)


def _namespace_args(p: argparse.ArgumentParser, all_namespaces: bool = True) -> None:
    p.add_argument("-n", "--namespace", default="", help="only this namespace (pods; default: every namespace; "
                   "a NAME is then found in whichever namespace holds it)")
    if all_namespaces:
        p.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace (the default for lists)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    from colo.sim.demo import add_arguments

    parser = argparse.ArgumentParser(prog="colo", description="Colo co-location system")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("up", help="embedded NATS/Redis + the five services (Ctrl-C stops all)")
    p.add_argument("--nodes", type=int, default=10, help="simulated nodes sampled from the traces")
    p.add_argument("--seed", type=int, default=1, help="seed of the node sample")
    p.add_argument("--nodes-file", default="", help="JSON list of NodeSpec instead of the traces "
                   "(e.g. examples/nodes-a.json)")
    p.add_argument("--work-dir", default="out/up")
    p.set_defaults(func=cmd_up)
    p = sub.add_parser("submit", help="submit pods, workloads, PodGroups, quotas, reservations from a manifest")
    p.add_argument("file")
    p.add_argument("--dry-run", action="store_true", help="validate (admission's checks too) and show the pods "
                   "each workload expands into")
    p.add_argument("--no-wait", action="store_true", help="do not wait for admission's answers")
    p.add_argument("--wait-s", type=float, default=5.0, help="seconds to wait for admission's answers")
    p.set_defaults(func=cmd_submit)
    p = sub.add_parser("get", help="list (or show one of) pods, nodes, migration jobs, workloads, pod groups or "
                       "reservations from the store, or quotas from the quota stream")
    p.add_argument("what", choices=sorted(GET_KINDS), metavar="KIND",
                   help="pods|pod|po, nodes|node|no, migrations, workloads, podgroups, reservations, quotas")
    p.add_argument("name", nargs="?", default="", help="one object by name (pods: in -n NAMESPACE, or NS/NAME)")
    _namespace_args(p)
    p.add_argument("-o", "--output", choices=("table", "wide", "json", "yaml"), default="table",
                   help="pods and nodes: table (default), wide (more columns), json or yaml (the records)")
    p.set_defaults(func=cmd_get)
    p = sub.add_parser("describe", help="everything the store knows of one pod or node")
    p.add_argument("what", choices=("pod", "pods", "node", "nodes"))
    p.add_argument("name", help="pod NAME (with -n) or NAMESPACE/NAME or uid; node name")
    _namespace_args(p, all_namespaces=False)
    p.set_defaults(func=cmd_describe)
    p = sub.add_parser("delete", help="delete a pod (a pending one leaves the queue, a bound one is stopped), "
                       "a node (gone from the store and the scheduler's candidates) or a reservation (Aborted: "
                       "its held room returns to the node)")
    p.add_argument("what", choices=("pod", "pods", "node", "nodes", "reservation", "reservations"))
    p.add_argument("name", help="pod NAME (with -n) or NAMESPACE/NAME or uid; node name; reservation name")
    _namespace_args(p, all_namespaces=False)
    p.add_argument("--force", action="store_true",
                   help="node: delete it even with pods bound to it (they are ended, reason Deleted)")
    p.add_argument("--no-wait", action="store_true",
                   help="do not wait until the store shows the pod ended (the node gone)")
    p.add_argument("--wait-s", type=float, default=10.0, help="seconds to wait for the pod to end (the node to go)")
    p.set_defaults(func=cmd_delete)
    add_reserve_parser(sub)
    p = sub.add_parser("explain", help="why the scheduler placed a pod where it did (or nowhere)")
    p.add_argument("uid", help="pod uid, NAMESPACE/NAME, or NAME with -n NAMESPACE")
    p.add_argument("-n", "--namespace", default="", help="the pod's namespace (NAME is then its name)")
    p.add_argument("--scheduler", default="", help="scheduler base URL (default: $COLO_SCHEDULER_URL or colo up's)")
    p.add_argument("--live", action="store_true", help="a dry run now (queued pods) instead of the record")
    p.add_argument("--json", action="store_true", help="print the raw JSON")
    p.add_argument("--max-nodes", type=int, default=20, help="rejected nodes to list (0 = all)")
    p.set_defaults(func=cmd_explain)
    p = sub.add_parser("events", help="follow every Colo message, one line each")
    p.add_argument("--subject", default=f"{S.PREFIX}.>")
    p.add_argument("--count", type=int, default=0, help="stop after N messages (0 = follow)")
    p.add_argument("--time", choices=("ago", "iso", "unix"), default="ago",
                   help="how each message's own time is shown: '12s ago' (default), ISO 8601 UTC, or seconds")
    p.set_defaults(func=cmd_events)
    from colo.cli.natsops import add_nats_parsers

    add_nats_parsers(sub)
    from colo.cli.security import add_security_parser

    add_security_parser(sub)
    p = sub.add_parser("traces", help="trace files")
    tsub = p.add_subparsers(dest="traces_command", required=True)
    f = tsub.add_parser("fetch", help="download the public traces into ~/.cache/colo/traces")
    f.add_argument("--dest", default="")
    f.set_defaults(func=cmd_traces_fetch)
    p = sub.add_parser("sim", help="run the demo scenario: baseline vs colo, report")
    add_arguments(p)
    p.set_defaults(func=cmd_sim)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``colo``."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except SettingsError as exc:
        console.print(f"[red]{escape(str(exc))}[/]", highlight=False, soft_wrap=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
