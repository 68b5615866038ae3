"""The Redis ACL of colo.redis_acl against the code: every command the store modules send (redis-py calls and
the ``redis.call`` of their Lua scripts) is granted, every key family of colo.keys has a pattern, and the
rules read as the grants say. Running the services as these users is tests/integration/test_security.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from colo import redis_acl
from colo.keys import Keys

SHARED = Path(__file__).resolve().parents[2] / "shared" / "colo"
STORE_MODULES = sorted([*SHARED.glob("store*.py"), SHARED / "reservations.py", SHARED / "reservations_lua.py"])
CLIENT_CALL = re.compile(r"\b(?:self\.redis|redis|pipe|client|conn)\.([a-z_]+)\(")
LUA_CALL = re.compile(r"redis\.call\(\s*['\"]([A-Za-z]+)['\"]")
PY_TO_COMMAND = {"delete": "del", "scan_iter": "scan", "register_script": "evalsha", "execute": "exec",
                 "pipeline": "multi"}
NOT_COMMANDS = {"aclose", "call", "client"}  # client(): redis-py's single-connection client, not CLIENT


def commands_sent(files: list[Path]) -> set[str]:
    out: set[str] = set()
    for f in files:
        text = f.read_text()
        out |= {c.lower() for c in LUA_CALL.findall(text)}
        out |= {PY_TO_COMMAND.get(m, m) for m in CLIENT_CALL.findall(text) if m not in NOT_COMMANDS}
    return out


def test_every_command_the_store_sends_is_granted() -> None:
    sent = commands_sent(STORE_MODULES)
    assert {"hincrby", "zrangebyscore", "evalsha", "scan", "wait"} <= sent  # the scan sees both kinds of call
    granted = set(redis_acl.CONNECT_COMMANDS) | set(redis_acl.READ_COMMANDS) | set(redis_acl.WRITE_COMMANDS)
    assert sent - granted == set()


def test_every_key_family_has_a_pattern() -> None:
    patterns = redis_acl.key_patterns("p")
    members = {n for n in dir(Keys) if not n.startswith("_") and n not in ("pattern", "prefix")}
    assert set(patterns) == members
    assert patterns["node"] == "p:node:*" and patterns["nodes"] == "p:nodes" and patterns["checkpoint"] == "p:checkpoint:*"
    assert all(p.startswith("p:") for p in patterns.values())


def test_rules_follow_the_grants() -> None:
    api = redis_acl.acl_rule("api", "ab" * 32)
    assert "+set" not in api.split() and "%R~colo:node:*" in api and " ~colo:" not in api
    prof = redis_acl.acl_rule("profiler", "ab" * 32, prefix="t1").split()
    assert "~t1:checkpoint:*" in prof and "%R~t1:binding:*" in prof and "~t1:binding:*" not in prof
    sched = redis_acl.acl_rule("scheduler", "ab" * 32).split()
    assert "+evalsha" in sched and "+flushall" not in sched and "-@all" in sched and "resetchannels" in sched
    assert redis_acl.acl_file([]).startswith("user default off")
    agent = redis_acl.acl_rule("node-agent", "ab" * 32, nodes=["n1", "n2"], user="node-agent-1").split()
    assert agent[1] == "node-agent-1" and "~colo:node:n1" in agent and "~colo:limits:n2" in agent
    assert "~colo:node:*" not in agent and "%R~colo:node:*" in agent and "~colo:podstate:*" in agent
    with pytest.raises(ValueError, match="nodes it serves"):
        redis_acl.acl_rule("node-agent", "00")


def test_unknown_services_and_families_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="unknown service"):
        redis_acl.acl_rule("nobody", "00")
    monkeypatch.setitem(redis_acl.GRANTS, "api", redis_acl.StoreGrant(writes=("nodez",)))
    with pytest.raises(ValueError, match="unknown key families"):
        redis_acl.acl_rule("api", "00")
