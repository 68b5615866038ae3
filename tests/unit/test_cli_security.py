"""``colo security init``: the files it writes, their modes, the users and their node lists, bad input.
The servers started with these files are tests/integration/test_security.py."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from colo.cli import main as cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_writes_every_file_with_secrets_private(tmp_path: Path) -> None:
    out = tmp_path / "sec"
    assert cli.main(["security", "init", str(out), "--nodes", f"agent-a={EXAMPLES / 'nodes-a.json'}",
                     "--nodes", "agent-b=node-b1,node-b2", "--host", "nats", "--store-prefix", "p1"]) == 0
    names = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    users = ["scheduler", "descheduler", "slo-manager", "profiler", "api", "agent-a", "agent-b", "admin"]
    assert {"ca.pem", "server.pem", "server-key.pem", "client.pem", "client-key.pem", "nats.conf",
            "redis-users.acl", "redis-tls.conf", "http-token"} <= names
    assert {f"nkeys/{u}.nk" for u in users} | {f"env/{u}.env" for u in users} <= names
    assert _mode(out) == _mode(out / "nkeys") == _mode(out / "env") == _mode(out / "redis-passwords") == 0o700
    for secret in ["ca-key.pem", "server-key.pem", "http-token", "redis-users.acl", "nkeys/api.nk",
                   "redis-passwords/api", "env/agent-a.env"]:
        assert _mode(out / secret) == 0o600, secret
    conf = (out / "nats.conf").read_text()
    assert '"colo.v1.node.metric.node-a1"' in conf and '"colo.v1.node.metric.node-b2"' in conf
    assert "colo.v1.node.metric.*" not in conf and '"cert_file"' in conf
    acl = (out / "redis-users.acl").read_text()
    assert "user agent-a on" in acl and "~p1:node:node-a1" in acl and "user default off" in acl
    env = dict(line.split("=", 1) for line in (out / "env" / "agent-a.env").read_text().splitlines())
    assert env["COLO_NATS_NKEY_SEED_FILE"] == str(out.resolve() / "nkeys" / "agent-a.nk")
    assert env["COLO_REDIS_USERNAME"] == "agent-a" and env["COLO_STORE_PREFIX"] == "p1"
    assert Path(env["COLO_REDIS_PASSWORD_FILE"]).read_text().strip()
    assert (out / "nkeys" / "agent-a.nk").read_text().startswith("SU")


def test_no_tls_writes_no_certificates(tmp_path: Path) -> None:
    assert cli.main(["security", "init", str(tmp_path / "s"), "--nodes", "n1", "--no-tls"]) == 0
    assert not (tmp_path / "s" / "ca.pem").exists()
    assert "tls" not in (tmp_path / "s" / "nats.conf").read_text().split("authorization")[0]
    assert "TLS" not in (tmp_path / "s" / "env" / "node-agent.env").read_text()


@pytest.mark.parametrize(("args", "error"), [
    ([], "give the node agents' nodes"),
    (["--nodes", "n1,n2", "--nodes", "n2"], "served by two node agents: n2"),
    (["--nodes", "a.b"], "not a subject token"),
    (["--nodes", "scheduler=n1"], "named like another user"),
    (["--nodes", "bad name=n1"], "use letters"),
    (["--nodes", "x=missing.json"], "not a nodes file"),
    (["--nodes", "a=n1", "--instance", "b=i1"], "no node agent: b"),
    (["--nodes", "a=n1", "--instance", "a=i.1"], "instances must be letters"),
])
def test_bad_input_exits_2_naming_the_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                              error: str) -> None:
    assert cli.main(["security", "init", str(tmp_path / "s"), *args]) == 2
    assert error in capsys.readouterr().err.replace("\n", " ")


def test_nodes_file_lists_one_agent_per_line(tmp_path: Path) -> None:
    f = tmp_path / "agents.txt"
    f.write_text("# agents\nn1 n2\nn3\n")
    assert cli.main(["security", "init", str(tmp_path / "s"), "--nodes-file", str(f), "--no-tls"]) == 0
    conf = (tmp_path / "s" / "nats.conf").read_text()
    assert conf.count('"colo.v1.node.metric.n') == 3
    assert json.dumps("colo.v1.node.metric.n3") in conf


def test_compose_writes_what_compose_secure_yaml_mounts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--compose`` (run from the repository root, as docs/compose.md says): files named as the containers see
    them, the compose host names in the server certificate, the two node agents of compose.yaml; every file
    compose.secure.yaml mounts exists, every built service gets its own user's env file and seed."""
    import yaml
    from cryptography import x509

    repo = EXAMPLES.parent
    monkeypatch.chdir(repo)
    out = tmp_path / "secrets"
    assert cli.main(["security", "init", str(out), "--compose"]) == 0
    conf = (out / "nats.conf").read_text()
    assert '"store_dir": "/data"' in conf and '"/run/colo-secrets/server.pem"' in conf and str(out) not in conf
    assert "aclfile /run/colo-secrets/redis-users.acl" in (out / "redis-tls.conf").read_text()
    cert = x509.load_pem_x509_certificate((out / "server.pem").read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"nats", "redis", "localhost"} <= set(sans.get_values_for_type(x509.DNSName))
    env = dict(line.split("=", 1) for line in (out / "env" / "node-agent-b.env").read_text().splitlines())
    assert env["COLO_NATS_NKEY_SEED_FILE"] == "/run/colo-secrets/nkeys/node-agent-b.nk"
    assert env["COLO_INSTANCE"] == "agent-b"  # compose.yaml's: its consumers are named after it
    assert '"$JS.API.CONSUMER.MSG.NEXT.COLO_PODS.node-agent-bound-agent-b"' in (out / "nats.conf").read_text()
    admin = dict(line.split("=", 1) for line in (out / "env" / "admin.env").read_text().splitlines())
    assert admin["COLO_NATS_NKEY_SEED_FILE"] == str(out.resolve() / "nkeys" / "admin.nk")  # the host's colo
    assert '"colo.v1.node.metric.node-b1"' in conf

    base = yaml.safe_load((repo / "compose.yaml").read_text())["services"]
    class ComposeLoader(yaml.SafeLoader):  # compose's merge tags (!override, !reset) read as plain values
        pass

    ComposeLoader.add_constructor("!override", lambda loader, node: loader.construct_sequence(node))
    secure = yaml.load((repo / "compose.secure.yaml").read_text(), Loader=ComposeLoader)["services"]
    prefix = "${COLO_SECRETS_DIR:-./secrets}/"
    for name, svc in secure.items():
        for vol in svc.get("volumes", []):
            rel = vol["source"].removeprefix(prefix)
            assert vol["target"] == f"/run/colo-secrets/{rel}" and vol["read_only"], (name, vol)
            assert (out / rel).is_file(), (name, rel)
    for name in (n for n, s in base.items() if "build" in s):
        (env_file,) = secure[name]["env_file"]
        user = Path(env_file).stem
        assert (out / "env" / f"{user}.env").is_file() and user == name, name
        mounted = {v["source"].removeprefix(prefix) for v in secure[name]["volumes"]}
        assert f"nkeys/{user}.nk" in mounted and f"redis-passwords/{user}" in mounted
        assert not {m for m in mounted if m.startswith("nkeys/")} - {f"nkeys/{user}.nk"}, name  # only its own
