"""`colo up` records its servers; the other commands use them only when no URL is set."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from colo.cli import main as cli
from colo.embedded import free_port


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COLO_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("COLO_NATS_URL", raising=False)
    monkeypatch.delenv("COLO_REDIS_URL", raising=False)
    monkeypatch.delenv("COLO_SCHEDULER_URL", raising=False)
    monkeypatch.delenv("COLO_STORE_PREFIX", raising=False)
    return tmp_path


def _write(state_dir: Path, pid: int) -> None:
    env = {"COLO_NATS_URL": "nats://127.0.0.1:41111", "COLO_REDIS_URL": "redis://127.0.0.1:41112/0"}
    (state_dir / "up.json").write_text(json.dumps({"pid": pid, "env": env}))


def test_running_up_is_used_when_no_url_is_set(state_dir: Path) -> None:
    _write(state_dir, os.getpid())
    s = cli._settings()
    assert (s.nats_url, s.redis_url) == ("nats://127.0.0.1:41111", "redis://127.0.0.1:41112/0")


def test_dead_up_is_ignored(state_dir: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    _write(state_dir, int(proc.stdout))
    assert cli.running_up_env() == {}
    assert cli._settings().nats_url == "nats://127.0.0.1:4222"


def test_explicit_url_wins(state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(state_dir, os.getpid())
    monkeypatch.setenv("COLO_NATS_URL", "nats://127.0.0.1:42222")
    assert cli._settings().nats_url == "nats://127.0.0.1:42222"


@pytest.mark.parametrize("content", ["", "{", '{"pid": "x"}', '{"env": {}}'], ids=["empty", "bad-json", "bad-pid", "no-pid"])
def test_corrupt_state_is_ignored(state_dir: Path, content: str) -> None:
    (state_dir / "up.json").write_text(content)
    assert cli.running_up_env() == {}


@pytest.mark.parametrize(
    ("n_bytes", "shown"),
    [(2**30, "1Gi"), (167675523237, "156.2Gi"), (1000, "1000"), (0, "0")],
    ids=["exact", "inexact-large", "small", "zero"],
)
def test_memory_cells(n_bytes: int, shown: str) -> None:
    assert cli._mem(n_bytes) == shown


def _write_up(state_dir: Path, pid: int, services: dict[str, str] | None = None) -> None:
    env = {"COLO_NATS_URL": "nats://127.0.0.1:41111", "COLO_REDIS_URL": "redis://127.0.0.1:41112/0"}
    (state_dir / "up.json").write_text(json.dumps({"pid": pid, "env": env, "services": services or {}}))


def _dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(proc.stdout)


def test_notice_names_colo_up_servers_on_stderr(state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write_up(state_dir, os.getpid(), {"scheduler": "http://127.0.0.1:41113"})
    conn = cli.connection("nats", "redis")
    out, err = capsys.readouterr()
    assert out == ""
    assert f"using NATS nats://127.0.0.1:41111: the servers of colo up (pid {os.getpid()})" in err
    assert "using Redis redis://127.0.0.1:41112/0 (key prefix 'colo')" in err
    assert "warning" not in err
    assert (conn.source, conn.scheduler_url) == ("up", "http://127.0.0.1:41113")


@pytest.mark.parametrize("record", ["none", "stale"])
def test_warning_when_falling_back_to_defaults(state_dir: Path, capsys: pytest.CaptureFixture[str],
                                              record: str) -> None:
    if record == "stale":
        _write_up(state_dir, _dead_pid(), {"scheduler": "http://127.0.0.1:41113"})
    conn = cli.connection("redis")
    out, err = capsys.readouterr()
    assert out == ""
    assert "warning:" in err and "falling back to the default Redis redis://127.0.0.1:6379/0" in err
    assert ("has stopped" in err) == (record == "stale") and ("no colo up is running" in err) == (record == "none")
    assert "NATS" not in err  # only the server the command uses
    assert (conn.source, conn.scheduler_url) == ("default", "")


def test_explicit_url_is_named_and_the_unset_one_warned(state_dir: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    _write_up(state_dir, os.getpid(), {"scheduler": "http://127.0.0.1:41113"})
    monkeypatch.setenv("COLO_NATS_URL", "nats://127.0.0.1:42222")
    conn = cli.connection("nats", "redis")
    err = capsys.readouterr().err
    assert "using NATS nats://127.0.0.1:42222 from COLO_NATS_URL" in err
    assert "warning: COLO_REDIS_URL is not set (only COLO_NATS_URL is): using the default Redis" in err
    assert conn.scheduler_url == ""  # colo up's scheduler serves other servers than these


def test_scheduler_url_variable_wins(state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_up(state_dir, os.getpid(), {"scheduler": "http://127.0.0.1:41113"})
    monkeypatch.setenv("COLO_SCHEDULER_URL", "http://127.0.0.1:49999")
    assert cli.resolve_connection(("redis",)).scheduler_url == "http://127.0.0.1:49999"


@pytest.mark.parametrize("argv", [["submit", "examples/pods.yaml"], ["events"]], ids=["submit", "events"])
def test_unreachable_nats_fails_once_and_cleanly(state_dir: Path, argv: list[str]) -> None:
    # nats-py retried forever (submit) or for minutes with tracebacks (events); a command gives up.
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "COLO_NATS_URL": f"nats://127.0.0.1:{free_port()}"}
    proc = subprocess.run([sys.executable, "-m", "colo.cli.main", *argv], env=env, cwd=root,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "no servers available" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("no servers available") == 1, proc.stderr
