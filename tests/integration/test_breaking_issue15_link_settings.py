"""Issue 15, attacked: a service started with bad link files (missing, unreadable, not PEM, a certificate
with another certificate's key, an empty secret, no nkey seed) exits 2 before it connects anywhere,
listing every problem with the setting and the path (before: a LinkError traceback, exit 1, first problem
only). A real process, ``python -m colo_profiler``; its servers' URLs are ports nothing listens on, so a
process that got past its settings would hang retrying instead of exiting.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from colo.link_files import link_file_problems
from colo.security import write_certificates
from colo.settings import RuntimeSettings

pytestmark = pytest.mark.integration


@pytest.fixture
def files(tmp_path: Path) -> Path:
    write_certificates(tmp_path / "a")
    write_certificates(tmp_path / "b")
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    (tmp_path / "empty").write_text("\n")
    (tmp_path / "seed.nk").write_text("SUNOTASEED\n")
    (tmp_path / "token").write_text("t0ken\n")
    return tmp_path


def test_every_bad_link_file_is_listed_and_nothing_starts(files: Path) -> None:
    env = {"PATH": os.environ.get("PATH", ""), "COLO_NATS_URL": "nats://127.0.0.1:1",
           "COLO_REDIS_URL": "redis://127.0.0.1:1",
           "COLO_NATS_NKEY_SEED_FILE": str(files / "seed.nk"),
           "COLO_NATS_TLS_CA_FILE": str(files / "junk.pem"),
           "COLO_NATS_TLS_CERT_FILE": str(files / "a" / "client.pem"),
           "COLO_NATS_TLS_KEY_FILE": str(files / "b" / "client-key.pem"),  # another certificate's key
           "COLO_REDIS_USERNAME": "profiler", "COLO_REDIS_PASSWORD_FILE": str(files / "empty"),
           "COLO_REDIS_TLS_CA_FILE": str(files / "missing-ca.pem"),
           "COLO_REDIS_TLS_CERT_FILE": str(files / "junk.pem"),
           "COLO_REDIS_TLS_KEY_FILE": str(files / "a" / "client-key.pem"),
           "COLO_HTTP_TOKEN_FILE": str(files / "dir-not-file")}
    (files / "dir-not-file").mkdir()
    proc = subprocess.run([sys.executable, "-m", "colo_profiler"], env=env, capture_output=True, text=True,
                          timeout=60)
    print(proc.stderr)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "started" not in proc.stderr
    for expected in ("nats_nkey_seed_file: " + str(files / "seed.nk") + " holds no nkey seed",
                     "nats_tls_ca_file: " + str(files / "junk.pem") + " holds no PEM certificate",
                     "KEY_VALUES_MISMATCH", "redis_password_file: " + str(files / "empty") + " is empty",
                     "redis_tls_ca_file: cannot read " + str(files / "missing-ca.pem"),
                     "redis_tls_cert_file, redis_tls_key_file: " + str(files / "junk.pem"),
                     "http_token_file: cannot read " + str(files / "dir-not-file")):
        assert expected in proc.stderr, expected
    assert "7 invalid settings" in proc.stderr


def test_the_files_of_colo_security_init_pass(files: Path) -> None:
    s = RuntimeSettings(nats_tls_ca_file=str(files / "a" / "ca.pem"), nats_tls_cert_file=str(files / "a" / "client.pem"),
                        nats_tls_key_file=str(files / "a" / "client-key.pem"), redis_tls_ca_file=str(files / "a" / "ca.pem"),
                        http_token_file=str(files / "token"))
    assert link_file_problems(s) == []
