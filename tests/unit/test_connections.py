"""Link settings → client arguments (colo.connections) and their consistency checks (colo.settings)."""

from __future__ import annotations

import ssl

import pytest

from colo.connections import LinkError, nats_options, nats_servers, redis_options, sentinel_addresses
from colo.settings import RuntimeSettings, SettingsError, load_runtime_settings


def test_server_lists_split_on_commas() -> None:
    assert nats_servers("nats://a:4222") == ["nats://a:4222"]
    assert nats_servers(" nats://a:1, ,nats://b:2 ") == ["nats://a:1", "nats://b:2"]


def test_no_settings_means_plain_links() -> None:
    assert nats_options(None) == {}
    assert redis_options(None) == {}
    assert nats_options(RuntimeSettings()) == {}
    assert redis_options(RuntimeSettings()) == {}


def test_passwords_come_from_files(tmp_path) -> None:
    (tmp_path / "np").write_text("s3cret\n")
    (tmp_path / "rp").write_text("r3dis\n")
    s = RuntimeSettings(nats_user="scheduler", nats_password_file=str(tmp_path / "np"),
                        redis_username="scheduler", redis_password_file=str(tmp_path / "rp"))
    assert nats_options(s) == {"user": "scheduler", "password": "s3cret"}
    assert redis_options(s) == {"username": "scheduler", "password": "r3dis"}


def test_unreadable_files_name_the_setting(tmp_path) -> None:
    missing = str(tmp_path / "nope")
    with pytest.raises(LinkError, match="nats_creds_file"):
        nats_options(RuntimeSettings(nats_creds_file=missing))
    with pytest.raises(LinkError, match="redis_password_file"):
        redis_options(RuntimeSettings(redis_password_file=missing))
    with pytest.raises(LinkError, match="nats_tls"):
        nats_options(RuntimeSettings(nats_tls_ca_file=missing))


def test_tls_context_trusts_the_given_ca(tmp_path) -> None:
    ca = ssl.get_default_verify_paths().cafile
    if not ca:
        pytest.skip("no system CA bundle file")
    opts = nats_options(RuntimeSettings(nats_tls_ca_file=ca))
    assert isinstance(opts["tls"], ssl.SSLContext)
    assert opts["tls"].verify_mode == ssl.CERT_REQUIRED
    r = redis_options(RuntimeSettings(redis_tls_ca_file=ca))
    assert r["ssl"] is True and r["ssl_ca_certs"] == ca and r["ssl_cert_reqs"] == "required"


def test_sentinel_addresses() -> None:
    s = RuntimeSettings(redis_sentinels="127.0.0.1:26379, [::1]:26380")
    assert sentinel_addresses(s) == [("127.0.0.1", 26379), ("::1", 26380)]


def test_inconsistent_link_settings_are_all_listed() -> None:
    env = {"COLO_NATS_TLS_CERT_FILE": "/c.pem", "COLO_NATS_PASSWORD_FILE": "/p", "COLO_STREAM_REPLICAS": "7",
           "COLO_REDIS_SENTINELS": "nohost", "COLO_REDIS_TLS_KEY_FILE": "/k.pem", "COLO_NATS_INBOX_PREFIX": "_IN.*"}
    with pytest.raises(SettingsError) as err:
        load_runtime_settings(env)
    text = str(err.value)
    for needle in ("nats_tls_cert_file and nats_tls_key_file", "redis_tls_cert_file and redis_tls_key_file",
                   "nats_user is empty", "stream_replicas must be 1..5", "'nohost' is not host:port",
                   "'_IN.*' is not a subject prefix"):
        assert needle in text, text


def test_an_inbox_prefix_reaches_the_client() -> None:
    assert nats_options(RuntimeSettings(nats_inbox_prefix="_INBOX_api"))["inbox_prefix"] == "_INBOX_api"
    assert "inbox_prefix" not in nats_options(RuntimeSettings())


def test_a_redis_url_switches_to_tls_when_a_ca_is_set(tmp_path) -> None:
    from redis.asyncio.connection import SSLConnection
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    from colo.connections import redis_client

    client = redis_client("redis://127.0.0.1:1/0", RuntimeSettings(redis_tls_ca_file=str(tmp_path / "ca.pem")),
                          Retry(NoBackoff(), 0), [])
    assert client.connection_pool.connection_class is SSLConnection
