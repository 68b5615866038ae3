"""``colo security init DIR``: a development security setup for NATS, Redis and the HTTP endpoints.

Writes into ``DIR`` (files holding secrets 0600, the directory 0700)::

    ca.pem ca-key.pem                 a development CA (ECDSA P-256, 10 years; cryptography)
    server.pem server-key.pem         the servers' certificate (SANs: localhost, 127.0.0.1, ::1, --host names)
    client.pem client-key.pem         a client certificate (Redis requires one by default with TLS)
    nats.conf                         nats-server: TLS, JetStream, one nkey user per service with the
                                      permissions of colo.permissions, an admin user for the colo commands
    nkeys/<user>.nk                   each user's nkey seed (COLO_NATS_NKEY_SEED_FILE)
    redis-users.acl                   Redis ACL: one user per service (colo.redis_acl), default user off
    redis-passwords/<user>            each Redis user's password (COLO_REDIS_PASSWORD_FILE)
    redis-tls.conf                    redis-server include: TLS port, certificates, aclfile
    http-token                        the bearer token of the HTTP endpoints (COLO_HTTP_TOKEN_FILE)
    env/<user>.env                    COLO_* variables of each user, files named by absolute path
                                      (docker compose ``env_file``; or ``set -a; . env/scheduler.env``)

The node agent's users are generated for the node names given (``nodes``: one list per node agent):
such a user may publish only its nodes' subjects. Certificates are for development: an operator
brings their own CA and points the ``COLO_*_TLS_*_FILE`` settings at it (docs/security.md).
With ``mount_dir`` the files are written into ``DIR`` but named as containers see them (compose.secure.yaml
mounts them at ``/run/colo-secrets``, docs/compose.md).
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import json
import os
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nkeys
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from colo import permissions, redis_acl

ADMIN = "admin"
"""The operator's user (the ``colo`` commands, the simulator): every subject, every key."""

CERT_DAYS = 3650

_INSTANCE = re.compile(r"[A-Za-z0-9_-]+")
"""A ``COLO_INSTANCE``: one token of a consumer name."""


@dataclass(frozen=True)
class SecurityPlan:
    """What :func:`init` writes: ``node_agents`` maps each node agent's user name to its nodes;
    ``hosts`` are extra DNS names or IPs of the server certificate; ``store_prefix`` the Redis key
    prefix the ACL grants (``COLO_STORE_PREFIX``); ``nats_port``/``redis_port`` the ports written in
    the configurations and ``listen_host`` the address both servers listen on; ``tls`` False writes no TLS
    settings (nkeys and passwords only); ``jetstream_dir`` the JetStream ``store_dir`` ("" = the server's
    default); ``extra_env`` more variables for every env file; ``mount_dir`` the path at which the servers and
    services see the directory (a container bind mount, e.g. ``/run/colo-secrets``; "" = where it is written):
    ``nats.conf``, ``redis-tls.conf`` and every service's env file name their files under it, while
    ``env/admin.env`` keeps the real paths (the operator's ``colo`` commands run on the host);
    ``node_agent_instances`` the ``COLO_INSTANCE`` of a node agent's user (its consumer names, which its NATS
    permissions list; written into its env file), by user name."""

    node_agents: dict[str, tuple[str, ...]]
    hosts: tuple[str, ...] = ()
    store_prefix: str = "colo"
    nats_port: int = 4222
    redis_port: int = 6379
    tls: bool = True
    jetstream_dir: str = ""
    listen_host: str = "0.0.0.0"
    extra_env: dict[str, str] = field(default_factory=dict)
    mount_dir: str = ""
    node_agent_instances: dict[str, str] = field(default_factory=dict)

    def users(self) -> dict[str, str]:
        """User name → service name (a node agent's user → ``node-agent``), the admin last."""
        out = {s: s for s in permissions.GRANTS if s != "node-agent"}
        out.update({u: "node-agent" for u in self.node_agents})
        out[ADMIN] = ADMIN
        return out


def inbox_prefix(user: str) -> str:
    """The reply subject prefix of ``user``: ``_INBOX_<user>`` (its only subscription under ``_INBOX``)."""
    return f"_INBOX_{user}"


def node_agent_users(node_lists: Sequence[Sequence[str]]) -> dict[str, tuple[str, ...]]:
    """User names for node agents serving ``node_lists`` (one list each): ``node-agent`` for a single
    agent, else ``node-agent-1``, ``node-agent-2``… Raises ValueError for an empty list or a node
    served twice."""
    seen: set[str] = set()
    for nodes in node_lists:
        if not nodes:
            raise ValueError("a node agent needs at least one node name")
        dup = seen & set(nodes)
        if dup:
            raise ValueError(f"nodes served by two node agents: {', '.join(sorted(dup))}")
        seen |= set(nodes)
    if len(node_lists) == 1:
        return {"node-agent": tuple(node_lists[0])}
    return {f"node-agent-{i}": tuple(n) for i, n in enumerate(node_lists, 1)}


def _write(path: Path, data: str | bytes, secret: bool = False) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if secret else 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(raw)
    os.chmod(path, 0o600 if secret else 0o644)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert(subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name | None,
          issuer_key: ec.EllipticCurvePrivateKey, *, ca: bool, sans: Sequence[str] = (),
          usage: Sequence[x509.ObjectIdentifier] = ()) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Colo development"),
                      x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    b = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer or name).public_key(key.public_key())
         .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
         .not_valid_after(now + datetime.timedelta(days=CERT_DAYS))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                          content_commitment=False, key_encipherment=False, data_encipherment=False,
                                          key_agreement=False, encipher_only=False, decipher_only=False),
                            critical=True)
    if sans:
        alt: list[x509.GeneralName] = []
        for s in sans:
            try:
                alt.append(x509.IPAddress(ipaddress.ip_address(s)))
            except ValueError:
                alt.append(x509.DNSName(s))
        b = b.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    if usage:
        b = b.add_extension(x509.ExtendedKeyUsage(list(usage)), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def write_certificates(out: Path, hosts: Sequence[str] = ()) -> None:
    """A CA, a server certificate (``localhost``, ``127.0.0.1``, ``::1`` and ``hosts``) and a client
    certificate into ``out`` (``ca.pem``, ``server.pem``/``server-key.pem``, ``client.pem``/``client-key.pem``)."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("Colo development CA", ca_key, None, ca_key, ca=True)
    pem = serialization.Encoding.PEM
    _write(out / "ca.pem", ca.public_bytes(pem))
    _write(out / "ca-key.pem", _key_pem(ca_key), secret=True)
    for name, sans, use in (("server", ["localhost", "127.0.0.1", "::1", *hosts], ExtendedKeyUsageOID.SERVER_AUTH),
                            ("client", [], ExtendedKeyUsageOID.CLIENT_AUTH)):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _cert(f"colo-{name}", key, ca.subject, ca_key, ca=False, sans=sans, usage=[use])
        _write(out / f"{name}.pem", cert.public_bytes(pem))
        _write(out / f"{name}-key.pem", _key_pem(key), secret=True)


def _nats_value(v: Any, indent: str) -> str:
    return json.dumps(v) if not isinstance(v, dict) else "{\n" + "".join(
        f"{indent}  {json.dumps(k)}: {_nats_value(x, indent + '  ')}\n" for k, x in v.items()) + indent + "}"


def nats_config(plan: SecurityPlan, out: Path, public_keys: dict[str, str]) -> str:
    """The nats-server configuration text: listen port, JetStream, TLS (``out``'s certificates) and an
    ``authorization`` block with one nkey user per entry of ``public_keys`` (user → public nkey)."""
    users = plan.users()
    entries = []
    for user, pub in public_keys.items():
        service = users[user]
        perms = permissions.admin_permissions() if service == ADMIN else \
            permissions.nats_permissions(service, plan.node_agents.get(user), inbox_prefix=inbox_prefix(user),
                                         instance=plan.node_agent_instances.get(user, ""))
        entries.append({"nkey": pub, "permissions": perms})
    lines = [f"# nats-server configuration written by colo security init; users: {', '.join(public_keys)}",
             f"host: {json.dumps(plan.listen_host)}", f"port: {plan.nats_port}",
             "jetstream: " + _nats_value({"store_dir": plan.jetstream_dir} if plan.jetstream_dir else {}, "")]
    if plan.tls:
        lines.append("tls: " + _nats_value({"cert_file": str(out / "server.pem"), "key_file": str(out / "server-key.pem"),
                                            "ca_file": str(out / "ca.pem"), "timeout": 5}, ""))
    lines.append("authorization: {\n  users: [\n" + ",\n".join(
        "    " + _nats_value(e, "    ") for e in entries) + "\n  ]\n}")
    return "\n".join(lines) + "\n"


def redis_tls_config(plan: SecurityPlan, out: Path) -> str:
    """A redis-server configuration include: the ACL file and, with TLS, ``tls-port`` (plain port off),
    certificates and client certificate authentication (``tls-auth-clients yes``)."""
    lines = [f"bind {plan.listen_host}", f"aclfile {out / 'redis-users.acl'}"]
    if plan.tls:
        lines += ["port 0", f"tls-port {plan.redis_port}", f"tls-cert-file {out / 'server.pem'}",
                  f"tls-key-file {out / 'server-key.pem'}", f"tls-ca-cert-file {out / 'ca.pem'}",
                  "tls-auth-clients yes"]
    else:
        lines.append(f"port {plan.redis_port}")
    return "\n".join(lines) + "\n"


def env_lines(plan: SecurityPlan, out: Path, user: str) -> list[str]:
    """The ``COLO_*`` variables of ``user``: its nkey seed and Redis password files, TLS files, token file."""
    env = {"COLO_NATS_NKEY_SEED_FILE": out / "nkeys" / f"{user}.nk", "COLO_NATS_INBOX_PREFIX": inbox_prefix(user),
           "COLO_REDIS_USERNAME": user if user != ADMIN else "colo-admin",
           "COLO_REDIS_PASSWORD_FILE": out / "redis-passwords" / (user if user != ADMIN else "colo-admin"),
           "COLO_HTTP_TOKEN_FILE": out / "http-token", "COLO_STORE_PREFIX": plan.store_prefix}
    if plan.tls:
        env.update({"COLO_NATS_TLS_CA_FILE": out / "ca.pem", "COLO_REDIS_TLS_CA_FILE": out / "ca.pem",
                    "COLO_REDIS_TLS_CERT_FILE": out / "client.pem", "COLO_REDIS_TLS_KEY_FILE": out / "client-key.pem"})
    lines = [f"{k}={v}" for k, v in env.items()]
    if plan.node_agent_instances.get(user):
        lines.append(f"COLO_INSTANCE={plan.node_agent_instances[user]}")
    return lines + [f"{k}={v}" for k, v in plan.extra_env.items()]


def init(out: Path, plan: SecurityPlan) -> list[Path]:
    """Write the whole setup into ``out`` (created 0700) and return the files written, sorted.

    Raises ValueError for node names that are not subject tokens, OSError when ``out`` cannot be written."""
    taken = sorted(set(plan.node_agents) & ({*permissions.GRANTS, ADMIN, "colo-admin"} - {"node-agent"}))
    if taken:
        raise ValueError(f"node agent users named like another user: {', '.join(taken)}")
    stray = sorted(set(plan.node_agent_instances) - set(plan.node_agents))
    if stray:
        raise ValueError(f"instances given for users that are no node agent: {', '.join(stray)}")
    bad = sorted(i for i in plan.node_agent_instances.values() if not _INSTANCE.fullmatch(i))
    if bad:
        raise ValueError(f"node agent instances must be letters, digits, '-', '_': {', '.join(map(repr, bad))}")
    for nodes in plan.node_agents.values():  # before anything is written: bad node names raise ValueError
        permissions.nats_permissions("node-agent", nodes)
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o700)
    users = plan.users()
    seen = Path(plan.mount_dir) if plan.mount_dir else out  # the directory as the servers and services see it
    if plan.tls:
        write_certificates(out, plan.hosts)
    public: dict[str, str] = {}
    for user in users:
        kp = nkeys.from_seed(_new_user_seed())
        _write(out / "nkeys" / f"{user}.nk", kp.seed.decode() + "\n", secret=True)
        public[user] = kp.public_key.decode()
    _write(out / "nats.conf", nats_config(plan, seen, public))
    rules = []
    for user, service in users.items():
        redis_user = user if service != ADMIN else "colo-admin"
        password = secrets.token_urlsafe(32)
        _write(out / "redis-passwords" / redis_user, password + "\n", secret=True)
        digest = hashlib.sha256(password.encode()).hexdigest()
        if service == ADMIN:
            rules.append(f"user {redis_user} on #{digest} resetchannels -@all +@all -@dangerous +info +acl|log +acl|whoami "
                         f"~{plan.store_prefix}:*")
        else:
            rules.append(redis_acl.acl_rule(service, digest, plan.store_prefix,
                                            nodes=plan.node_agents.get(user, ()), user=redis_user))
    _write(out / "redis-users.acl", redis_acl.acl_file(rules), secret=True)
    _write(out / "redis-tls.conf", redis_tls_config(plan, seen))
    _write(out / "http-token", secrets.token_urlsafe(32) + "\n", secret=True)
    for user in users:
        where = out if user == ADMIN else seen
        _write(out / "env" / f"{user}.env", "\n".join(env_lines(plan, where, user)) + "\n", secret=True)
    return sorted(p for p in out.rglob("*") if p.is_file())


def _new_user_seed() -> bytes:
    """A fresh user nkey seed (``SU…``): 32 random bytes encoded by the nkeys package."""
    seed: bytes = nkeys.encode_seed(secrets.token_bytes(32), nkeys.PREFIX_BYTE_USER)
    return seed
