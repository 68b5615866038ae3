"""The files the link settings name, checked before anything connects (docs/security.md).

:func:`colo.connections.nats_options` and :func:`~colo.connections.redis_options` read these files when a
connection is made and stop at the first one that fails; a service's entry point (:func:`colo.runtime.main`)
calls :func:`link_file_problems` first, so that it exits 2 listing every bad file at once (missing,
unreadable, empty, not PEM, a certificate with another key's private key, not an nkey seed), before it
starts anything.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import nkeys

from colo.settings import RuntimeSettings

SECRET_FILES = ("nats_creds_file", "nats_nkey_seed_file", "nats_password_file", "redis_password_file",
                "http_token_file")
"""Settings naming a file whose first line is a secret: it must be readable and not empty."""

TLS_LINKS = ("nats", "redis")
"""Links with ``<link>_tls_ca_file``, ``<link>_tls_cert_file`` and ``<link>_tls_key_file`` settings."""


def _read(path: str, setting: str, out: list[str]) -> str | None:
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        out.append(f"{setting}: cannot read {path}: {why}")
        return None


def _secret_problems(s: RuntimeSettings, out: list[str]) -> None:
    for setting in SECRET_FILES:
        path = str(getattr(s, setting))
        if not path:
            continue
        text = _read(path, setting, out)
        if text is None:
            continue
        if not text.strip():
            out.append(f"{setting}: {path} is empty")
        elif setting == "nats_nkey_seed_file":
            try:
                nkeys.from_seed(text.strip().encode())
            except Exception as exc:  # nkeys raises its own ErrInvalidSeed and binascii errors
                out.append(f"{setting}: {path} holds no nkey seed (SU…): {type(exc).__name__}")


def _tls_problems(s: RuntimeSettings, link: str, out: list[str]) -> None:
    ca, cert, key = (str(getattr(s, f"{link}_tls_{part}_file")) for part in ("ca", "cert", "key"))
    readable = {p: _read(p, f"{link}_tls_{part}_file", out) is not None
                for p, part in ((ca, "ca"), (cert, "cert"), (key, "key")) if p}
    if ca and readable[ca]:
        try:
            ssl.create_default_context(cafile=ca)
        except ssl.SSLError as exc:
            out.append(f"{link}_tls_ca_file: {ca} holds no PEM certificate: {exc.reason or exc}")
    if cert and key and readable[cert] and readable[key]:
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(cert, key)
        except ssl.SSLError as exc:
            out.append(f"{link}_tls_cert_file, {link}_tls_key_file: {cert} and {key} are not a PEM certificate "
                       f"and its private key: {exc.reason or exc}")


def link_file_problems(s: RuntimeSettings) -> list[str]:
    """Every problem with a file named by the link settings of ``s``, one line each naming the setting and
    the path (empty list when all are fine): unreadable or missing, an empty secret, an nkey seed file
    without a seed, a CA file without a PEM certificate, a certificate and key that do not load together
    (not PEM, or the key of another certificate: OpenSSL's ``KEY_VALUES_MISMATCH``). Never raises."""
    out: list[str] = []
    _secret_problems(s, out)
    for link in TLS_LINKS:
        _tls_problems(s, link, out)
    return out
