"""Debian's chromium for the headless-browser tests (Playwright drives it; no browser download).

Found on PATH, else installed with ``apt-get install -y chromium`` when running as root (``apt-get update``
once and a retry when the package lists are missing or old), else the caller skips with the reason given.
"""

from __future__ import annotations

import os
import shutil
import subprocess

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser")
LAUNCH_ARGS = ("--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage")
"""Chromium flags for a container: no setuid sandbox, no GPU, no small /dev/shm."""


def find_chromium() -> str | None:
    """The path of the first of :data:`CHROMIUM_CANDIDATES` on PATH, or None."""
    for name in CHROMIUM_CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


def chromium_or_reason() -> tuple[str | None, str]:
    """(path of chromium, "") or (None, why there is none), installing it with apt-get as root when missing."""
    path = find_chromium()
    if path is None and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = ["apt-get", "install", "-y", "-q", "chromium"]
        try:
            if subprocess.run(install, timeout=900, capture_output=True, env=env).returncode != 0:
                # a fresh machine's package lists may be missing or old: update them once, then retry
                subprocess.run(["apt-get", "update", "-q"], timeout=600, capture_output=True, env=env)
                subprocess.run(install, check=True, timeout=900, capture_output=True, env=env)
        except (subprocess.SubprocessError, OSError) as exc:
            return None, f"chromium is not installed and `apt-get install -y chromium` failed: {exc}"
        path = find_chromium()
    if path is None:
        return None, "no chromium on PATH and not root to `apt-get install -y chromium`"
    return path, ""
