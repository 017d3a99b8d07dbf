"""The diagnostic routes answer without auth and show exactly the series operators rely on."""

from __future__ import annotations

import aiohttp

from .conftest import StartGateway
from .support import Engine, metric


async def test_healthz_answers_200_with_an_empty_body_for_any_method(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    gateway = await start_gateway(engine.url)
    for method in ("GET", "POST", "DELETE"):
        async with http.request(method, f"{gateway.url}/healthz") as response:
            assert response.status == 200
            assert await response.read() == b""


async def test_queue_reports_pending_demand_as_json_with_a_newline(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    gateway = await start_gateway(engine.url)
    async with http.get(f"{gateway.url}/noctaya/queue") as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == "application/json"
        assert await response.read() == b'{"pending":0}\n'


async def test_fresh_gateway_metrics_show_the_eight_series_and_an_empty_histogram(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    gateway = await start_gateway(engine.url)
    async with http.post(f"{gateway.url}/metrics") as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = await response.text()
    for name, kind in (
        ("noctaya_gateway_pending", "gauge"),
        ("noctaya_gateway_demand", "gauge"),
        ("noctaya_gateway_requests_total", "counter"),
        ("noctaya_gateway_rejections_total", "counter"),
        ("noctaya_gateway_activation_wait_seconds", "histogram"),
        ("noctaya_gateway_scaler_streams", "gauge"),
        ("noctaya_gateway_activation_events_total", "counter"),
        ("noctaya_gateway_demand_reports_total", "counter"),
    ):
        assert f"# TYPE {name} {kind}" in text
    assert "noctaya_gateway_activation_wait_seconds_count 0" in text
    for bucket in ("0.01", "0.1", "1.0", "5.0", "15.0", "30.0", "60.0", "120.0", "300.0"):
        assert f'noctaya_gateway_activation_wait_seconds_bucket{{le="{bucket}"}} 0' in text
    assert "noctaya_gateway_requests_total{" not in text, "labelled series appear on first use"
    assert "process_" not in text, "private registry only"
    assert "python_" not in text
    assert metric(text, "noctaya_gateway_pending") == 0


async def test_diagnostic_routes_need_no_key_even_when_auth_is_configured(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession, tmp_path
) -> None:
    key = tmp_path / "key"
    key.write_text("secret\n")
    gateway = await start_gateway(engine.url, client_api_key_file=str(key))
    for path in ("/healthz", "/noctaya/queue", "/metrics"):
        async with http.get(f"{gateway.url}{path}") as response:
            assert response.status == 200, path
    async with http.get(f"{gateway.url}/v1/models") as response:
        assert response.status == 401
