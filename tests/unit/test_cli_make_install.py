"""``make install``: setuptools' "Editable installation" notice is silenced, nothing else is."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# The block setuptools' build backend emits once per editable package (setuptools.warnings.SetuptoolsWarning
# format: summary, then the details between "!!" lines), with a category of the same name.
EMIT = '''
import warnings
class BuildBackendWarning(UserWarning):
    pass
warnings.warn("Editable installation.\\n!!\\n\\n        ****\\n        Please be careful with folders in your "
              "working directory with the same\\n        name as your package as they may take precedence "
              "during imports.\\n        ****\\n\\n!!", BuildBackendWarning)
warnings.warn("a build warning that matters", UserWarning)
raise SystemExit("error: the build failed")
'''


def _editable_install_line() -> list[str]:
    out = subprocess.run(["make", "-n", "-B", "install"], cwd=REPO, capture_output=True, text=True, check=True)
    lines = [shlex.split(line) for line in out.stdout.splitlines() if " -e shared" in line]
    assert len(lines) == 1, out.stdout
    return lines[0]


@pytest.mark.skipif(shutil.which("make") is None, reason="make not on PATH")
def test_only_the_editable_notice_is_filtered() -> None:
    words = _editable_install_line()
    env_words = [w for w in words if w.startswith("PYTHONWARNINGS=")]
    assert len(env_words) == 1, words
    assert not any(w.startswith(("2>", ">")) or w in ("|", "2>&1") for w in words), "stderr must not be hidden"
    value = env_words[0].split("=", 1)[1]
    proc = subprocess.run([sys.executable, "-c", EMIT], capture_output=True, text=True,
                          env={**os.environ, "PYTHONWARNINGS": value})
    assert "Editable installation" not in proc.stderr
    assert "a build warning that matters" in proc.stderr
    assert "error: the build failed" in proc.stderr and proc.returncode == 1
    unfiltered = subprocess.run([sys.executable, "-c", EMIT], capture_output=True, text=True,
                                env={k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"})
    assert "BuildBackendWarning: Editable installation." in unfiltered.stderr  # the emulation is faithful
