"""Client bearer keys: checked before admission, re-read as the file changes, never forwarded."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import pytest
from noctaya.gateway.requests.auth import KEY_MAX_AGE

from .conftest import StartGateway
from .support import Engine, eventually, metric


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "client-api-key"
    path.write_text("  first-key\n")
    return path


async def test_missing_or_wrong_key_gets_401_with_a_bearer_challenge_in_openai_shape(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession, key_file: Path
) -> None:
    gateway = await start_gateway(engine.url, client_api_key_file=str(key_file))
    for headers in (
        {},
        {"Authorization": "Bearer wrong-key"},
        {"Authorization": "Bearer  first-key"},
        {"Authorization": "Basic Zmlyc3Qta2V5"},
    ):
        async with http.post(
            f"{gateway.url}/v1/chat/completions", json={}, headers=headers
        ) as response:
            assert response.status == 401, headers
            assert response.headers["WWW-Authenticate"] == 'Bearer realm="noctaya"'
            assert response.headers["Content-Type"] == "application/json"
            assert await response.json() == {
                "error": {
                    "message": "unauthorized",
                    "type": "authentication_error",
                    "code": "unauthorized",
                }
            }
    text = await gateway.metrics(http)
    assert metric(text, "noctaya_gateway_rejections_total", {"reason": "unauthorized"}) == 4
    assert metric(text, "noctaya_gateway_requests_total", {"code": "401"}) == 4
    assert engine.requests == [], "nothing reaches the backend without a valid key"


async def test_401_outside_v1_is_go_style_plain_text(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession, key_file: Path
) -> None:
    gateway = await start_gateway(engine.url, client_api_key_file=str(key_file))
    async with http.get(f"{gateway.url}/other") as response:
        assert response.status == 401
        assert response.headers["Content-Type"] == "text/plain; charset=utf-8"
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert await response.read() == b"unauthorized\n"


async def test_valid_key_is_proxied_and_the_authorization_header_is_stripped(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession, key_file: Path
) -> None:
    gateway = await start_gateway(engine.url, client_api_key_file=str(key_file))
    async with http.post(
        f"{gateway.url}/v1/chat/completions",
        json={"messages": []},
        headers={"Authorization": "Bearer first-key"},
    ) as response:
        assert response.status == 200
        assert (await response.json())["object"] == "chat.completion"
    assert b"authorization" not in dict(engine.requests[-1].headers)


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "bEaReR"])
async def test_the_bearer_scheme_is_matched_case_insensitively(
    engine: Engine,
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
    key_file: Path,
    scheme: str,
) -> None:
    gateway = await start_gateway(engine.url, client_api_key_file=str(key_file))
    async with http.post(
        f"{gateway.url}/v1/chat/completions",
        json={"messages": []},
        headers={"Authorization": f"{scheme} first-key"},
    ) as response:
        assert response.status == 200
    assert b"authorization" not in dict(engine.requests[-1].headers)


async def test_without_auth_configured_authorization_passes_through(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    gateway = await start_gateway(engine.url)
    async with http.post(
        f"{gateway.url}/v1/completions", json={}, headers={"Authorization": "Bearer anything"}
    ) as response:
        assert response.status == 200
    assert dict(engine.requests[-1].headers)[b"authorization"] == b"Bearer anything"


async def test_rotating_the_key_file_takes_effect_without_restart(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession, key_file: Path
) -> None:
    """Within KEY_MAX_AGE of the file changing: the key read is used that long."""
    gateway = await start_gateway(engine.url, client_api_key_file=str(key_file))
    url = f"{gateway.url}/v1/completions"
    async with http.post(url, json={}, headers={"Authorization": "Bearer first-key"}) as r:
        assert r.status == 200
    _rotate_key_file(key_file, "second-key\n")

    async def first_key_refused() -> bool:
        async with http.post(url, json={}, headers={"Authorization": "Bearer first-key"}) as r:
            return r.status == 401

    await eventually(first_key_refused, within=KEY_MAX_AGE + 0.5, what="the old key refused")
    async with http.post(url, json={}, headers={"Authorization": "Bearer second-key"}) as r:
        assert r.status == 200


@pytest.mark.parametrize("breakage", ["deleted", "emptied"])
async def test_unreadable_or_empty_key_file_answers_503_without_a_challenge(
    engine: Engine,
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
    key_file: Path,
    breakage: str,
) -> None:
    gateway = await start_gateway(engine.url, client_api_key_file=str(key_file))
    _break_key_file(key_file, breakage)
    async with http.post(
        f"{gateway.url}/v1/completions", json={}, headers={"Authorization": "Bearer first-key"}
    ) as response:
        assert response.status == 503
        assert "WWW-Authenticate" not in response.headers
        body = await response.json()
        assert body["error"]["message"] == "gateway authentication unavailable"
        assert body["error"]["code"] == "authentication_unavailable"
    async with http.get(f"{gateway.url}/") as response:
        assert response.status == 503
        assert await response.read() == b"gateway authentication unavailable\n"
    text = await gateway.metrics(http)
    reason = {"reason": "authentication_unavailable"}
    assert metric(text, "noctaya_gateway_rejections_total", reason) == 2
    assert metric(text, "noctaya_gateway_requests_total", {"code": "503"}) == 2


async def test_bad_key_gets_401_even_when_the_queue_is_full(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession, key_file: Path
) -> None:
    engine.make_unready()
    gateway = await start_gateway(engine.url, client_api_key_file=str(key_file), max_queue=1)
    good = {"Authorization": "Bearer first-key"}
    holder = asyncio.ensure_future(
        http.post(f"{gateway.url}/v1/completions", json={}, headers=good)
    )
    await eventually(lambda: gateway.pending == 1, what="the only slot to be taken")
    async with http.post(f"{gateway.url}/v1/completions", json={}, headers=good) as response:
        assert response.status == 429
    bad = {"Authorization": "Bearer nope"}
    async with http.post(f"{gateway.url}/v1/completions", json={}, headers=bad) as response:
        assert response.status == 401
    engine.make_ready()
    async with await holder as response:
        assert response.status == 200
        assert json.loads(await response.read())["object"] == "text_completion"


def _rotate_key_file(path: Path, key: str) -> None:
    """Replace the file atomically, as the kubelet does when a Secret changes."""
    replacement = path.with_name("new-key")
    replacement.write_text(key)
    replacement.replace(path)


def _break_key_file(path: Path, how: str) -> None:
    if how == "deleted":
        path.unlink()
    else:
        path.write_text(" \n")


async def test_a_key_file_holds_one_key_so_a_line_of_two_is_no_key(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession, key_file: Path
) -> None:
    """One key at a time: rotating cannot keep the old key working beside the new one."""
    _rotate_key_file(key_file, "old-key\nnew-key\n")
    gateway = await start_gateway(engine.url, client_api_key_file=str(key_file))
    for key in ("old-key", "new-key"):
        async with http.post(
            f"{gateway.url}/v1/completions", json={}, headers={"Authorization": f"Bearer {key}"}
        ) as response:
            assert response.status == 401, key
    assert engine.requests == []
