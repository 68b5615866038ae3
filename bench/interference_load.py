"""The two ends of ``bench/interference.py``: the LS pod's HTTP server and the open-loop load generator.

Server (run as the LS pod): ``python bench/interference_load.py PORT ITERATIONS`` serves GET on 127.0.0.1:PORT
one request at a time (stdlib ``http.server``, HTTP/1.0, a listen backlog of 1024 so that open-loop bursts
queue instead of being refused); each request runs :func:`work` for ITERATIONS iterations of pure-Python
integer arithmetic, a fixed amount of CPU work, so that interference shows as time.

Load generator (:func:`generate`, in the benchmark's process): request i is sent at t0 + i/rate on a new
connection whatever the earlier requests do (open loop: a slow server cannot slow the arrivals down); latency is
measured from the connect to the end of the response.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, Callable

import numpy as np

REQUEST = b"GET / HTTP/1.0\r\nHost: ls-web\r\n\r\n"


def work(n: int) -> int:
    """The handler's fixed CPU work: ``n`` iterations of integer arithmetic in pure Python."""
    x = 0
    for i in range(n):
        x = (x + i * i) % 1_000_003
    return x


class _Handler(BaseHTTPRequestHandler):
    work_n = 0

    def do_GET(self) -> None:
        body = f"{work(self.work_n)}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(HTTPServer):
    request_queue_size = 1024  # open-loop bursts must queue, not be refused (the default is 5)
    allow_reuse_address = True


def serve(port: int, work_n: int) -> None:
    """Serve GET on 127.0.0.1:``port``, one request at a time, each running ``work(work_n)``; never returns."""
    _Handler.work_n = work_n
    _Server(("127.0.0.1", port), _Handler).serve_forever()


def calibrate(target_ms: float, reps: int = 30, rounds: int = 3) -> tuple[int, float]:
    """Iterations of :func:`work` taking ``target_ms`` on an uncontended CPU; returns (iterations, ms measured).

    Each of ``rounds`` refinements scales the count by target / the fastest of ``reps`` timings (the fastest, so
    that a moment of other work on the machine does not shrink the count)."""
    n = 10_000
    best = target_ms
    for _ in range(rounds):
        best = min(_timed(n) for _ in range(reps)) * 1000
        n = max(int(n * target_ms / best), 1)
    return n, min(_timed(n) for _ in range(reps)) * 1000


def _timed(n: int) -> float:
    t = time.perf_counter()
    work(n)
    return time.perf_counter() - t


@dataclass
class LoadResult:
    """Latencies (seconds) of the counted requests, failed counted requests, the generator's lateness against
    its schedule (seconds, counted requests) and the counted window's length (seconds)."""

    latency_s: list[float] = field(default_factory=list)
    errors: int = 0
    lateness_s: list[float] = field(default_factory=list)
    window_s: float = 0.0


async def request(port: int, timeout_s: float) -> float:
    """One GET on a new connection to 127.0.0.1:``port``; seconds from the connect to the end of the response.
    Raises OSError (refused), asyncio.TimeoutError, RuntimeError (not a 200 answer)."""
    t = time.perf_counter()
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout_s)
    try:
        writer.write(REQUEST)
        data = await asyncio.wait_for(reader.read(), timeout_s)
    finally:
        writer.close()
    dt = time.perf_counter() - t
    if not data.startswith(b"HTTP/1.0 200"):
        raise RuntimeError(f"bad answer {data[:40]!r}")
    return dt


async def generate(port: int, rate: float, warmup_s: float, seconds: float,
                   at_window: Callable[[str], None], timeout_s: float = 10.0) -> LoadResult:
    """Open-loop load at ``rate`` requests/s for ``warmup_s`` + ``seconds``; only requests sent after the warm-up
    are counted. ``at_window("start")``/``("end")`` are called at the first and after the last counted send
    (to read CPU counters over exactly the counted window)."""
    res = LoadResult()
    n_warm, n = int(warmup_s * rate), int((warmup_s + seconds) * rate)
    tasks: list[asyncio.Task[None]] = []

    async def send(counted: bool) -> None:
        try:
            dt = await request(port, timeout_s)
        except (OSError, asyncio.TimeoutError, RuntimeError):
            res.errors += counted
            return
        if counted:
            res.latency_s.append(dt)

    t0 = time.perf_counter() + 0.05
    w0 = 0.0
    for i in range(n):
        target = t0 + i / rate
        delay = target - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if i == n_warm:
            at_window("start")
            w0 = time.perf_counter()
        if i >= n_warm:
            res.lateness_s.append(max(time.perf_counter() - target, 0.0))
        tasks.append(asyncio.create_task(send(i >= n_warm)))
    res.window_s = time.perf_counter() - w0
    at_window("end")
    await asyncio.gather(*tasks)
    return res


def set_sched(policy: str) -> str:
    """This thread SCHED_FIFO (priority 10) for ``fifo`` (needs CAP_SYS_NICE), else SCHED_OTHER; returns what
    it got."""
    if policy == "fifo":
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
            return "fifo"
        except OSError:
            pass
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    return "other"


def percentiles_ms(latency_s: list[float]) -> dict[str, float]:
    """p50/p90/p99/max/mean of ``latency_s`` in ms (NumPy's linear interpolation); NaN when empty."""
    if not latency_s:
        return dict.fromkeys(("p50_ms", "p90_ms", "p99_ms", "max_ms", "mean_ms"), float("nan"))
    a = np.asarray(latency_s) * 1000
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return {"p50_ms": round(float(p50), 3), "p90_ms": round(float(p90), 3), "p99_ms": round(float(p99), 3),
            "max_ms": round(float(a.max()), 3), "mean_ms": round(float(a.mean()), 3)}


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
