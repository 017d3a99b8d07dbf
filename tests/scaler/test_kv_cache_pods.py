"""The aggregator reads KV-cache use from the pods a real kube-apiserver's EndpointSlices name:
the watch and credentials the operator gives it, an engine stub standing for the pod on this
machine's address, KEDA played by a real gRPC client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from gateway.kube_access import READY, TERMINATING, KubeAccess, host_address, kube_access
from gateway.support import Engine, eventually, start_engine
from kubernetes import client as k8s_client
from noctaya.gateway.aggregator import main
from noctaya.gateway.aggregator.config import load_config
from noctaya.gateway.aggregator.server import AggregatorServer
from noctaya.gateway.backend.endpoints import WatchState
from noctaya.gateway.process.config import load_config as load_gateway_config
from noctaya.gateway.process.gateway_server import GatewayServer
from support.envtest import ControlPlane

from .conftest import TOKEN
from .keda import Keda

pytestmark = pytest.mark.integration

GAUGE = "vllm:kv_cache_usage_perc"


@pytest.fixture
async def access(
    control_plane: ControlPlane, api_client: k8s_client.ApiClient, namespace: str, tmp_path: Path
) -> KubeAccess:
    ca = control_plane.workdir / "pki" / "ca.crt"
    granted = await kube_access(api_client, namespace, control_plane.host, ca, tmp_path)
    await granted.bind()
    return granted


@pytest.fixture
async def pod() -> AsyncIterator[Engine]:
    engine = await start_engine(host_address())
    engine.stub.gauges["kv_cache"] = 0.5
    yield engine
    engine.server.close()


def environ(access: KubeAccess, pod: Engine, tmp_path: Path) -> dict[str, str]:
    """What the operator renders into the aggregator's pod, and Kubernetes adds to every one."""
    token = tmp_path / "demand-token"
    token.write_text(TOKEN)
    api = urlsplit(access.api_url)
    return {
        "NOCTAYA_DEMAND_AUTH_TOKEN_FILE": str(token),
        "NOCTAYA_AGGREGATOR_LISTEN_ADDR": "127.0.0.1:0",
        "NOCTAYA_SCALER_LISTEN_ADDR": "127.0.0.1:0",
        "NOCTAYA_BACKEND_ENDPOINTS": f"{access.namespace}/backend",
        "NOCTAYA_KUBERNETES_TOKEN_FILE": str(access.token_file),
        "NOCTAYA_KUBERNETES_CA_FILE": str(access.ca_file),
        "KUBERNETES_SERVICE_HOST": api.hostname or "",
        "KUBERNETES_SERVICE_PORT": str(api.port),
        "NOCTAYA_SCALING_METRIC": "kvCacheUtil",
        "NOCTAYA_BACKEND_KV_CACHE_METRIC": GAUGE,
        "NOCTAYA_BACKEND_METRICS_PORT": pod.url.rsplit(":", 1)[1],
    }


async def test_a_pod_two_slices_name_is_read_once_and_a_terminating_one_not_at_all(
    access: KubeAccess, pod: Engine, tmp_path: Path
) -> None:
    address, port = pod.url.split("//", 1)[1].rsplit(":", 1)
    config = load_config(environ(access, pod, tmp_path))
    watch = main._pod_watch(config)
    assert watch is not None
    server = AggregatorServer(config, pods=watch)
    await server.start()
    keda = Keda.insecure(server.scaler_port)
    try:
        await eventually(lambda: watch.state is WatchState.WATCHING, what="the first list")
        assert await keda.metric() == 0.0  # no pod named yet
        changes = 0

        def changed() -> None:
            nonlocal changes
            changes += 1

        watch.on_change(changed)
        await access.put_slice("a", [(address, READY)], int(port))
        await eventually(lambda: changes == 1, what="the first slice")
        await access.put_slice("b", [(address, READY)], int(port))
        await eventually(lambda: changes == 2, what="the second slice naming the same pod")
        await eventually(lambda: _read(keda, 50.0), within=10.0, what="the pod's 50 %, once")
        await access.put_slice("a", [(address, TERMINATING)], int(port))
        await access.delete_slice("b")
        await eventually(lambda: _read(keda, 0.0), within=10.0, what="the terminating pod left")
        assert await keda.is_active() is False  # activation stays with demand
    finally:
        await keda.close()
        await server.stop(1)
        await watch.close()


async def _read(keda: Keda, percent: float) -> bool:
    return await keda.metric() == pytest.approx(percent)


def test_kv_cache_scaling_without_the_backend_service_is_a_startup_error(
    access: KubeAccess, pod: Engine, tmp_path: Path
) -> None:
    settings = environ(access, pod, tmp_path)
    del settings["NOCTAYA_BACKEND_ENDPOINTS"]
    with pytest.raises(ValueError, match="kvCacheUtil needs NOCTAYA_BACKEND_ENDPOINTS"):
        load_config(settings)


async def test_a_lone_gateway_serves_keda_the_kv_cache_use_of_the_pods_it_follows(
    access: KubeAccess, pod: Engine, tmp_path: Path
) -> None:
    """One gateway replica serves KEDA itself: it reads the pods its own watch follows."""
    address, port = pod.url.split("//", 1)[1].rsplit(":", 1)
    settings = {
        name: value
        for name, value in environ(access, pod, tmp_path).items()
        if not name.startswith(("NOCTAYA_DEMAND_", "NOCTAYA_AGGREGATOR_"))
    }
    settings |= {"NOCTAYA_BACKEND_URL": "http://127.0.0.1:9", "NOCTAYA_LISTEN_ADDR": "127.0.0.1:0"}
    server = GatewayServer(load_gateway_config(settings), settings)
    await server.start()
    keda = Keda.insecure(server.scaler.port)
    try:
        assert await keda.metric() == 0.0
        await access.put_slice("a", [(address, READY)], int(port))
        await eventually(lambda: _read(keda, 50.0), within=10.0, what="the pod's 50 %")
        pod.stub.gauges["kv_cache"] = 0.25
        await eventually(lambda: _read(keda, 25.0), within=10.0, what="the pod's 25 %")
        assert await keda.is_active() is False  # activation stays with demand
    finally:
        await keda.close()
        await server.stop()
