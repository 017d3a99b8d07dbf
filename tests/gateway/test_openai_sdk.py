"""The official OpenAI SDK through the gateway: completions work, and the gateway's own errors
arrive as the SDK's typed exceptions with the gateway's message and code."""

from __future__ import annotations

import asyncio
from pathlib import Path

import openai
import pytest
from noctaya.gateway.process.config import ColdStartMode
from openai import AsyncOpenAI

from .conftest import StartGateway
from .support import Engine, eventually


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "key"
    path.write_text("sdk-key\n")
    return path


def _client(url: str, key: str = "sdk-key") -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0, timeout=10)


async def test_sdk_non_streaming_chat_completion_through_the_gateway(
    engine: Engine, start_gateway: StartGateway, key_file: Path
) -> None:
    gateway = await start_gateway(engine.url, client_api_key_file=str(key_file))
    async with _client(gateway.url) as client:
        completion = await client.chat.completions.create(
            model="stub", messages=[{"role": "user", "content": "hi"}]
        )
    assert completion.choices[0].message.content == "tok0 tok1 tok2 "
    assert completion.choices[0].finish_reason == "stop"


async def test_sdk_streaming_chat_completion_through_the_gateway(
    engine: Engine, start_gateway: StartGateway, key_file: Path
) -> None:
    gateway = await start_gateway(engine.url, client_api_key_file=str(key_file))
    async with _client(gateway.url) as client:
        stream = await client.chat.completions.create(
            model="stub", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        pieces = [chunk.choices[0].delta.content async for chunk in stream]
    assert pieces == ["tok0 ", "tok1 ", "tok2 "]


async def test_sdk_stream_through_a_cold_start_skips_heartbeats(
    engine: Engine, start_gateway: StartGateway
) -> None:
    engine.make_unready()
    gateway = await start_gateway(engine.url, heartbeat_interval=0.05)
    asyncio.get_running_loop().call_later(0.3, engine.make_ready)
    async with _client(gateway.url) as client:
        stream = await client.completions.create(model="stub", prompt="hi", stream=True)
        pieces = [chunk.choices[0].text async for chunk in stream]
    assert pieces == ["tok0 ", "tok1 ", "tok2 "]


async def test_sdk_raises_the_gateway_errors_as_typed_exceptions(
    engine: Engine, start_gateway: StartGateway, key_file: Path
) -> None:
    gateway = await start_gateway(engine.url, client_api_key_file=str(key_file))
    async with _client(gateway.url, key="wrong") as client:
        with pytest.raises(openai.AuthenticationError) as caught:
            await client.chat.completions.create(model="stub", messages=[])
    assert caught.value.code == "unauthorized"
    assert caught.value.body == {
        "message": "unauthorized",
        "type": "authentication_error",
        "code": "unauthorized",
    }


async def test_sdk_sees_queue_full_as_a_rate_limit_error(
    engine: Engine, start_gateway: StartGateway
) -> None:
    engine.make_unready()
    gateway = await start_gateway(engine.url, max_queue=1)
    async with _client(gateway.url) as client:
        holder = asyncio.ensure_future(
            client.completions.create(model="stub", prompt="hold the slot")
        )
        await eventually(lambda: gateway.pending == 1, what="the only slot to be taken")
        with pytest.raises(openai.RateLimitError) as caught:
            await client.completions.create(model="stub", prompt="one too many")
        assert caught.value.code == "queue_full"
        assert caught.value.response.headers["retry-after"] == "5"
        engine.make_ready()
        completion = await holder
    assert completion.choices[0].text == "tok0 tok1 tok2 "


async def test_sdk_stream_that_times_out_raises_the_activation_timeout(
    engine: Engine, start_gateway: StartGateway
) -> None:
    engine.make_unready()
    gateway = await start_gateway(engine.url, activation_timeout=0.3)
    async with _client(gateway.url) as client:
        stream = await client.chat.completions.create(model="stub", messages=[], stream=True)
        with pytest.raises(openai.APIError) as caught:
            async for _ in stream:
                pass
    assert caught.value.message == "backend activation timeout"
    assert caught.value.code == "activation_timeout"


async def test_sdk_sees_cold_start_rejection_as_a_service_unavailable_error(
    engine: Engine, start_gateway: StartGateway
) -> None:
    engine.make_unready()
    gateway = await start_gateway(engine.url, coldstart_mode=ColdStartMode.REJECT)
    async with _client(gateway.url) as client:
        with pytest.raises(openai.InternalServerError) as caught:
            await client.chat.completions.create(model="stub", messages=[])
    assert caught.value.status_code == 503
    assert caught.value.code == "cold_start"
    assert caught.value.response.headers["retry-after"] == "10"
