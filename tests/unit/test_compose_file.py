"""compose.yaml as `make compose-test` drives it (issue 15 item 5), checked without Docker: every host port is
a variable the test can move off the machine's own NATS/Redis, and the stand-in builder reads the host's
Debian mirror from both apt source formats."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

ROOT = Path(__file__).parents[2]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"compose_test_{name}", ROOT / "tests" / "compose" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


stack = _load("stack")
standins = _load("standins")

_PORT = re.compile(r"^(?:127\.0\.0\.1:)?\$\{(?P<var>[A-Z0-9_]+):-(?P<default>\d+)\}:(?P<container>\d+)$")


def _published() -> list[tuple[str, str]]:
    spec = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return [(name, entry) for name, svc in spec["services"].items() for entry in svc.get("ports", [])]


def test_every_host_port_is_a_variable_the_test_sets() -> None:
    found = []
    for service, entry in _published():
        match = _PORT.match(entry)
        assert match, f"{service}: host port of {entry!r} is fixed (use ${{COLO_..._HOST_PORT:-N}})"
        found.append(match["var"])
    assert sorted(found) == sorted(stack.HOST_PORT_VARS), "compose.yaml and tests/compose/stack.py disagree"


def test_base_images_are_the_upstream_names() -> None:
    assert stack.base_images(ROOT) == ["nats:2.10-alpine", "python:3.11-slim", "redis:7-alpine"]
    assert all(standins._recipe(name) is not None for name in stack.base_images(ROOT))


@pytest.mark.parametrize(("files", "expected"), [
    pytest.param({"sources.list.d/debian.sources":
                  "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
                  "Components: main\n\nTypes: deb\nURIs: http://mirror.example/debian-security\n"
                  "Suites: bookworm-security\n"}, "http://mirror.example/debian", id="deb822"),
    pytest.param({"sources.list": "# comment\ndeb http://old.example/debian bookworm main\n"},
                 "http://old.example/debian", id="one-line"),
    pytest.param({"sources.list": "deb http://old.example/debian trixie main\n"}, None, id="other-suite"),
    pytest.param({}, None, id="no-sources"),
])
def test_host_debian_mirror(tmp_path: Path, files: dict[str, str], expected: str | None) -> None:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert standins.host_debian_mirror(tmp_path) == expected
