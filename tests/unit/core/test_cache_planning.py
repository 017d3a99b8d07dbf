"""Cache planning: strategy → cache volume, read-only rules, readiness marker, prewarm Job."""

import subprocess
import sys
from pathlib import Path

import pytest
from noctaya.core.api.kubernetes import EnvVarSource
from noctaya.core.cache_planning import (
    CACHE_ENV,
    CachePlan,
    HostPathCache,
    PrewarmPlan,
    PvcCache,
    plan_cache,
    plan_prewarm,
    wait_for_marker_program,
)
from noctaya.core.errors import NoctayaError
from noctaya.core.model_source import LiteralEnv, ResolvedModel, SecretEnv, resolve_model
from noctaya.core.plan.container import Env
from noctaya.core.values import Quantity

DIGEST = "0123456789abcdef" * 4
OCI_URI = f"oci://ghcr.io/org/qwen@sha256:{DIGEST}"
OCI_PATH = f"/cache/oci/sha256-{DIGEST}"
HF = resolve_model("hf://Qwen/Qwen3-8B")
MODELSCOPE = resolve_model("modelscope://Qwen/Qwen3-8B")
PVC = resolve_model("pvc://weights/qwen")
OCI = resolve_model(OCI_URI)
SCRATCH_ENV = (
    LiteralEnv("HOME", "/tmp"),
    LiteralEnv("TMPDIR", "/tmp"),
    LiteralEnv("XDG_CACHE_HOME", "/tmp/.cache"),
)
PREWARM_ENV = (*CACHE_ENV, *SCRATCH_ENV, LiteralEnv("TORCH_DEVICE_BACKEND_AUTOLOAD", "0"))
TIMEOUT = 60


def cache(
    strategy: str | None = None,
    *,
    model: ResolvedModel = HF,
    prewarm: bool = False,
    size: str | None = None,
    storage_class: str | None = None,
) -> CachePlan:
    return plan_cache(
        strategy=strategy,
        size=Quantity.parse(size) if size else None,
        storage_class_name=storage_class,
        prewarm=prewarm,
        model=model,
        service_name="qwen",
        namespace="team-a",
    )


# --- cache volume per strategy ------------------------------------------------------------


@pytest.mark.parametrize("strategy", [None, ""])
def test_empty_strategy_means_a_node_local_pvc_of_50gi(strategy: str | None) -> None:
    plan = cache(strategy)
    assert plan.strategy == "NodeLocalPVC"
    assert plan.volume == PvcCache("qwen-cache", "ReadWriteOnce", Quantity.parse("50Gi"), None)
    assert not plan.serving_read_only
    assert plan.readiness_marker is None
    assert plan.serving_env == (
        LiteralEnv("HF_HOME", "/cache/hf"),
        LiteralEnv("MODELSCOPE_CACHE", "/cache/modelscope"),
    )


def test_pvc_size_and_storage_class_are_taken_from_the_service() -> None:
    plan = cache("NodeLocalPVC", size="100Gi", storage_class="local-nvme")
    size = Quantity.parse("100Gi")
    assert plan.volume == PvcCache("qwen-cache", "ReadWriteOnce", size, "local-nvme")


def test_empty_storage_class_means_the_cluster_default() -> None:
    plan = cache("NodeLocalPVC", storage_class="")
    assert isinstance(plan.volume, PvcCache)
    assert plan.volume.storage_class_name is None


def test_none_strategy_has_no_volume_no_env_and_no_marker() -> None:
    plan = cache("None", prewarm=True)
    assert plan.volume is None
    assert plan.serving_env == ()
    assert plan.readiness_marker is None
    assert not plan.serving_read_only


def test_host_path_cache_is_per_namespace_and_service() -> None:
    plan = cache("HostPath", prewarm=True)
    assert plan.volume == HostPathCache("/var/lib/noctaya/cache/team-a-qwen", "DirectoryOrCreate")
    assert plan.serving_env == CACHE_ENV
    assert plan.readiness_marker is None
    assert not plan.serving_read_only


def test_node_local_pvc_never_waits_for_a_marker_even_with_prewarm() -> None:
    plan = cache("NodeLocalPVC", prewarm=True)
    assert plan.readiness_marker is None
    assert not plan.serving_read_only


def test_shared_pvc_without_prewarm_is_writable_by_serving_pods() -> None:
    plan = cache("SharedPVC", size="200Gi")
    assert plan.volume == PvcCache("qwen-cache", "ReadWriteMany", Quantity.parse("200Gi"), None)
    assert not plan.serving_read_only
    assert plan.readiness_marker is None


def test_shared_pvc_with_prewarm_is_read_only_and_waits_for_the_shared_marker() -> None:
    plan = cache("SharedPVC", prewarm=True)
    assert plan.serving_read_only
    assert plan.readiness_marker == "/cache/.noctaya-ready"


@pytest.mark.parametrize("strategy", ["NodeLocalPVC", "HostPath", "SharedPVC"])
def test_oci_sources_are_read_only_and_wait_for_their_artifact_marker(strategy: str) -> None:
    plan = cache(strategy, model=OCI)
    assert plan.serving_read_only
    assert plan.readiness_marker == f"{OCI_PATH}/.noctaya-ready"


def test_pvc_sources_still_get_the_requested_cache() -> None:
    plan = cache("NodeLocalPVC", model=PVC, prewarm=True)
    assert isinstance(plan.volume, PvcCache)
    assert plan.readiness_marker is None


def test_baked_image_is_reserved() -> None:
    with pytest.raises(NoctayaError) as caught:
        cache("BakedImage")
    assert caught.value.reason == "Render"
    assert caught.value.message == 'cache strategy "BakedImage" is not supported yet'


@pytest.mark.parametrize("strategy", ["Tmpfs", "nodelocalpvc", 'odd"name'])
def test_unknown_strategy_is_not_supported(strategy: str) -> None:
    with pytest.raises(NoctayaError) as caught:
        cache(strategy)
    assert caught.value.reason == "Render"
    quoted = '"' + strategy.replace('"', '\\"') + '"'
    assert caught.value.message == f"cache strategy {quoted} is not supported in v0"


def test_unsupported_strategy_is_a_render_error_even_for_oci() -> None:
    with pytest.raises(NoctayaError) as caught:
        cache("BakedImage", model=OCI)
    assert caught.value.reason == "Render"


# --- prewarm / staging Job decision ------------------------------------------------------

IMAGE = "ghcr.io/noctaya/noctaya:1.2.3"


def prewarm(plan: CachePlan, model: ResolvedModel) -> PrewarmPlan | None:
    return plan_prewarm(plan, model, IMAGE)


def test_hub_model_without_prewarm_needs_no_job() -> None:
    assert prewarm(cache("NodeLocalPVC"), HF) is None


def test_pvc_model_never_needs_a_job() -> None:
    assert prewarm(cache("SharedPVC", model=PVC, prewarm=True), PVC) is None


def test_hub_prewarm_without_a_cache_volume_is_skipped() -> None:
    assert prewarm(cache("None", prewarm=True), HF) is None


def test_oci_without_a_persistent_cache_is_a_prewarm_error() -> None:
    with pytest.raises(NoctayaError) as caught:
        prewarm(cache("None", model=OCI), OCI)
    assert caught.value.reason == "Prewarm"
    assert caught.value.message == "oci:// model sources require a persistent cache strategy"


def test_hugging_face_prewarm_fetches_into_the_writable_cache_from_the_noctaya_image() -> None:
    plan = cache("NodeLocalPVC", prewarm=True)
    job = prewarm(plan, HF)
    assert job is not None
    assert job.image == IMAGE
    assert job.volume == plan.volume
    assert job.env == PREWARM_ENV
    assert job.registry_secret_name is None
    assert job.command == ("noctaya-fetch", "hf://Qwen/Qwen3-8B", "--cache", "/cache")


def test_modelscope_prewarm_fetches_the_modelscope_uri_with_its_env() -> None:
    job = prewarm(cache("HostPath", model=MODELSCOPE, prewarm=True), MODELSCOPE)
    assert job is not None
    assert job.volume == HostPathCache("/var/lib/noctaya/cache/team-a-qwen")
    assert job.env == (*PREWARM_ENV, LiteralEnv("VLLM_USE_MODELSCOPE", "true"))
    assert job.command == ("noctaya-fetch", "modelscope://Qwen/Qwen3-8B", "--cache", "/cache")


def test_a_huggingface_scheme_is_fetched_as_hf() -> None:
    model = resolve_model("huggingface://Qwen/Qwen3-8B")
    job = prewarm(cache(model=model, prewarm=True), model)
    assert job is not None
    assert job.command[1] == "hf://Qwen/Qwen3-8B"


def test_shared_pvc_prewarm_has_the_fetcher_write_the_cache_wide_marker_last() -> None:
    job = prewarm(cache("SharedPVC", prewarm=True), HF)
    assert job is not None
    assert job.command == (
        "noctaya-fetch",
        "hf://Qwen/Qwen3-8B",
        "--cache",
        "/cache",
        "--ready-marker",
        "/cache/.noctaya-ready",
    )


@pytest.mark.parametrize("strategy", ["NodeLocalPVC", "HostPath", "SharedPVC"])
def test_oci_always_gets_a_staging_job_even_without_prewarm(strategy: str) -> None:
    """The fetcher writes the artifact's own marker, so no other marker is asked for."""
    plan = cache(strategy, model=OCI)
    job = prewarm(plan, OCI)
    assert job is not None
    assert job.volume == plan.volume
    assert job.env == PREWARM_ENV
    assert job.registry_secret_name is None
    assert job.command == ("noctaya-fetch", OCI_URI, "--cache", "/cache")


def test_oci_registry_credentials_come_from_a_mounted_file() -> None:
    model = resolve_model(OCI_URI, secret_ref_name="registry-creds")
    job = prewarm(cache(model=model), model)
    assert job is not None
    assert job.registry_secret_name == "registry-creds"
    assert job.command[-2:] == ("--registry-config", "/var/run/noctaya/registry-auth/config.json")
    assert "registry-creds" not in job.command


def test_a_plain_http_registry_is_reached_without_tls_and_only_for_oci() -> None:
    model = resolve_model(OCI_URI)
    assert model.oci_registry == "ghcr.io"
    job = plan_prewarm(cache(model=model), model, IMAGE, plain_http=True)
    assert job is not None
    assert job.command == ("noctaya-fetch", OCI_URI, "--cache", "/cache", "--plain-http")
    hub = resolve_model("hf://Qwen/Qwen3-8B")
    hub_job = plan_prewarm(cache("SharedPVC", prewarm=True, model=hub), hub, IMAGE, plain_http=True)
    assert hub_job is not None
    assert "--plain-http" not in hub_job.command


def test_a_hub_token_reaches_the_job_from_its_secret_never_in_the_command() -> None:
    model = resolve_model("hf://Org/Gated", secret_ref_name="hub-token")
    job = prewarm(cache(model=model, prewarm=True), model)
    assert job is not None
    assert job.token_env == SecretEnv("HF_TOKEN", "hub-token", "token")
    assert job.registry_secret_name is None
    assert job.command == ("noctaya-fetch", "hf://Org/Gated", "--cache", "/cache")


SERVING_ENV = (
    Env("HF_ENDPOINT", "https://mirror.example"),
    Env("HF_HUB_DISABLE_XET", "1"),
    Env("MODELSCOPE_DOMAIN", "ms.example"),
    Env("https_proxy", "http://proxy:3128"),
    Env(
        "HTTP_PROXY",
        source=EnvVarSource.model_validate({"configMapKeyRef": {"name": "p", "key": "http"}}),
    ),
    Env("NO_PROXY", ".svc"),
    Env("HF_TOKEN_PATH", "/x"),
    Env("VLLM_USE_MODELSCOPE", "true"),
    Env("MODELSCOPE_CACHE", "/cache/modelscope"),
    Env(
        "MODELSCOPE_API_TOKEN",
        source=EnvVarSource.model_validate({"secretKeyRef": {"name": "a", "key": "b"}}),
    ),
    Env("HF_HOME", "/cache/hf"),
    Env("ALL_PROXY_HOST", "x"),
)


STEERING = ["HF_ENDPOINT", "HF_HUB_DISABLE_XET", "MODELSCOPE_DOMAIN", "https_proxy", "HTTP_PROXY"]


@pytest.mark.parametrize(
    ("uri", "copied"),
    [
        ("modelscope://Qwen/Qwen3-8B", [*STEERING, "NO_PROXY"]),
        (OCI_URI, [*STEERING, "NO_PROXY", "MODELSCOPE_API_TOKEN"]),
    ],
    ids=["modelscope-with-its-own-token", "oci"],
)
def test_the_serving_containers_hub_steering_env_reaches_the_job(
    uri: str, copied: list[str]
) -> None:
    """Mirrors and proxies apply to every fetch; what the Job sets itself (cache homes, model
    env, the service's own token) is not copied."""
    model = resolve_model(uri, secret_ref_name="creds")
    job = plan_prewarm(cache(model=model, prewarm=True), model, IMAGE, SERVING_ENV)
    assert job is not None
    assert [entry.name for entry in job.runtime_env] == copied


# --- the wait-for-prewarm init container ---------------------------------------------------


def test_wait_program_is_the_two_line_marker_loop() -> None:
    assert wait_for_marker_program("/cache/.noctaya-ready") == (
        'import os,time\nwhile not os.path.isfile("/cache/.noctaya-ready"): time.sleep(2)'
    )


def test_wait_program_blocks_until_the_marker_is_a_file(tmp_path: Path) -> None:
    marker = tmp_path / "ready"
    marker.mkdir()  # a directory is not the marker
    waiter = subprocess.Popen([sys.executable, "-c", wait_for_marker_program(str(marker))])
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            waiter.wait(timeout=0.5)
        marker.rmdir()
        marker.touch()
        assert waiter.wait(timeout=TIMEOUT) == 0
    finally:
        waiter.kill()
        waiter.wait()
