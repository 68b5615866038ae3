"""`colo up` records its servers; the other commands use them only when no URL is set."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from colo.cli import main as cli


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COLO_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("COLO_NATS_URL", raising=False)
    monkeypatch.delenv("COLO_REDIS_URL", raising=False)
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
