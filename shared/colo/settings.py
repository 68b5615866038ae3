"""Typed settings from environment variables and an optional YAML file; every error listed.

A service declares its settings as a :class:`msgspec.Struct` with a default and a
docstring line per field, and loads them with :func:`load_settings`::

    COLO_SCHEDULER_BATCH_SIZE=64                    -> batch_size = 64
    COLO_SCHEDULER_LOAD_AWARE__CPU_THRESHOLD=65     -> load_aware.cpu_threshold = 65 (nested: "__")
    COLO_SCHEDULER_WEIGHTS='{"fit": 1}'             -> weights = {"fit": 1} (lists/dicts as JSON)
    COLO_SCHEDULER_ENABLED=0                        -> enabled = False (1/0/true/false)
    COLO_SCHEDULER_CONFIG=/etc/colo/scheduler.yaml  -> YAML mapping applied first, env on top

Unknown keys under the prefix, type errors, constraint violations (``Annotated[int,
Meta(ge=0)]``) and ``__post_init__`` errors are collected and raised together in one
:class:`SettingsError` (DESIGN.md §9: typos are never silently dropped).
"""

from __future__ import annotations

import json
import os
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar, Union

import msgspec
import yaml

S = TypeVar("S", bound=msgspec.Struct)


class SettingsError(ValueError):
    """Invalid settings; ``errors`` lists every problem, the message has one per line."""

    def __init__(self, errors: list[str], what: str = "settings") -> None:
        self.errors = list(errors)
        lines = "\n".join(f"  - {e}" for e in self.errors)
        super().__init__(f"{len(self.errors)} invalid {what}:\n{lines}")


class RuntimeSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Settings every service shares, from ``COLO_<FIELD>`` environment variables."""

    nats_url: str = "nats://127.0.0.1:4222"
    """NATS server URL (``COLO_NATS_URL``)."""
    redis_url: str = "redis://127.0.0.1:6379/0"
    """Redis URL (``COLO_REDIS_URL``)."""
    http_host: str = "127.0.0.1"
    """Address of the HTTP server for /healthz, /readyz, /metrics, /debug (``COLO_HTTP_HOST``)."""
    http_port: int = 0
    """HTTP port; 0 = a free port, logged at start (``COLO_HTTP_PORT``)."""
    sim: bool = False
    """Virtual time: serve simulation ticks instead of the wall-clock tick loop (``COLO_SIM``)."""
    store_prefix: str = "colo"
    """Prefix of every Redis key (``COLO_STORE_PREFIX``)."""
    otlp_endpoint: str = ""
    """OTLP endpoint for traces; empty = no export (``COLO_OTLP_ENDPOINT``)."""
    log_level: str = "INFO"
    """Python logging level name (``COLO_LOG_LEVEL``)."""
    instance: str = ""
    """Instance name when several replicas run: shown in logs and the NATS client name; replicas
    share durable consumers, so they split the work (``COLO_INSTANCE``)."""
    # Links (docs/security.md, docs/operations.md): credentials and keys are read from files, never taken as values.
    nats_creds_file: str = ""
    """NATS credentials file (JWT + nkey seed, ``.creds``) of this service's user (``COLO_NATS_CREDS_FILE``)."""
    nats_nkey_seed_file: str = ""
    """File holding this service's nkey seed (``SU…``), for servers that list nkey users (``COLO_NATS_NKEY_SEED_FILE``)."""
    nats_user: str = ""
    """NATS user name for user/password authentication (``COLO_NATS_USER``)."""
    nats_password_file: str = ""
    """File holding the NATS password of :attr:`nats_user` (``COLO_NATS_PASSWORD_FILE``)."""
    nats_tls_ca_file: str = ""
    """CA bundle (PEM) that signs the NATS servers' certificates; set = TLS to NATS (``COLO_NATS_TLS_CA_FILE``)."""
    nats_tls_cert_file: str = ""
    """Client certificate (PEM) for NATS TLS with client verification (``COLO_NATS_TLS_CERT_FILE``)."""
    nats_tls_key_file: str = ""
    """Private key (PEM) of :attr:`nats_tls_cert_file` (``COLO_NATS_TLS_KEY_FILE``)."""
    stream_replicas: int = 1
    """Replicas of every JetStream stream and KV bucket the services create: 1 on a single server, 3 on a
    three-server cluster (``COLO_STREAM_REPLICAS``)."""
    redis_username: str = ""
    """Redis ACL user of this service; empty = the ``default`` user (``COLO_REDIS_USERNAME``)."""
    redis_password_file: str = ""
    """File holding the Redis password of :attr:`redis_username` (``COLO_REDIS_PASSWORD_FILE``)."""
    redis_tls_ca_file: str = ""
    """CA bundle (PEM) that signs the Redis servers' certificates; set = TLS to Redis, as a ``rediss://`` URL
    is (``COLO_REDIS_TLS_CA_FILE``)."""
    redis_tls_cert_file: str = ""
    """Client certificate (PEM) for Redis TLS with client verification (``COLO_REDIS_TLS_CERT_FILE``)."""
    redis_tls_key_file: str = ""
    """Private key (PEM) of :attr:`redis_tls_cert_file` (``COLO_REDIS_TLS_KEY_FILE``)."""
    redis_sentinels: str = ""
    """Comma-separated ``host:port`` of Redis Sentinels; set = the primary of :attr:`redis_sentinel_master`
    is found (and followed across failovers) through them, and :attr:`redis_url` gives only the db number
    (``COLO_REDIS_SENTINELS``)."""
    redis_sentinel_master: str = "colo"
    """Name of the monitored primary in the Sentinels' configuration (``COLO_REDIS_SENTINEL_MASTER``)."""
    http_token_file: str = ""
    """File holding the bearer token that ``/metrics`` and ``/debug/*`` require (``/healthz`` and ``/readyz``
    stay open for probes); empty = no token (``COLO_HTTP_TOKEN_FILE``)."""
    redis_wait_replicas: int = 0
    """Replicas that must hold a bind or release before the store acknowledges it: ``WAIT n timeout`` after
    the bind/release script on the same connection (Redis ``WAIT``); 1 with one replica behind Sentinel makes
    an acknowledged bind survive a failover; 0 = no WAIT (``COLO_REDIS_WAIT_REPLICAS``). A WAIT that returns
    short is sent again on the same connection for up to :attr:`redis_failover_window_s` (binds stall meanwhile);
    a connection lost meanwhile makes the bind unknown (the scheduler retries it); still short after the window,
    the bind is kept, counted in ``colo_store_wait_short_total`` (:mod:`colo.store_wait`, docs/operations.md)."""
    redis_wait_timeout_ms: int = 1000
    """Milliseconds a ``WAIT`` blocks at most for :attr:`redis_wait_replicas` (``COLO_REDIS_WAIT_TIMEOUT_MS``;
    0 would block for ever, so it must be >= 1)."""
    nats_inbox_prefix: str = ""
    """Prefix of the client's reply subjects (nats-py ``inbox_prefix``; "" = ``_INBOX``): ``colo security
    init`` gives each user its own (``_INBOX_<user>``) and lets it subscribe only there, so that no user reads
    another's replies (``COLO_NATS_INBOX_PREFIX``; docs/security.md)."""
    redis_failover_window_s: float = 20.0
    """With :attr:`redis_sentinels`: seconds a store command that meets a connection error or ``READONLY`` (a
    primary down or demoted) is sent again, re-asking the Sentinels for the primary each time
    (:mod:`colo.store_retry`); must cover a failover: Sentinel's ``down-after-milliseconds`` plus its election
    and promotion, a few seconds with docs/operations.md's configuration (``COLO_REDIS_FAILOVER_WINDOW_S``).
    Also the longest a bind's ``WAIT`` is repeated while no replica acknowledges (:attr:`redis_wait_replicas`)."""

    def __post_init__(self) -> None:
        problems = link_problems(self)
        if problems:
            raise SettingsError(problems, what="link settings")


def link_problems(s: RuntimeSettings) -> list[str]:
    """Inconsistent link settings of ``s`` (empty list when fine): a TLS certificate without its key (or
    the reverse), a password file without a user, a replica count below 1, an unparsable Sentinel address."""
    out: list[str] = []
    for which in ("nats", "redis"):
        cert, key = getattr(s, f"{which}_tls_cert_file"), getattr(s, f"{which}_tls_key_file")
        if bool(cert) != bool(key):
            out.append(f"{which}_tls_cert_file and {which}_tls_key_file go together (one is empty)")
    if s.nats_password_file and not s.nats_user:
        out.append("nats_password_file is set but nats_user is empty")
    if sum(bool(x) for x in (s.nats_creds_file, s.nats_nkey_seed_file, s.nats_user)) > 1:
        out.append("set only one of nats_creds_file, nats_nkey_seed_file, nats_user")
    if s.stream_replicas < 1 or s.stream_replicas > 5:
        out.append(f"stream_replicas must be 1..5 (JetStream's limit), got {s.stream_replicas}")
    if s.redis_wait_replicas < 0:
        out.append(f"redis_wait_replicas must be >= 0, got {s.redis_wait_replicas}")
    if s.redis_wait_timeout_ms < 1:
        out.append(f"redis_wait_timeout_ms must be >= 1 (0 blocks for ever), got {s.redis_wait_timeout_ms}")
    if not s.redis_failover_window_s > 0:
        out.append(f"redis_failover_window_s must be > 0 (seconds), got {s.redis_failover_window_s}")
    if s.nats_inbox_prefix and not re.fullmatch(r"[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*", s.nats_inbox_prefix):
        out.append(f"nats_inbox_prefix: {s.nats_inbox_prefix!r} is not a subject prefix (tokens of letters, digits, "
                   "'_', '-', '$' separated by dots)")
    for part in filter(None, (p.strip() for p in s.redis_sentinels.split(","))):
        host, _, port = part.rpartition(":")
        if not host or not port.isdigit():
            out.append(f"redis_sentinels: {part!r} is not host:port")
    return out


def _strip_optional(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _strip_optional(typing.get_args(tp)[0])
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return _strip_optional(args[0])
    return tp


def _struct_type(tp: Any) -> type[msgspec.Struct] | None:
    base = _strip_optional(tp)
    if isinstance(base, type) and issubclass(base, msgspec.Struct):
        return base
    return None


def _is_container(tp: Any) -> bool:
    base = _strip_optional(tp)
    origin = typing.get_origin(base) or base
    if _struct_type(base) is not None:
        return True
    return isinstance(origin, type) and issubclass(origin, (list, dict, set, frozenset, tuple))


def _fields(cls: type[msgspec.Struct]) -> dict[str, msgspec.structs.FieldInfo]:
    return {f.name: f for f in msgspec.structs.fields(cls)}


def _parse_env_value(raw: str, tp: Any, source: str, errors: list[str]) -> Any:
    if _is_container(tp):
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            errors.append(f"{source}: expected JSON for a list/mapping, got {raw!r} ({exc.msg})")
            return _INVALID
    return raw


_INVALID = object()


def _env_overlay(cls: type[msgspec.Struct], prefix: str, env: Mapping[str, str],
                 data: dict[str, Any], sources: dict[str, str], errors: list[str]) -> None:
    head = prefix + "_"
    for key in sorted(env):
        if not key.startswith(head) or key == f"{prefix}_CONFIG":
            continue
        path = key[len(head):].lower().split("__")
        target: type[msgspec.Struct] | None = cls
        node = data
        tp: Any = None
        for i, part in enumerate(path):
            fields = _fields(target) if target is not None else {}
            if part not in fields:
                where = ".".join(path[:i]) or cls.__name__
                errors.append(f"{key}: unknown setting {part!r} in {where} "
                              f"(known: {', '.join(sorted(fields)) or 'none'})")
                tp = _INVALID
                break
            tp = fields[part].type
            if i < len(path) - 1:
                target = _struct_type(tp)
                if target is None:
                    errors.append(f"{key}: {'.'.join(path[:i + 1])} has no nested settings")
                    tp = _INVALID
                    break
                sub = node.get(part)
                if not isinstance(sub, dict):
                    sub = {}
                    node[part] = sub
                node = sub
        if tp is _INVALID:
            continue
        value = _parse_env_value(env[key], tp, key, errors)
        if value is not _INVALID:
            node[path[-1]] = value
            sources[".".join(path)] = key


def _list_item_struct(tp: Any) -> type[msgspec.Struct] | None:
    base = _strip_optional(tp)
    if typing.get_origin(base) is list:
        (item,) = typing.get_args(base) or (Any,)
        return _struct_type(item)
    return None


def _convert_one(v: Any, tp: Any, dotted: str, where: str, errors: list[str]) -> Any:
    try:
        return msgspec.convert(v, tp, strict=False)
    except msgspec.ValidationError as exc:
        errors.append(f"{dotted}{where}: {exc} (got {v!r})")
        return None


def _build(cls: type[S], data: Mapping[str, Any], path: str, sources: dict[str, str],
           errors: list[str]) -> S | None:
    built, failed = _build_checked(cls, data, path, sources, errors)
    return None if failed else built


def _build_checked(cls: type[S], data: Mapping[str, Any], path: str, sources: dict[str, str],
                   errors: list[str]) -> tuple[S | None, bool]:
    """``cls`` from ``data`` and whether any field failed. When some fields fail to convert, the
    struct is still built from the fields that did (defaults for the others) so that its
    ``__post_init__`` checks report their problems in the same listing; it is returned only for
    the parent's own checks and never used as the result."""
    fields = _fields(cls)
    for k in data:
        if k not in fields:
            errors.append(f"{path + k}: unknown setting (known: {', '.join(sorted(fields))})")
    values: dict[str, Any] = {}
    failed = False
    missing = False
    for name, f in fields.items():
        dotted = path + name
        where = f" ({sources[dotted]})" if dotted in sources else ""
        if name not in data:
            if f.required:
                errors.append(f"{dotted}: required setting missing")
                failed = missing = True
            continue
        v = data[name]
        sub_cls = _struct_type(f.type)
        if sub_cls is not None and isinstance(v, dict):
            default = f.default if f.default is not msgspec.NODEFAULT else (
                f.default_factory() if f.default_factory is not msgspec.NODEFAULT else None)
            if isinstance(default, msgspec.Struct):  # unset nested fields keep the parent's default
                v = deep_merge(msgspec.to_builtins(default), v)
            built, sub_failed = _build_checked(sub_cls, v, dotted + ".", sources, errors)
            failed = failed or sub_failed
            if built is not None:
                values[name] = built
            elif f.required:
                missing = True
            continue
        item_cls = _list_item_struct(f.type)
        if item_cls is not None and isinstance(v, list):
            items = [_build(item_cls, x, f"{dotted}[{i}].", sources, errors) if isinstance(x, dict)
                     else _convert_one(x, item_cls, f"{dotted}[{i}]", where, errors) for i, x in enumerate(v)]
            if any(x is None for x in items):
                failed = True
                missing = missing or f.required
            else:
                values[name] = items
            continue
        try:
            values[name] = msgspec.convert(v, f.type, strict=False)
        except msgspec.ValidationError as exc:
            errors.append(f"{dotted}{where}: {exc} (got {v!r})")
            failed = True
            missing = missing or f.required
    if missing:
        return None, True
    try:
        return cls(**values), failed
    except (ValueError, TypeError, msgspec.ValidationError) as exc:
        where = path.rstrip(".") or cls.__name__
        listed = getattr(exc, "errors", None)  # a SettingsError raised by __post_init__: one line each
        if isinstance(listed, list) and listed:
            errors.extend(f"{where}: {e}" for e in listed)
        else:
            errors.append(f"{where}: {exc}")
        return None, True


def non_string_keys(value: Any, path: str = "") -> list[str]:
    """Every mapping key in ``value`` that is not a string (YAML reads ``1:``, ``true:``, ``~:`` as
    int, bool, None), as ``<path>: key <repr> must be a string``; settings names are strings only."""
    out: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                out.append(f"{path or '(top level)'}: key {k!r} must be a string")
            else:
                out += non_string_keys(v, f"{path}.{k}" if path else k)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += non_string_keys(v, f"{path}[{i}]")
    return out


def _read_yaml(path: str, errors: list[str]) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            loaded = yaml.safe_load(fh)
    except OSError as exc:
        errors.append(f"{path}: cannot read settings file: {exc.strerror or exc}")
        return {}
    except UnicodeDecodeError as exc:
        errors.append(f"{path}: settings file is not UTF-8 text: {exc.reason} at byte {exc.start}")
        return {}
    except yaml.YAMLError as exc:
        errors.append(f"{path}: invalid YAML: {exc}")
        return {}
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        errors.append(f"{path}: top level must be a mapping, got {type(loaded).__name__}")
        return {}
    bad = non_string_keys(loaded)
    if bad:
        errors.extend(f"{path}: {b}" for b in bad)
        return {}
    return loaded


def deep_merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``top`` laid over it: mappings merge key by key (recursively), anything else in
    ``top`` (lists included) replaces the value in ``base``. Neither input is changed."""
    out = dict(base)
    for k, v in top.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def load_settings(cls: type[S], prefix: str, env: Mapping[str, str] | None = None,
                  yaml_path: str | None = None) -> S:
    """Build ``cls`` from defaults, then YAML (``yaml_path`` or ``<PREFIX>_CONFIG``), then
    ``<PREFIX>_<FIELD>`` environment variables (``env`` defaults to ``os.environ``).

    Raises SettingsError listing every problem: unreadable YAML, unknown keys under the
    prefix (env and YAML), values of the wrong type, constraint and ``__post_init__`` errors.
    """
    env = os.environ if env is None else env
    prefix = prefix.rstrip("_")
    errors: list[str] = []
    yaml_path = yaml_path or env.get(f"{prefix}_CONFIG") or None
    data: dict[str, Any] = _read_yaml(yaml_path, errors) if yaml_path else {}
    overlay: dict[str, Any] = {}
    sources: dict[str, str] = {}
    _env_overlay(cls, prefix, env, overlay, sources, errors)
    result = _build(cls, deep_merge(data, overlay), "", sources, errors)
    if errors or result is None:
        raise SettingsError(errors, what=f"{cls.__name__} settings ({prefix}_*)")
    return result


def build_settings(cls: type[S], data: Mapping[str, Any], what: str = "settings") -> S:
    """Build ``cls`` from an already-read mapping (e.g. a configuration read from a key-value store),
    with the checks of :func:`load_settings`: unknown keys, values of the wrong type, constraint and
    ``__post_init__`` errors. Nested mappings keep the defaults of the fields they leave out.

    Raises SettingsError listing every problem; ``what`` names the source in its message.
    """
    errors: list[str] = []
    result = _build(cls, data, "", {}, errors)
    if errors or result is None:
        raise SettingsError(errors, what=what)
    return result


def load_runtime_settings(env: Mapping[str, str] | None = None) -> RuntimeSettings:
    """:class:`RuntimeSettings` from ``COLO_<FIELD>`` variables (only its own names are read:
    other ``COLO_*`` variables belong to services). Raises SettingsError listing every problem."""
    env = os.environ if env is None else env
    data: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name in _fields(RuntimeSettings):
        key = f"COLO_{name.upper()}"
        if key in env:
            data[name] = env[key]
            sources[name] = key
    errors: list[str] = []
    result = _build(RuntimeSettings, data, "", sources, errors)
    if errors or result is None:
        raise SettingsError(errors, what="runtime settings (COLO_*)")
    return result
