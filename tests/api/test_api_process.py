"""``python -m colo_api`` as a process: settings problems exit 2 listing each; with a token file the service
starts, ``/healthz`` is open and ``/v1`` needs the file's token."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from colo.embedded import free_port
from colo_api.settings import ApiSettings, resolve_token


def test_token_sources(tmp_path: Path) -> None:
    assert resolve_token(ApiSettings()) == ""
    assert resolve_token(ApiSettings(token="abc")) == "abc"
    f = tmp_path / "token"
    f.write_text("  from-file \nsecond line ignored\n")
    assert resolve_token(ApiSettings(token_file=str(f))) == "from-file"
    f.write_text("\n")
    with pytest.raises(ValueError, match="the first line is empty"):
        resolve_token(ApiSettings(token_file=str(f)))
    with pytest.raises(ValueError, match="cannot read"):
        resolve_token(ApiSettings(token_file=str(tmp_path / "missing")))
    with pytest.raises(ValueError, match="not both"):
        ApiSettings(token="a", token_file=str(f))


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLO_")}
    return {**env, **extra}


def test_invalid_settings_exit_2_listing_each(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "colo_api"], capture_output=True, text=True, timeout=60,
                          env=_env(COLO_API_SSE_QUEUE="3", COLO_API_TOKEN_FILE=str(tmp_path / "none"),
                                   COLO_API_TOKN="x"))
    assert proc.returncode == 2, proc.stderr
    assert "sse_queue" in proc.stderr and "COLO_API_TOKN" in proc.stderr


@pytest.mark.integration
async def test_process_serves_with_the_token_file(tmp_path: Path, nats_url: str, redis_url: str) -> None:
    token = tmp_path / "token"
    token.write_text("file-token\n")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "colo_api"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=_env(COLO_NATS_URL=nats_url, COLO_REDIS_URL=redis_url, COLO_HTTP_PORT=str(port),
                                     COLO_STORE_PREFIX="test-api-process", COLO_API_TOKEN_FILE=str(token)))
    url = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as http:
            for _ in range(200):
                try:
                    async with http.get(url + "/readyz") as resp:
                        if resp.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                await asyncio.sleep(0.05)
            async with http.get(url + "/healthz") as resp:
                assert resp.status == 200
            async with http.get(url + "/v1/pods") as resp:
                assert resp.status == 401
            async with http.get(url + "/v1/pods", headers={"Authorization": "Bearer file-token"}) as resp:
                assert resp.status == 200 and (await resp.json()) == {"items": []}
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0
