"""Local mode configures the gateway with the operator's contract: same names, order and forms."""

from __future__ import annotations

from pathlib import Path

import pytest
from noctaya.core.plugins import VendorRegistry
from noctaya.gateway.process.config import ColdStartMode, load_config
from noctaya.k8s.offline import render_files
from noctaya.local.gateway_env import gateway_env

from .support import plan_file, runtime_doc, service_doc, write_manifest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "local" / "engine-stub.yaml"


@pytest.mark.parametrize(
    ("endpoint", "queue", "mode", "heartbeat"),
    [
        ({}, "100", "keepalive", "10s"),
        ({"maxQueue": 7, "coldStart": {"mode": "reject"}}, "7", "reject", "10s"),
        (
            {"coldStart": {"mode": "keepalive", "heartbeatInterval": "1500ms"}},
            "100",
            "keepalive",
            "1.5s",
        ),
    ],
)
def test_local_gateway_env_is_the_single_gateway_contract_on_loopback(
    tmp_path: Path, endpoint: dict[str, object], queue: str, mode: str, heartbeat: str
) -> None:
    service = service_doc(endpoint=endpoint)
    manifest = write_manifest(tmp_path / "svc.yaml", runtime_doc(18000), service)
    plan = plan_file(manifest)
    assert list(gateway_env(plan, "127.0.0.1:8080").items()) == [
        ("NOCTAYA_BACKEND_URL", "http://127.0.0.1:18000"),
        ("NOCTAYA_LISTEN_ADDR", "127.0.0.1:8080"),
        ("NOCTAYA_MAX_QUEUE", queue),
        ("NOCTAYA_SCALER_LISTEN_ADDR", "127.0.0.1:0"),
        ("NOCTAYA_ACTIVATION_TIMEOUT", "30s"),
        ("NOCTAYA_COLDSTART_MODE", mode),
        ("NOCTAYA_HEARTBEAT_INTERVAL", heartbeat),
        ("NOCTAYA_SERVED_MODELS", '["svc"]'),
    ]


def test_the_gateway_reads_the_example_service_settings_from_local_env() -> None:
    plan = plan_file(EXAMPLE)
    config = load_config(gateway_env(plan, "127.0.0.1:0"))
    assert config.backend_url == "http://127.0.0.1:18000"
    assert config.listen_addr == "127.0.0.1:0"
    assert config.scaler_listen_addr == "127.0.0.1:0"
    assert config.max_queue == 10
    assert config.coldstart_mode is ColdStartMode.KEEPALIVE
    assert config.heartbeat_interval == 1.0
    assert config.activation_timeout == 60.0
    assert plan.autoscaling.cooldown_seconds == 3
    assert plan.engine.argv[1:] == ("--model=Qwen/Qwen3-0.6B", "--served-model-name=demo")
    assert plan.engine.argv[0].endswith("noctaya-engine-stub")


def test_an_api_key_file_configures_gateway_auth(tmp_path: Path) -> None:
    key = tmp_path / "api-key"
    key.write_text("s3cret\n", encoding="utf-8")
    auth = {"authentication": {"secretRef": {"name": "client-key", "key": "api-key"}}}
    manifest = write_manifest(tmp_path / "svc.yaml", runtime_doc(18000), service_doc(endpoint=auth))
    plan = plan_file(manifest, api_key_file=str(key))
    assert load_config(gateway_env(plan, "127.0.0.1:0")).client_api_key_file == str(key)


def test_the_llama_cpp_example_runs_its_server_and_is_ready_once_it_answers() -> None:
    plan = plan_file(EXAMPLE.with_name("llama-cpp.yaml"))
    interpreter, *argv = plan.engine.argv
    assert Path(interpreter).name == "python3"
    assert argv == [
        "-m",
        "llama_cpp.server",
        "--host=127.0.0.1",
        "--port=18001",
        "--model_alias=qwen",
        "--n_ctx=2048",
        "--interrupt_requests=False",
        "--hf_model_repo_id=Qwen/Qwen2.5-0.5B-Instruct-GGUF",
        "--model=*q4_k_m.gguf",
    ]
    env = gateway_env(plan, "127.0.0.1:0")
    assert list(env)[:2] == ["NOCTAYA_BACKEND_URL", "NOCTAYA_BACKEND_READINESS_PATH"]
    config = load_config(env)
    assert config.backend_url == "http://127.0.0.1:18001"
    assert config.backend_readiness_path == "/docs"


@pytest.mark.parametrize(
    ("readiness", "path"),
    [
        ({"httpGet": {"path": "/ready", "port": "http"}}, "/ready"),
        ({"httpGet": {"port": 18000}}, "/"),
        ({"tcpSocket": {"port": "http"}}, None),
        (None, None),
    ],
)
def test_the_gateway_asks_the_runtime_s_http_readiness_path(
    tmp_path: Path, readiness: dict[str, object] | None, path: str | None
) -> None:
    health = {} if readiness is None else {"health": {"readiness": readiness}}
    runtime = runtime_doc(18000, **health)
    plan = plan_file(write_manifest(tmp_path / "s.yaml", runtime, service_doc()))
    env = gateway_env(plan, "127.0.0.1:0")
    assert env.get("NOCTAYA_BACKEND_READINESS_PATH") == path
    assert load_config(env).backend_readiness_path == (path or "/health")


def test_local_mode_and_the_operator_list_the_same_served_models() -> None:
    """Both come from the core: the engine's --served-model-name, in the gateway env contract."""
    plan = plan_file(EXAMPLE)
    local = gateway_env(plan, "127.0.0.1:0")["NOCTAYA_SERVED_MODELS"]
    rendered = render_files(
        [EXAMPLE], VendorRegistry.discover(), gateway_image="gw", gateway_replicas=1
    )
    (gateway,) = [o for o in rendered.objects if o["metadata"]["name"] == "demo-gateway"]
    env = {
        e["name"]: e.get("value")
        for e in gateway["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert local == env["NOCTAYA_SERVED_MODELS"] == '["demo"]'
    assert load_config(gateway_env(plan, "127.0.0.1:0")).served_models == ("demo",)
