"""``colo up`` stopping: a summary line per outcome, and Ctrl-C at a terminal ends every service cleanly."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import sys
import time
from pathlib import Path

import pytest

from colo.cli.main import stop_summary

REPO = Path(__file__).resolve().parents[2]
LOGS = {n: Path(f"/logs/up-{n}.log") for n in ("descheduler", "scheduler", "slo-manager", "profiler", "node-agent")}


def test_all_clean() -> None:
    assert stop_summary(dict.fromkeys(LOGS, 0), LOGS, set()) == (["all 5 services stopped cleanly"], False)


def test_sigterm_while_exiting_is_explained_not_a_failure() -> None:
    codes = {**dict.fromkeys(LOGS, 0), "profiler": -signal.SIGTERM}
    lines, failed = stop_summary(codes, LOGS, {"profiler"})
    assert not failed
    assert lines[0] == "4 of 5 services stopped cleanly (descheduler, scheduler, slo-manager, node-agent)"
    assert lines[1] == ("profiler: ended by colo up's SIGTERM (exit -15) before it finished exiting; "
                        "log /logs/up-profiler.log")


@pytest.mark.parametrize(("code", "sent", "text"), [
    pytest.param(1, set(), "scheduler: FAILED with exit code 1; log /logs/up-scheduler.log", id="exit-1"),
    pytest.param(-signal.SIGKILL, {"scheduler"}, "scheduler: did not stop within 10 s of SIGTERM and was killed "
                 "(exit -9); log /logs/up-scheduler.log", id="killed-after-term"),
    pytest.param(-signal.SIGTERM, set(), "scheduler: FAILED, killed by signal 15 (SIGTERM); "
                 "log /logs/up-scheduler.log", id="sigterm-from-elsewhere"),
    pytest.param(-signal.SIGSEGV, set(), "scheduler: FAILED, killed by signal 11 (SIGSEGV); "
                 "log /logs/up-scheduler.log", id="crash"),
])
def test_failures_name_their_log(code: int, sent: set[str], text: str) -> None:
    lines, failed = stop_summary({**dict.fromkeys(LOGS, 0), "scheduler": code}, LOGS, sent)
    assert failed and text in lines


def _read_until(fd: int, needle: str, buf: list[str], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if needle in "".join(buf):
            return True
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the terminal's other side closed
                return needle in "".join(buf)
            if not chunk:
                return needle in "".join(buf)
            buf.append(chunk.decode(errors="replace"))
    return needle in "".join(buf)


@pytest.mark.integration
def test_ctrl_c_at_a_terminal_stops_every_service_cleanly(tmp_path: Path) -> None:
    """Ctrl-C typed on a real (pseudo) terminal: the kernel sends SIGINT to the whole foreground group,
    services included; ``colo up`` used to SIGTERM them in the middle of their exit (``'profiler': -15``)."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLO_NATS_URL", "COLO_REDIS_URL")}
    env.update(COLO_STATE_DIR=str(tmp_path / "state"), NO_COLOR="1", TERM="dumb", COLUMNS="200")
    argv = [sys.executable, "-m", "colo.cli.main", "up", "--nodes-file", str(REPO / "examples" / "nodes-a.json"),
            "--work-dir", str(tmp_path / "up")]
    pid, fd = pty.fork()
    if pid == 0:  # child: session leader with the pty as controlling terminal
        os.execve(argv[0], argv, env)
    buf: list[str] = []
    try:
        assert _read_until(fd, "Ctrl-C stops everything", buf, 120), "".join(buf)
        os.write(fd, b"\x03")  # the terminal's interrupt character
        _read_until(fd, "\x00never", buf, 60)  # until the terminal closes
    finally:
        status = _reap(pid, 30)
        os.close(fd)
    out = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", "".join(buf))
    assert "all 6 services stopped cleanly" in out, out
    assert "web dashboard: http://127.0.0.1:" in out, out
    assert os.waitstatus_to_exitcode(status) == 0, out


def _reap(pid: int, timeout_s: float) -> int:
    """The wait status of our child ``pid``; its process group (colo up and its services) is killed
    if it has not exited within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.1)
    os.killpg(pid, signal.SIGKILL)
    return os.waitpid(pid, 0)[1]


def test_error_text_is_printed_literally(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A path or log tail with brackets is not read as rich markup (``[/x]`` used to vanish)."""
    from colo.cli.main import main

    monkeypatch.setenv("COLO_STATE_DIR", str(tmp_path))
    bad = tmp_path / "missing" / "[/x]" / "w"
    (tmp_path / "missing").write_text("a file, not a directory")
    assert main(["up", "--nodes-file", str(REPO / "examples" / "nodes-a.json"), "--work-dir", str(bad)]) == 1
    assert "[/x]" in capsys.readouterr().out
