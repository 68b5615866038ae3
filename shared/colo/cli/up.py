"""``colo up``: embedded NATS/Redis, the five services and the REST API on the wall clock, until Ctrl-C (docs/cli.md)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape

from colo.cli.connection import endpoints_path
from colo.cli.output import console
from colo.codec import DecodeError, decode
from colo.messages import NodeSpec

if TYPE_CHECKING:
    from colo.sim.services import Supervisor


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
    from colo.sim.services import SERVICES, Supervisor

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
        sup = Supervisor("up", env, out / "logs", services=SERVICES)
        stop = asyncio.Event()
        received: list[int] = []
        loop = asyncio.get_running_loop()

        def on_signal(sig: int) -> None:
            received.append(sig)
            stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal, sig)
        try:
            await start_up_services(sup)
            state.parent.mkdir(parents=True, exist_ok=True)
            conn = {k: env[k] for k in ("COLO_NATS_URL", "COLO_REDIS_URL")}
            services = {name: f"http://127.0.0.1:{p.port}" for name, p in sup.procs.items()}
            state.write_text(json.dumps({"pid": os.getpid(), "env": conn, "services": services}))
            console.print(f"NATS {env['COLO_NATS_URL']}  Redis {env['COLO_REDIS_URL']}", soft_wrap=True)
            for name, p in sup.procs.items():
                console.print(f"  {name:<12} pid {p.proc.pid}  http://127.0.0.1:{p.port}  log {p.log_path}",
                              soft_wrap=True)
            if "api" in sup.procs:
                console.print(f"REST API and web dashboard: http://127.0.0.1:{sup.procs['api'].port}/ (docs/api.md)",
                              soft_wrap=True)
                if not any(os.environ.get(k) for k in API_TOKEN_ENV):
                    console.print("  the API has no token: open to anyone who can reach 127.0.0.1 (set "
                                  "COLO_API_TOKEN or COLO_API_TOKEN_FILE to require one)", soft_wrap=True)
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


UP_EXTRA_SERVICES: tuple[tuple[str, str], ...] = (("api", "colo_api"),)
"""Services ``colo up`` starts beside the five of the simulator: the REST API with the web dashboard."""


async def start_up_services(sup: Supervisor) -> None:
    """Start the supervisor's services, then :data:`UP_EXTRA_SERVICES` told where the scheduler listens
    (``COLO_API_SCHEDULER_URL``: the dashboard's decision panel and ``/v1/explain`` ask it); raises
    ServiceError. The extra services start last because a port is known only once its service is spawned."""
    await sup.start_all()
    extra: dict[str, str] = {}
    if "scheduler" in sup.procs:
        extra["COLO_API_SCHEDULER_URL"] = f"http://127.0.0.1:{sup.procs['scheduler'].port}"
    for name, module in UP_EXTRA_SERVICES:
        await sup.start(name, module, extra)

API_TOKEN_ENV = ("COLO_API_TOKEN", "COLO_API_TOKEN_FILE", "COLO_HTTP_TOKEN_FILE")
"""Variables any of which gives the API a bearer token (docs/api.md); with none ``colo up`` says it is open."""

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
    """Embedded servers (unless URLs are set) + the five services and the REST API on the wall clock."""
    try:
        return asyncio.run(_up(args))
    except Exception as exc:
        console.print(f"[red]{escape(str(exc))}[/]", highlight=False, soft_wrap=True)
        return 1
