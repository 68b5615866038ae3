"""The ``colo`` command: up, submit, reserve, get, events, traces fetch, sim (docs/cli.md).

Connection settings come from the common runtime settings (``COLO_NATS_URL``,
``COLO_REDIS_URL``, ``COLO_STORE_PREFIX``), see :mod:`colo.settings`. While ``colo up`` runs it
records its servers in :func:`endpoints_path`; the other commands use them when those variables
are not set. Every command that connects names the server it uses on stderr, and warns when it
falls back to the standard ports on 127.0.0.1 because neither is set nor a ``colo up`` runs
(:func:`connection`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.markup import escape

from colo import subjects as S
from colo.cli.get import (  # noqa: F401 (colo get's tables live in get.py; re-exported)
    MAX_DECISION_LOOKUPS,
    _get,
    _nodes_table,
    pod_reason,
    pods_table,
    unschedulable_messages,
    waiting_pods,
)
from colo.cli.output import _mem, console, err_console
from colo.cli.reserve import add_reserve_parser
from colo.codec import DecodeError, decode, to_builtins
from colo.messages import (
    ConfigApplied,
    ConfigRejected,
    DeadLetter,
    EvictionCommand,
    NodeMetric,
    NodeProfile,
    NodeResource,
    NodeSLO,
    NodeSpec,
    PodAdmitted,
    PodBound,
    PodMigrationJob,
    PodRejected,
    PodSpec,
    PodStatus,
    PodUnschedulable,
    QoSEvent,
    Resources,
)
from colo.quantity import format_cpu
from colo.settings import RuntimeSettings, SettingsError, load_runtime_settings

CONNECT_ATTEMPTS = 3
"""Tries of an unreachable NATS server (0.5 s apart, 5 s connect timeout each) before a command gives up."""


def endpoints_path() -> Path:
    """Where a running ``colo up`` records its servers: ``$COLO_STATE_DIR`` or ``~/.cache/colo``, ``up.json``."""
    base = os.environ.get("COLO_STATE_DIR") or str(Path.home() / ".cache" / "colo")
    return Path(base) / "up.json"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _up_state() -> tuple[dict[str, object], bool]:
    """The record of ``colo up`` (``{}`` when none or unreadable) and whether its process still runs."""
    try:
        state = json.loads(endpoints_path().read_text())
        if not isinstance(state, dict):
            return {}, False
        return state, _alive(int(state["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return {}, False


def _up_field(state: dict[str, object], alive: bool, key: str) -> dict[str, str]:
    value = state.get(key)
    if not alive or not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def running_up_env() -> dict[str, str]:
    """The ``COLO_*`` connection variables of a running ``colo up``, or {} when none runs."""
    return _up_field(*_up_state(), "env")


def running_up_services() -> dict[str, str]:
    """Service name → HTTP base URL of a running ``colo up``, or {} when none runs."""
    return _up_field(*_up_state(), "services")


def cmd_explain(args: argparse.Namespace) -> int:
    """``colo explain UID``: the scheduler's decision record of a pod."""
    from colo.cli.explain import cmd_explain as run

    return run(args, console, running_up_services())


@dataclass(frozen=True)
class Connection:
    """Where a command connects and why.

    ``source`` is ``env`` (``COLO_NATS_URL`` or ``COLO_REDIS_URL`` set: neither is taken from
    ``colo up``), ``up`` (the servers a running ``colo up`` recorded) or ``default`` (nothing set,
    no ``colo up``: the standard ports on 127.0.0.1 of :class:`colo.settings.RuntimeSettings`).
    ``notices`` are the lines :func:`connection` prints on stderr; ``scheduler_url`` is
    ``$COLO_SCHEDULER_URL``, else the scheduler of the ``colo up`` whose servers are used, else "".
    """

    settings: RuntimeSettings
    source: str
    notices: tuple[str, ...]
    scheduler_url: str = ""


def resolve_connection(uses: tuple[str, ...], environ: dict[str, str] | None = None) -> Connection:
    """The settings for a command that talks to ``uses`` (``"nats"`` and/or ``"redis"``) and the
    notices naming each server and where its address came from.

    Raises SettingsError for invalid ``COLO_*`` values (as :func:`colo.settings.load_runtime_settings`).
    """
    env = dict(os.environ if environ is None else environ)
    explicit = [k for k in ("COLO_NATS_URL", "COLO_REDIS_URL") if env.get(k)]
    state, alive = _up_state()
    up_env = {} if explicit else _up_field(state, alive, "env")
    source = "env" if explicit else "up" if up_env else "default"
    if up_env:
        env.update(up_env)
    settings = load_runtime_settings(env)
    pid = state.get("pid")
    notices: list[str] = []
    for what in uses:
        var = "COLO_NATS_URL" if what == "nats" else "COLO_REDIS_URL"
        if what == "nats":
            shown = f"NATS {settings.nats_url}"
        else:
            shown = f"Redis {settings.redis_url} (key prefix {settings.store_prefix!r})"
        if source == "up":
            notices.append(f"using {shown}: the servers of colo up (pid {pid})")
        elif var in explicit:
            notices.append(f"using {shown} from {var}")
        elif source == "env":
            notices.append(f"warning: {var} is not set (only {', '.join(explicit)} is): using the default {shown}")
        else:
            stale = (f"the colo up recorded in {endpoints_path()} (pid {pid}) has stopped"
                     if state and not alive else "no colo up is running")
            notices.append(f"warning: {stale} and {var} is not set: falling back to the default {shown}, "
                           f"whatever server listens there (start `colo up`, or set {var})")
    up_scheduler = _up_field(state, alive, "services").get("scheduler", "") if source == "up" else ""
    return Connection(settings, source, tuple(notices), env.get("COLO_SCHEDULER_URL", "") or up_scheduler)


def connection(*uses: str) -> Connection:
    """:func:`resolve_connection` for this process, its notices printed on stderr."""
    conn = resolve_connection(uses)
    for line in conn.notices:
        style = "yellow" if line.startswith("warning") else "dim"
        err_console.print(f"[{style}]{escape(line)}[/]", highlight=False, soft_wrap=True)
    return conn


def _settings() -> RuntimeSettings:
    """The connection settings alone (no notices)."""
    return resolve_connection(()).settings


# --------------------------------------------------------------------------- submit


def cmd_submit(args: argparse.Namespace) -> int:
    """``colo submit FILE``: every object of a manifest on its subject (:mod:`colo.cli.submit`)."""
    from colo.cli.submit import cmd_submit as run

    return run(args, console, err_console, lambda: connection("nats").settings.nats_url, CONNECT_ATTEMPTS)


# --------------------------------------------------------------------------- get


def cmd_get(args: argparse.Namespace) -> int:
    """Print nodes, pods or migration jobs from the Redis snapshot as a table (pods: with the scheduler's last message for
    the waiting ones, when a scheduler URL is known)."""
    conn = connection("nats" if args.what == "quotas" else "redis")
    try:
        console.print(asyncio.run(_get(args.what, conn)))
    except Exception as exc:
        err_console.print(f"[red]cannot read the store: {escape(str(exc))}[/]", highlight=False)
        return 1
    return 0


# --------------------------------------------------------------------------- events


def _resources(r: Resources) -> str:
    """The non-zero resources of ``r``: ``cpu=2 memory=4Gi batch-cpu=500m``."""
    parts = [f"cpu={format_cpu(r.cpu)}" if r.cpu else "", f"memory={_mem(r.memory)}" if r.memory else "",
             f"batch-cpu={format_cpu(r.batch_cpu)}" if r.batch_cpu else "",
             f"batch-memory={_mem(r.batch_memory)}" if r.batch_memory else "",
             f"mid-cpu={format_cpu(r.mid_cpu)}" if r.mid_cpu else "",
             f"mid-memory={_mem(r.mid_memory)}" if r.mid_memory else ""]
    return " ".join(p for p in parts if p) or "none"


def _pod(spec: PodSpec) -> str:
    from colo.classes import qos_class_of

    return f"{spec.namespace}/{spec.name} uid={spec.uid} qos={qos_class_of(spec)} requests {_resources(spec.requests)}"


def key_fields(msg: object) -> str:
    """The few fields that matter of a Colo message, for one event line (CPU as quantities of
    milli-cores, memory in binary units); other structs fall back to their scalar fields."""
    if isinstance(msg, PodSpec):
        return _pod(msg)
    if isinstance(msg, PodAdmitted):
        return _pod(msg.spec) + (f" profile={msg.profile}" if msg.profile else "")
    if isinstance(msg, PodRejected):
        return f"uid={msg.uid} name={msg.name} reason={msg.reason}"
    if isinstance(msg, PodBound):
        return f"{msg.spec.namespace}/{msg.spec.name} uid={msg.spec.uid} node={msg.node} attempt={msg.attempt_ms:.2f}ms"
    if isinstance(msg, PodUnschedulable):
        return f"uid={msg.uid} attempts={msg.attempts} {msg.message}"
    if isinstance(msg, PodStatus):
        return f"uid={msg.uid} node={msg.node} phase={msg.phase}" + (f" reason={msg.reason}" if msg.reason else "")
    if isinstance(msg, EvictionCommand):
        return f"uid={msg.uid} node={msg.node} reason={msg.reason}" + (f" by={msg.by}" if msg.by else "")
    if isinstance(msg, NodeSpec):
        a = msg.allocatable
        return f"node={msg.name} allocatable cpu={format_cpu(a.cpu)} memory={_mem(a.memory)} pods={a.pods}"
    if isinstance(msg, NodeResource):
        offer = Resources(batch_cpu=msg.batch_cpu, batch_memory=msg.batch_memory,
                          mid_cpu=msg.mid_cpu, mid_memory=msg.mid_memory)
        return f"node={msg.node} {_resources(offer)}" + (f" reason={msg.reason}" if msg.reason else "")
    if isinstance(msg, NodeSLO):
        return (f"node={msg.node} cpu-suppress={msg.cpu_suppress.threshold_percent}% "
                f"memory-evict={msg.memory_evict.threshold_percent if msg.memory_evict.enabled else 'off'}"
                + ("%" if msg.memory_evict.enabled else "") + (f" pool={msg.pool}" if msg.pool else ""))
    if isinstance(msg, NodeMetric):
        u = msg.node_usage
        allowed = f" be-cpu-allowed={format_cpu(msg.be_cpu_allowed)}" if msg.be_cpu_allowed >= 0 else ""
        return f"node={msg.node} cpu={format_cpu(u.cpu)} memory={_mem(u.memory)} pods={len(msg.pods)}{allowed}"
    if isinstance(msg, QoSEvent):
        pods = f" pods={','.join(msg.pods[:3])}{'…' if len(msg.pods) > 3 else ''}" if msg.pods else ""
        return f"node={msg.node} kind={msg.kind}" + (f" reason={msg.reason}" if msg.reason else "") + pods
    if isinstance(msg, NodeProfile):
        r = msg.prod_reclaimable
        return f"node={msg.node} prod-reclaimable cpu={format_cpu(r.cpu)} memory={_mem(r.memory)} pods={len(msg.pods)}"
    if isinstance(msg, DeadLetter):
        return f"service={msg.service} subject={msg.subject} reason={msg.reason}"
    if isinstance(msg, PodMigrationJob):
        rsv = f" reservation={msg.reservation}" if msg.reservation else ""
        return (f"job={msg.id} pod={msg.namespace}/{msg.name or msg.uid} {msg.source}→{msg.target} "
                f"phase={msg.phase}{rsv} reason={msg.reason}")
    if isinstance(msg, ConfigApplied):
        restart = f" restart-required={','.join(msg.restart_required)}" if msg.restart_required else ""
        return f"service={msg.service} version={msg.version} trigger={msg.trigger}{restart}"
    if isinstance(msg, ConfigRejected):
        return (f"service={msg.service} trigger={msg.trigger} in-force={msg.version_in_force} "
                f"{len(msg.errors)} problem(s): {'; '.join(msg.errors)}")
    d = to_builtins(msg)
    if isinstance(d, dict):
        return " ".join(f"{k}={v}" for k, v in d.items() if isinstance(v, (str, int, float)) and v not in ("",))
    return str(d)


def describe(subject: str, data: bytes) -> str:
    """One human-readable line for a message on ``subject`` (decoded with its registered type):
    the subject without ``colo.v1.``, the type and :func:`key_fields`. Never more than one line."""
    reg = S.by_subject(subject)
    short = subject.removeprefix(S.PREFIX + ".")
    if reg is None:
        return f"{short}  ({len(data)} bytes, unregistered subject)"
    try:
        msg = decode(data, reg.type)
    except DecodeError as exc:
        return f"{short}  undecodable: {exc}".replace("\n", " ")
    return f"{short}  {type(msg).__name__} {key_fields(msg)}".replace("\n", " ")


async def follow_events(nats_url: str, count: int, subject: str, write: Callable[[str], None]) -> int:
    """Subscribe to ``subject`` and ``write`` one line per message (:func:`describe`, prefixed with the
    local time) until ``count`` messages (0 = until SIGINT/SIGTERM). Messages that arrive after the
    count was reached are not written. Returns the number of lines written."""
    import nats

    async def quiet(exc: Exception) -> None:  # the caller reports a final failure once
        pass

    nc = await nats.connect(nats_url, connect_timeout=5, max_reconnect_attempts=CONNECT_ATTEMPTS,
                            reconnect_time_wait=0.5, error_cb=quiet)
    done = asyncio.Event()
    seen = 0

    async def on_msg(msg: Any) -> None:
        nonlocal seen
        if count and seen >= count:
            return
        seen += 1
        write(f"{time.strftime('%H:%M:%S')} {describe(msg.subject, msg.data)}")
        if count and seen >= count:
            done.set()

    sub = await nc.subscribe(subject, cb=on_msg)
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, done.set)
    try:
        await done.wait()
        await sub.unsubscribe()
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
        await nc.drain()
    return seen


def _print_line(line: str) -> None:
    print(line, flush=True)


def cmd_events(args: argparse.Namespace) -> int:
    """Follow ``colo.v1.>`` (or ``--subject``) and print each message on one line until Ctrl-C or ``--count``."""
    if args.count < 0:
        err_console.print("[red]--count must be 0 (follow) or more[/]")
        return 2
    conn = connection("nats")
    try:
        asyncio.run(follow_events(conn.settings.nats_url, args.count, args.subject, _print_line))
    except Exception as exc:
        err_console.print(f"[red]cannot follow events: {escape(str(exc))}[/]", highlight=False)
        return 1
    return 0


# --------------------------------------------------------------------------- traces / sim / up


def cmd_traces_fetch(args: argparse.Namespace) -> int:
    """Download the traces into the cache; verify sha256."""
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


def _up_nodes(args: argparse.Namespace) -> list[NodeSpec]:
    """Nodes for the sim node agent: ``--nodes-file`` (JSON list of NodeSpec) or sampled from the traces."""
    if args.nodes_file:
        try:
            return decode(Path(args.nodes_file).read_bytes(), list[NodeSpec])
        except (OSError, DecodeError) as exc:
            raise SystemExit(f"--nodes-file {args.nodes_file}: {exc}") from exc
    from colo.sim.scenario import ScenarioParams, build_scenario

    return build_scenario(ScenarioParams(nodes=args.nodes, hours=1, seed=args.seed)).nodes


async def _up(args: argparse.Namespace) -> int:
    from colo.embedded import EmbeddedServers
    from colo.sim.run import NODES_FILE_ENV, _write_nodes
    from colo.sim.services import Supervisor

    out = Path(args.work_dir)
    nodes = _up_nodes(args)
    nodes_file = out / "up-nodes.json"
    _write_nodes(nodes_file, nodes)
    nats_url = os.environ.get("COLO_NATS_URL")
    redis_url = os.environ.get("COLO_REDIS_URL")
    state = endpoints_path()
    with EmbeddedServers(nats=not nats_url, redis=not redis_url) as servers:
        env = {"COLO_NATS_URL": nats_url or servers.nats_url, "COLO_REDIS_URL": redis_url or servers.redis_url,
               "COLO_SIM": "0", NODES_FILE_ENV: str(nodes_file)}
        sup = Supervisor("up", env, out / "logs")
        stop = asyncio.Event()
        received: list[int] = []
        loop = asyncio.get_running_loop()

        def on_signal(sig: int) -> None:
            received.append(sig)
            stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal, sig)
        try:
            await sup.start_all()
            state.parent.mkdir(parents=True, exist_ok=True)
            conn = {k: env[k] for k in ("COLO_NATS_URL", "COLO_REDIS_URL")}
            services = {name: f"http://127.0.0.1:{p.port}" for name, p in sup.procs.items()}
            state.write_text(json.dumps({"pid": os.getpid(), "env": conn, "services": services}))
            console.print(f"NATS {env['COLO_NATS_URL']}  Redis {env['COLO_REDIS_URL']}", soft_wrap=True)
            for name, p in sup.procs.items():
                console.print(f"  {name:<12} pid {p.proc.pid}  http://127.0.0.1:{p.port}  log {p.log_path}",
                              soft_wrap=True)
            console.print(f"{len(nodes)} simulated nodes; all services ready; Ctrl-C stops everything")
            console.print("colo submit/get/events in another shell find these servers by themselves; other "
                          f"clients: export {' '.join(f'{k}={v}' for k, v in conn.items())}", soft_wrap=True)
            while not stop.is_set():
                sup.check_alive()
                try:
                    await asyncio.wait_for(stop.wait(), 1.0)
                except asyncio.TimeoutError:
                    pass
        finally:
            try:
                if json.loads(state.read_text()).get("pid") == os.getpid():
                    state.unlink()
            except (OSError, ValueError):
                pass
            if received[:1] == [signal.SIGINT] and sup.procs:
                # Ctrl-C reached every process of the terminal's foreground group, services included:
                # let them finish their own shutdown. A SIGTERM sent meanwhile could land after one
                # had closed its event loop (signal handlers gone) and kill it with -15.
                console.print("stopping: the services got Ctrl-C too, waiting for them to finish "
                              f"(up to {CTRL_C_GRACE_S:g} s)")
                await _wait_exited([p.proc for p in sup.procs.values()], CTRL_C_GRACE_S)
            sent_term = {name for name, p in sup.procs.items() if p.proc.poll() is None}
            codes = await asyncio.to_thread(sup.stop_all)
            logs = {name: p.log_path for name, p in sup.procs.items()}
            lines, failed = stop_summary(codes, logs, sent_term)
            for line in lines:
                bad = "FAILED" in line or "was killed" in line
                console.print(escape(line), soft_wrap=True, highlight=False,
                              style="red" if bad else "green" if line.startswith("all") else None)
    return 1 if failed else 0


CTRL_C_GRACE_S = 10.0
"""Seconds ``colo up`` waits after Ctrl-C for the services to stop by themselves before it sends SIGTERM
(the same 10 s the supervisor then allows after SIGTERM before SIGKILL)."""


async def _wait_exited(procs: list[subprocess.Popen[bytes]], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


def stop_summary(codes: Mapping[str, int | None], logs: Mapping[str, Path],
                 sent_term: set[str]) -> tuple[list[str], bool]:
    """Lines telling how each service of ``colo up`` ended, and whether any failed.

    ``codes`` are exit codes as :meth:`subprocess.Popen.returncode` gives them (negative: the signal
    that ended the process); ``sent_term`` the services that were still running when ``colo up``
    sent SIGTERM. 0 = stopped cleanly; −15 (SIGTERM) after ``colo up``'s own SIGTERM = ended by it
    before finishing its exit (not a failure: it was being stopped); −9 = killed after not stopping
    within 10 s of SIGTERM (a failure, like any other code). Every failure names its log.
    """
    clean = [n for n, c in codes.items() if c == 0]
    failed = False
    lines: list[str] = []
    if len(clean) == len(codes):
        return [f"all {len(codes)} services stopped cleanly"], False
    for name, code in codes.items():
        if code == 0:
            continue
        log = logs.get(name, "?")
        if code == -signal.SIGTERM and name in sent_term:
            lines.append(f"{name}: ended by colo up's SIGTERM (exit -15) before it finished exiting; log {log}")
        elif code == -signal.SIGKILL and name in sent_term:
            failed = True
            lines.append(f"{name}: did not stop within 10 s of SIGTERM and was killed (exit -9); log {log}")
        elif code is not None and code < 0:
            failed = True
            lines.append(f"{name}: FAILED, killed by signal {-code} ({_signal_name(-code)}); log {log}")
        else:
            failed = True
            lines.append(f"{name}: FAILED with exit code {code}; log {log}")
    if clean:
        lines.insert(0, f"{len(clean)} of {len(codes)} services stopped cleanly ({', '.join(clean)})")
    return lines, failed


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return "unknown"


def cmd_up(args: argparse.Namespace) -> int:
    """Embedded servers (unless URLs are set) + the five services on the wall clock."""
    try:
        return asyncio.run(_up(args))
    except Exception as exc:
        console.print(f"[red]{escape(str(exc))}[/]", highlight=False, soft_wrap=True)
        return 1


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
    p.add_argument("--dry-run", action="store_true", help="validate and show the pods each workload expands into")
    p.set_defaults(func=cmd_submit)
    p = sub.add_parser("get", help="list nodes, pods, migration jobs, workloads, pod groups or reservations "
                       "from the store, or quotas from the quota stream")
    p.add_argument("what", choices=("nodes", "pods", "migrations", "workloads", "podgroups", "reservations",
                                    "quotas"))
    p.set_defaults(func=cmd_get)
    add_reserve_parser(sub)
    p = sub.add_parser("explain", help="why the scheduler placed a pod where it did (or nowhere)")
    p.add_argument("uid", help="pod uid, or NAMESPACE/NAME of a pod submitted without an explicit uid")
    p.add_argument("--scheduler", default="", help="scheduler base URL (default: $COLO_SCHEDULER_URL or colo up's)")
    p.add_argument("--live", action="store_true", help="a dry run now (queued pods) instead of the record")
    p.add_argument("--json", action="store_true", help="print the raw JSON")
    p.add_argument("--max-nodes", type=int, default=20, help="rejected nodes to list (0 = all)")
    p.set_defaults(func=cmd_explain)
    p = sub.add_parser("events", help="follow every Colo message, one line each")
    p.add_argument("--subject", default=f"{S.PREFIX}.>")
    p.add_argument("--count", type=int, default=0, help="stop after N messages (0 = follow)")
    p.set_defaults(func=cmd_events)
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
