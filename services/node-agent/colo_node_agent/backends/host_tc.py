"""The ``tc`` commands of network QoS, all in one place (iproute2 through subprocess; pyroute2 would add a
dependency for four commands). docs/node-agent.md "Network QoS".

:func:`install_commands` builds the HTB tree of :func:`~colo_node_agent.strategies.net_qos.htb_classes`
with ``replace`` (re-running changes the rates in place; the root qdisc is only made when the agent's is not
there already: HTB refuses a change of itself); no filter is needed, HTB picks the class
named by a packet's priority. :func:`remove` deletes the root qdisc only when it is the agent's (handle
``c0:``), never someone else's.
"""

from __future__ import annotations

import shutil
import subprocess

from colo_node_agent.strategies.net_qos import DEFAULT_MINOR, QDISC_MAJOR, HTBClass

TIMEOUT_S = 5.0
HANDLE = f"{QDISC_MAJOR:x}:"


class TCError(RuntimeError):
    """A ``tc`` command failed; the message names the command and what ``tc`` said."""


def _tc() -> str:
    return shutil.which("tc") or "tc"


def install_commands(interface: str, classes: list[HTBClass]) -> list[list[str]]:
    """The commands that put ``classes`` (parents first) on ``interface``: the root HTB qdisc ``c0:``
    (default class ``c0:30``), then each class."""
    tc = _tc()
    out = [[tc, "qdisc", "replace", "dev", interface, "root", "handle", HANDLE, "htb", "default", f"{DEFAULT_MINOR:x}"]]
    for c in classes:
        parent = HANDLE if c.parent == 0 else f"{QDISC_MAJOR:x}:{c.parent:x}"
        out.append([tc, "class", "replace", "dev", interface, "parent", parent, "classid", c.classid, "htb",
                    "rate", f"{c.rate_bps}bit", "ceil", f"{c.ceil_bps}bit", "prio", str(c.prio)])
    return out


def run(cmd: list[str]) -> str:
    """Run one command; its stdout. Raises TCError (non-zero exit, no ``tc``, timeout)."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TCError(f"{' '.join(cmd)}: {exc}") from exc
    if done.returncode != 0:
        raise TCError(f"{' '.join(cmd)}: exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def install(interface: str, classes: list[HTBClass]) -> None:
    """Run :func:`install_commands` (the qdisc only when :func:`ours` is not there yet, e.g. after an agent
    restart). Raises TCError at the first failure."""
    cmds = install_commands(interface, classes)
    for cmd in cmds[1:] if ours(interface) else cmds:
        run(cmd)


def ours(interface: str) -> bool:
    """Whether the root qdisc of ``interface`` is the agent's HTB ``c0:``. Raises TCError."""
    text = run([_tc(), "qdisc", "show", "dev", interface, "root"])
    return any(line.split()[:3] == ["qdisc", "htb", HANDLE] for line in text.splitlines() if line.strip())


def remove(interface: str) -> bool:
    """Delete the agent's root qdisc (and with it its classes) from ``interface``; False when the root qdisc
    is not the agent's (left alone). Raises TCError."""
    if not ours(interface):
        return False
    run([_tc(), "qdisc", "del", "dev", interface, "root", "handle", HANDLE, "htb"])
    return True


def class_bytes(interface: str) -> dict[str, int]:
    """Bytes sent per HTB class of ``interface`` (``tc -s class show``): classid → bytes. Raises TCError."""
    text = run([_tc(), "-s", "class", "show", "dev", interface])
    out: dict[str, int] = {}
    current = ""
    for line in text.splitlines():
        words = line.split()
        if words[:2] == ["class", "htb"] and len(words) > 2:
            current = words[2]
        elif words[:1] == ["Sent"] and current and len(words) > 1 and words[1].isdigit():
            out[current] = int(words[1])
            current = ""
    return out
