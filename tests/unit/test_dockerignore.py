"""Issue 14, observation 6: the image build context leaves out the virtualenv, demo output, caches and .git,
and keeps everything a Dockerfile copies."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def _patterns() -> list[str]:
    path = ROOT / ".dockerignore"
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def _ignored(rel: str) -> bool:
    parts = rel.split("/")
    for pattern in _patterns():
        bare = pattern.removeprefix("**/")
        if any(fnmatch.fnmatch("/".join(parts[:i]), pattern) for i in range(1, len(parts) + 1)):
            return True
        if pattern.startswith("**/") and any(fnmatch.fnmatch(p, bare) for p in parts):
            return True
    return False


@pytest.mark.parametrize("rel", [".venv", ".venv/lib/python3.11/site-packages/numpy/__init__.py", "out/demo/report.html",
                                 ".git/HEAD", ".pytest_cache/v", ".mypy_cache/x", ".ruff_cache/x",
                                 "shared/colo/__pycache__/bus.cpython-311.pyc", ".hypothesis/examples/x"])
def test_left_out(rel: str) -> None:
    assert _ignored(rel)


def test_everything_a_dockerfile_copies_is_kept() -> None:
    sources = []
    for dockerfile in (ROOT / "services").glob("*/Dockerfile"):
        for line in dockerfile.read_text().splitlines():
            m = re.match(r"^COPY\s+(\S+)\s+\S+$", line.strip())
            if m:
                sources.append(m.group(1))
    assert "shared" in sources and "requirements.txt" in sources
    kept = [s for s in sources if not _ignored(s)]
    assert kept == sources
    assert not _ignored("shared/colo/bus.py") and not _ignored("services/scheduler/colo_scheduler/core.py")
