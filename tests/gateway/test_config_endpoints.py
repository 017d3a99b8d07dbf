"""The settings of the EndpointSlice watch and of KV-cache scaling, parsed from the environment as
the operator renders them."""

from __future__ import annotations

import pytest
from noctaya.core.plan import gateway_env as names
from noctaya.gateway.process.config import (
    DEFAULT_KUBERNETES_CA_FILE,
    DEFAULT_KUBERNETES_TOKEN_FILE,
    BackendEndpoints,
    load_config,
)
from noctaya.gateway.process.config_shared import ConfigError
from noctaya.gateway.scaler.kv_cache_settings import KvCacheSettings

BACKEND = {names.BACKEND_URL: "http://backend.ns.svc:8000"}
IN_A_POD = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}


def test_without_endpoints_the_gateway_knows_only_the_backend_url() -> None:
    config = load_config(BACKEND)
    assert config.backend_endpoints is None
    assert config.kv_cache is None


def test_endpoints_in_a_pod_reach_the_api_server_with_the_service_account() -> None:
    config = load_config({**BACKEND, **IN_A_POD, names.BACKEND_ENDPOINTS: "ns/backend"})
    assert config.backend_endpoints == BackendEndpoints(
        "ns",
        "backend",
        "https://10.96.0.1:443",
        token_file=DEFAULT_KUBERNETES_TOKEN_FILE,
        ca_file=DEFAULT_KUBERNETES_CA_FILE,
    )


def test_an_ipv6_api_server_is_bracketed_and_the_files_can_be_moved() -> None:
    config = load_config(
        {
            **BACKEND,
            "KUBERNETES_SERVICE_HOST": "fd00::1",
            "KUBERNETES_SERVICE_PORT": "6443",
            names.BACKEND_ENDPOINTS: "ns/backend",
            names.KUBERNETES_TOKEN_FILE: "/run/token",
            names.KUBERNETES_CA_FILE: "/run/ca.crt",
        }
    )
    wanted = config.backend_endpoints
    assert wanted is not None
    assert wanted.api_url == "https://[fd00::1]:6443"
    assert (wanted.token_file, wanted.ca_file) == ("/run/token", "/run/ca.crt")


def test_outside_a_pod_the_watch_has_no_api_server() -> None:
    config = load_config({**BACKEND, names.BACKEND_ENDPOINTS: "ns/backend"})
    assert config.backend_endpoints is not None
    assert config.backend_endpoints.api_url is None


@pytest.mark.parametrize(
    "text", ["backend", "ns/", "/backend", "ns/back/end", "NS/backend", "ns/-b"]
)
def test_endpoints_must_name_a_namespace_and_a_service(text: str) -> None:
    with pytest.raises(ConfigError, match=names.BACKEND_ENDPOINTS):
        load_config({**BACKEND, names.BACKEND_ENDPOINTS: text})


def test_kv_cache_scaling_is_read_as_the_scaler_reads_it() -> None:
    config = load_config(
        {
            **BACKEND,
            names.SCALING_METRIC: "kvCacheUtil",
            names.BACKEND_METRICS_PORT: "8001",
            names.BACKEND_METRICS_PATH: "/engine/metrics",
            names.BACKEND_KV_CACHE_METRIC: "vllm:kv_cache_usage_perc",
        }
    )
    assert config.kv_cache == KvCacheSettings("vllm:kv_cache_usage_perc", 8001, "/engine/metrics")


KV_CACHE = {
    names.SCALING_METRIC: "kvCacheUtil",
    names.BACKEND_METRICS_PORT: "8001",
    names.BACKEND_KV_CACHE_METRIC: "vllm:kv_cache_usage_perc",
}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        (names.SCALING_METRIC, "kvcache"),
        (names.BACKEND_METRICS_PORT, "0"),
        (names.BACKEND_METRICS_PORT, "65536"),
        (names.BACKEND_METRICS_PORT, "80a"),
        (names.BACKEND_METRICS_PORT, "٣"),
        (names.BACKEND_METRICS_PATH, "metrics"),
        (names.BACKEND_KV_CACHE_METRIC, "not a name"),
    ],
)
def test_a_bad_scaling_setting_stops_startup(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name):
        load_config({**BACKEND, **KV_CACHE, name: value})
