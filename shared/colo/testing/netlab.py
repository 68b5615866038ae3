"""A network lab on this machine for network QoS tests and the ``bench/net_qos.py`` benchmark: two network
namespaces joined by a veth pair, a receiver that counts bytes per sender, and a cgroup root with ``net_prio``.

* :class:`NetLab` makes namespace ``colo-rx-<hex>`` (``ip netns add``) and a veth pair from this process's
  namespace (the host network, where the agent and its pods run: ``net_prio`` maps only devices of the initial
  namespace) into it, with a /30 of 10.210.0.0/16 chosen at random; on exit, even after a failure, the
  namespace is removed and the veth pair with it.
* :func:`net_prio_root` yields a cgroup root directory in a temp dir: symlinks to this machine's v1 hierarchies
  plus ``net_prio`` mounted there (the machine has the controller but does not mount it); unmounted on exit.
* :data:`RECEIVER` / :data:`SENDER`: a TCP receiver (in the rx namespace) that waits for every tagged sender,
  counts each one's bytes over a measured window after a warm-up and prints ``{tag: bits/s}`` as JSON; a
  sender (on the host network, e.g. a pod's command) that sends 64 KiB writes as fast as TCP lets it.

:func:`lab_problem` says why the lab cannot run here ("" when it can): not root, no ``ip``/``tc``, no netns.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
LINKED = ("cpu", "cpuacct", "cpuset", "memory", "blkio", "unified")
"""Hierarchies of the real root linked into :func:`net_cls_root`'s directory."""

RECEIVER = r"""
import json, socket, sys, threading, time
host, port, tags, warm, secs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), float(sys.argv[4]), float(sys.argv[5])
count = dict.fromkeys(tags, 0)
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); srv.bind((host, port)); srv.listen(8)
print("listening", flush=True)
def serve(c):
    head = b""
    while len(head) < 16:
        head += c.recv(16 - len(head))
    tag = head.decode().strip()
    while True:
        b = c.recv(1 << 16)
        if not b:
            return
        count[tag] += len(b)
conns = []
while len(conns) < len(tags):
    c, _ = srv.accept(); conns.append(c); threading.Thread(target=serve, args=(c,), daemon=True).start()
time.sleep(warm)
start = dict(count); t0 = time.monotonic()
time.sleep(secs)
dt = time.monotonic() - t0
print(json.dumps({t: (count[t] - start[t]) * 8 / dt for t in tags}), flush=True)
"""
"""``python -c RECEIVER HOST PORT TAG,TAG WARMUP_S SECONDS``: one JSON line of bits/s per tag."""

SENDER = r"""
import socket, sys, time
host, port, tag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
for _ in range(200):
    try:
        s = socket.create_connection((host, port), timeout=5); break
    except OSError:
        time.sleep(0.05)
s.sendall(tag.encode().ljust(15) + b"\n")
chunk = b"x" * (1 << 16)
while True:
    s.sendall(chunk)
"""
"""``python -c SENDER HOST PORT TAG``: connect (retrying for 10 s), send the tag, then send forever."""


def _run(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True, timeout=10)


def lab_problem() -> str:
    """Why :class:`NetLab` cannot run on this machine ("" when it can)."""
    if os.geteuid() != 0:
        return "needs root (ip netns, tc, mount)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"{tool} (iproute2) not found"
    name = f"colo-probe-{uuid.uuid4().hex[:8]}"
    try:
        _run("ip", "netns", "add", name)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"ip netns add fails here: {exc}"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        _run("ip", "netns", "del", name)
    return ""


class NetLab:
    """This network namespace and a new one joined by a veth pair (module doc). ``rx`` the new namespace,
    ``tx_if`` the sender side's interface (here), ``rx_addr`` the receiver's IPv4 address."""

    def __init__(self) -> None:
        h = uuid.uuid4().hex[:8]
        self.rx = f"colo-rx-{h}"
        self.tx_if, self.rx_if = f"ctx{h}", f"crx{h}"
        net = random.randrange(0, 1 << 14) * 4
        base = f"10.210.{net >> 8}."
        self.tx_addr, self.rx_addr = f"{base}{(net & 255) + 1}", f"{base}{(net & 255) + 2}"

    def __enter__(self) -> NetLab:
        try:
            _run("ip", "netns", "add", self.rx)
            _run("ip", "link", "add", self.tx_if, "type", "veth", "peer", "name", self.rx_if, "netns", self.rx)
            _run("ip", "addr", "add", f"{self.tx_addr}/30", "dev", self.tx_if)
            _run("ip", "link", "set", self.tx_if, "up")
            _run("ip", "-n", self.rx, "addr", "add", f"{self.rx_addr}/30", "dev", self.rx_if)
            _run("ip", "-n", self.rx, "link", "set", self.rx_if, "up")
            _run("ip", "-n", self.rx, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Remove the namespace and the veth pair; missing ones are fine."""
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            _run("ip", "netns", "del", self.rx)
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            _run("ip", "link", "del", self.tx_if)

    def exec_args(self, ns: str, *cmd: str) -> list[str]:
        """``cmd`` run inside namespace ``ns``."""
        return ["ip", "netns", "exec", ns, *cmd]


@contextlib.contextmanager
def net_prio_root() -> Iterator[Path]:
    """A cgroup root with this machine's v1 hierarchies linked in and ``net_prio`` mounted (module doc).
    Raises OSError/CalledProcessError when ``net_prio`` cannot be mounted (e.g. co-mounted elsewhere)."""
    root = Path(tempfile.mkdtemp(prefix="colo-cgroot-"))
    mounted = False
    try:
        for name in LINKED:
            if (CGROUP_ROOT / name).is_dir():
                (root / name).symlink_to(CGROUP_ROOT / name)
        (root / "net_prio").mkdir()
        _run("mount", "-t", "cgroup", "-o", "net_prio", "colo-net_prio", str(root / "net_prio"))
        mounted = True
        yield root
    finally:
        if mounted:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                _run("umount", str(root / "net_prio"))
        shutil.rmtree(root, ignore_errors=True)
