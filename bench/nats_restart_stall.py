"""How long a durable consumer stalls after nats-server is killed (-9) and started again on its JetStream store.

A producer publishes a PodSpec every ``--interval`` s; a consumer (``Bus.subscribe``, default pull expiry
``colo.subscription.PULL_EXPIRES_S``) handles them. ``--down`` s after the kill the server is started again on
the same port and store; the stall is the time from the server being back (accepting connections) to the
first message handled that was published after that moment. With ``--no-repull`` the consumer does not
pull again on reconnect (the behaviour before issue 15): it waits out the pull request the dead server forgot,
up to the expiry + 5 s. Repeated ``--runs`` times per mode (the stall depends on when the old pull was sent).
The last line is JSON.

Run: ``.venv/bin/python bench/nats_restart_stall.py`` (about 1 min), ``--no-repull`` for the old figure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import statistics
import tempfile
import time

from colo import subjects
from colo.bus import Bus
from colo.embedded import start_nats
from colo.messages import PodSpec


async def one_run(down_s: float, interval_s: float, warm_s: float) -> float:
    """Seconds from the restarted server being back to the first message published after it being handled."""
    with tempfile.TemporaryDirectory() as store_dir:
        server = start_nats(store_dir=store_dir)
        port = int(server.url.rsplit(":", 1)[1])
        handled: list[tuple[float, float]] = []  # (published at, handled at), monotonic

        async def on_pod(m: PodSpec) -> None:
            handled.append((m.created_at, time.monotonic()))

        consumer = await Bus.connect(server.url, "bench-consumer")
        producer = await Bus.connect(server.url, "bench-producer")
        stop = asyncio.Event()

        async def produce() -> None:
            k = 0
            while not stop.is_set():
                k += 1
                with contextlib.suppress(Exception):  # down: the message is lost, the next one is tried
                    await producer.publish(subjects.POD_SUBMITTED,
                                           PodSpec(uid=f"p{k}", name=f"p{k}", created_at=time.monotonic()))
                await asyncio.sleep(interval_s)

        try:
            await consumer.ensure_streams()
            await consumer.subscribe(subjects.POD_SUBMITTED, on_pod, durable="pods")
            task = asyncio.create_task(produce())
            await asyncio.sleep(warm_s)
            server.proc.kill()
            server.proc.wait(timeout=10)
            server.stop()
            await asyncio.sleep(down_s)
            server = start_nats(port=port, store_dir=store_dir)
            back = time.monotonic()
            while not any(pub >= back for pub, _ in handled):
                if time.monotonic() - back > 60:
                    raise RuntimeError("no message handled within 60 s of the restart")
                await asyncio.sleep(0.01)
            stop.set()
            await task
            return min(at for pub, at in handled if pub >= back) - back
        finally:
            await producer.close()
            await consumer.close()
            server.stop()


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--down", type=float, default=5.0, help="seconds the server stays down")
    ap.add_argument("--interval", type=float, default=0.05, help="seconds between published messages")
    ap.add_argument("--warm", type=float, default=3.0, help="seconds of traffic before the kill")
    ap.add_argument("--no-repull", action="store_true", help="do not pull again on reconnect (the old behaviour)")
    args = ap.parse_args()
    logging.getLogger("colo.bus").setLevel(logging.ERROR)  # the clients' reconnect attempts while it is down
    if args.no_repull:
        Bus.on_reconnected = lambda self: None  # type: ignore[method-assign]
    stalls = []
    for k in range(args.runs):
        s = await one_run(args.down, args.interval, args.warm)
        stalls.append(s)
        print(f"run {k + 1}: first message handled {s:.2f} s after the server was back")
    print(json.dumps({"repull": not args.no_repull, "runs": args.runs, "down_s": args.down,
                      "stall_s": [round(s, 3) for s in stalls], "stall_s_median": round(statistics.median(stalls), 3),
                      "stall_s_max": round(max(stalls), 3)}))


if __name__ == "__main__":
    asyncio.run(main())
