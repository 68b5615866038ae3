"""A private Docker Engine for the compose test: started here, stopped here, never anyone else's.

The daemon listens on its own unix socket (``<run_dir>/docker.sock``), keeps its state in ``data_root``
(kept between runs as a cache: stand-in images, built images, build cache) and its runtime files in
``<run_dir>/exec``. It leaves the host's network configuration as it found it: ``--bridge=none`` (no
``docker0``), ``--iptables=false --ip-masq=false`` (no chains, no NAT: published ports go through
docker-proxy, image builds use the host network) and ``--ip-forward=false`` (``net.ipv4.ip_forward`` untouched);
compose networks are user-defined bridges the daemon removes again on ``docker compose down``. A socket that already
answers is refused rather than reused: this module only ever stops the process it started itself.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from types import TracebackType

_START_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 30.0


class DockerdError(RuntimeError):
    """dockerd is missing, did not answer in time, or the socket is already another daemon's."""


def _docker_cli() -> str:
    found = shutil.which("docker")
    if found is None:
        raise DockerdError("docker CLI not found on PATH (Debian: apt-get install docker.io)")
    return found


class Dockerd:
    """``with Dockerd(data_root, run_dir) as d:`` — a dockerd of our own; ``d.env`` points the CLI at it.

    ``data_root``: the daemon's ``--data-root`` (kept: the cache). ``run_dir``: socket, pid file and exec root,
    removed at stop (keep it short: a unix socket path has at most 107 bytes). ``log_path``: the daemon's log
    (kept). Raises
    :class:`DockerdError` when ``dockerd`` is not installed or does not answer within 60 s.
    """

    def __init__(self, data_root: Path, run_dir: Path, log_path: Path) -> None:
        self.data_root = data_root
        self.run_dir = run_dir
        self.socket = run_dir / "docker.sock"
        self.log_path = log_path
        self._exec_root = run_dir / "exec"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        """``DOCKER_HOST`` value of this daemon."""
        return f"unix://{self.socket}"

    @property
    def env(self) -> dict[str, str]:
        """The process environment with ``DOCKER_HOST`` set to this daemon (and no other context)."""
        env = {k: v for k, v in os.environ.items() if k not in ("DOCKER_CONTEXT", "DOCKER_TLS_VERIFY")}
        env["DOCKER_HOST"] = self.host
        return env

    def _answers(self) -> bool:
        probe = subprocess.run([_docker_cli(), "version", "--format", "{{.Server.Version}}"],
                               env=self.env, capture_output=True, timeout=10)
        return probe.returncode == 0

    def start(self) -> None:
        """Start dockerd and wait until ``docker version`` answers through its socket."""
        binary = shutil.which("dockerd")
        if binary is None:
            raise DockerdError("dockerd not found on PATH (Debian: apt-get install docker.io)")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.data_root.mkdir(parents=True, exist_ok=True)
        if self.socket.exists() and self._answers():
            raise DockerdError(f"{self.socket} already answers: another daemon owns it (not ours to stop)")
        self.socket.unlink(missing_ok=True)
        cmd = [binary, "--data-root", str(self.data_root), "--exec-root", str(self._exec_root),
               "--pidfile", str(self.run_dir / "dockerd.pid"), "-H", self.host,
               "--bridge=none", "--iptables=false", "--ip-forward=false", "--ip-masq=false"]
        with self.log_path.open("ab") as log:
            # own session: a Ctrl-C of the test reaches the test, which stops the daemon in order
            self._proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise DockerdError(f"dockerd exited with {self._proc.returncode}; see {self.log_path}")
            if self.socket.exists() and self._answers():
                return
            time.sleep(0.5)
        self.stop()
        raise DockerdError(f"dockerd did not answer within {_START_TIMEOUT_S:.0f} s; see {self.log_path}")

    def stop(self) -> None:
        """SIGTERM the daemon we started (it stops its containerd), SIGKILL after 30 s; unmount what it left
        mounted under ``run_dir`` and remove the runtime files. Harmless when called twice."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=_STOP_TIMEOUT_S)
        self.socket.unlink(missing_ok=True)
        for mount in self.leftover_mounts():  # e.g. the host network namespace of --network host builds
            subprocess.run(["umount", "-l", mount], capture_output=True)
        left = self.leftover_mounts()
        shutil.rmtree(self.run_dir, ignore_errors=True)
        if left:
            raise DockerdError(f"still mounted after stop: {left}")

    def leftover_mounts(self) -> list[str]:
        """Mount points under ``run_dir`` (the daemon's exec root), deepest first."""
        prefix = str(self.run_dir.resolve()) + "/"
        with open("/proc/self/mounts") as mounts:
            points = [line.split()[1] for line in mounts if line.split()[1].startswith(prefix)]
        return sorted(points, key=len, reverse=True)

    def __enter__(self) -> Dockerd:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
