"""Cache planning: strategy → cache volume, read-only rules, readiness marker, prewarm Job."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from noctaya.core.cache_planning import (
    CACHE_ENV,
    CachePlan,
    HostPathCache,
    PvcCache,
    hub_download_program,
    oci_promotion_program,
    plan_cache,
    plan_prewarm,
    wait_for_marker_program,
)
from noctaya.core.errors import NoctayaError
from noctaya.core.model_source import LiteralEnv, ResolvedModel, resolve_model
from noctaya.core.values import Quantity

DIGEST = "0123456789abcdef" * 4
OCI_URI = f"oci://ghcr.io/org/qwen@sha256:{DIGEST}"
OCI_PATH = f"/cache/oci/sha256-{DIGEST}"
HF = resolve_model("hf://Qwen/Qwen3-8B")
MODELSCOPE = resolve_model("modelscope://Qwen/Qwen3-8B")
PVC = resolve_model("pvc://weights/qwen")
OCI = resolve_model(OCI_URI)
PREWARM_ENV = (*CACHE_ENV, LiteralEnv("TORCH_DEVICE_BACKEND_AUTOLOAD", "0"))
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


def test_hub_model_without_prewarm_needs_no_job() -> None:
    assert plan_prewarm(cache("NodeLocalPVC"), HF) is None


def test_pvc_model_never_needs_a_job() -> None:
    assert plan_prewarm(cache("SharedPVC", model=PVC, prewarm=True), PVC) is None


def test_hub_prewarm_without_a_cache_volume_is_skipped() -> None:
    assert plan_prewarm(cache("None", prewarm=True), HF) is None


def test_oci_without_a_persistent_cache_is_a_prewarm_error() -> None:
    with pytest.raises(NoctayaError) as caught:
        plan_prewarm(cache("None", model=OCI), OCI)
    assert caught.value.reason == "Prewarm"
    assert caught.value.message == "oci:// model sources require a persistent cache strategy"


def test_hugging_face_prewarm_downloads_into_the_writable_cache() -> None:
    plan = cache("NodeLocalPVC", prewarm=True)
    job = plan_prewarm(plan, HF)
    assert job is not None
    assert job.volume == plan.volume
    assert job.env == PREWARM_ENV
    assert job.staging is None
    assert job.command == (
        "python3",
        "-c",
        'from huggingface_hub import snapshot_download; snapshot_download("Qwen/Qwen3-8B")',
    )


def test_modelscope_prewarm_uses_modelscope_and_its_env() -> None:
    job = plan_prewarm(cache("HostPath", model=MODELSCOPE, prewarm=True), MODELSCOPE)
    assert job is not None
    assert job.volume == HostPathCache("/var/lib/noctaya/cache/team-a-qwen")
    assert job.env == (*PREWARM_ENV, LiteralEnv("VLLM_USE_MODELSCOPE", "true"))
    assert job.command[2] == (
        'from modelscope import snapshot_download; snapshot_download("Qwen/Qwen3-8B")'
    )


def test_shared_pvc_prewarm_marks_the_cache_ready_when_done() -> None:
    job = plan_prewarm(cache("SharedPVC", prewarm=True), HF)
    assert job is not None
    assert job.command[2] == (
        'from huggingface_hub import snapshot_download; snapshot_download("Qwen/Qwen3-8B")'
        '; from pathlib import Path; Path("/cache/.noctaya-ready").touch()'
    )


def test_hub_program_quotes_the_repo_id_as_a_safe_literal() -> None:
    odd = ResolvedModel(kind=HF.kind, path='org/x"); import os; ("')
    program = hub_download_program(odd, touch_shared_marker=False)
    call = ast.parse(program).body[1]
    assert isinstance(call, ast.Expr)
    assert isinstance(call.value, ast.Call)
    assert ast.literal_eval(call.value.args[0]) == odd.path


@pytest.mark.parametrize("strategy", ["NodeLocalPVC", "HostPath", "SharedPVC"])
def test_oci_always_gets_a_staging_job_even_without_prewarm(strategy: str) -> None:
    plan = cache(strategy, model=OCI)
    job = plan_prewarm(plan, OCI)
    assert job is not None
    assert job.volume == plan.volume
    assert job.env == PREWARM_ENV
    assert job.staging is not None
    assert job.staging.reference == f"ghcr.io/org/qwen@sha256:{DIGEST}"
    assert job.staging.pull_args == (
        "pull",
        f"ghcr.io/org/qwen@sha256:{DIGEST}",
        "--output",
        "/staging/model",
        "--no-tty",
    )
    assert job.command == ("python3", "-c", oci_promotion_program(OCI_PATH))


def test_oci_registry_credentials_come_from_a_mounted_file() -> None:
    model = resolve_model(OCI_URI, secret_ref_name="registry-creds")
    job = plan_prewarm(cache(model=model), model)
    assert job is not None
    assert job.staging is not None
    assert job.staging.secret_name == "registry-creds"
    assert job.staging.pull_args[-2:] == (
        "--registry-config",
        "/var/run/noctaya/registry-auth/config.json",
    )
    assert "registry-creds" not in job.staging.pull_args


# --- the wait-for-prewarm init container ---------------------------------------------------


def test_wait_program_is_the_two_line_marker_loop() -> None:
    assert wait_for_marker_program("/cache/.noctaya-ready") == (
        "import os,time\n"
        'while not os.path.isfile("/cache/.noctaya-ready"): time.sleep(2)'
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


# --- the OCI promotion program, run for real ------------------------------------------------


def promote(staging: Path, destination: Path) -> subprocess.CompletedProcess[str]:
    program = oci_promotion_program(str(destination), staging=str(staging))
    return subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=TIMEOUT
    )


@pytest.fixture
def staging(tmp_path: Path) -> Path:
    root = tmp_path / "staging"
    (root / "tokenizer").mkdir(parents=True)
    (root / "config.json").write_text('{"model_type": "qwen3"}')
    (root / "tokenizer" / "vocab.json").write_text("{}")
    return root


@pytest.fixture
def destination(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "oci" / f"sha256-{DIGEST}"


def test_promotion_program_uses_atomic_rename_and_rejects_links() -> None:
    program = oci_promotion_program(OCI_PATH)
    assert "os.replace" in program
    assert "symbolic links" in program
    assert '"/staging/model"' in program
    assert f'"{OCI_PATH}"' in program


def test_promotion_copies_the_artifact_and_writes_the_marker(
    staging: Path, destination: Path
) -> None:
    result = promote(staging, destination)
    assert result.returncode == 0, result.stderr
    assert (destination / "config.json").read_text() == '{"model_type": "qwen3"}'
    assert (destination / "tokenizer" / "vocab.json").read_text() == "{}"
    assert (destination / ".noctaya-ready").is_file()
    assert not Path(f"{destination}.partial").exists()
    assert (staging / "config.json").exists()  # staging is read, never moved


def test_promotion_replaces_a_stale_partial_and_an_unmarked_destination(
    staging: Path, destination: Path
) -> None:
    partial = Path(f"{destination}.partial")
    partial.mkdir(parents=True)
    (partial / "junk").write_text("half-written")
    destination.mkdir()
    (destination / "old-weights").write_text("from an interrupted run")
    result = promote(staging, destination)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in destination.iterdir()) == [
        ".noctaya-ready",
        "config.json",
        "tokenizer",
    ]
    assert not partial.exists()


@pytest.mark.parametrize("link", ["file", "directory"])
def test_promotion_refuses_symbolic_links_and_writes_no_marker(
    staging: Path, destination: Path, tmp_path: Path, link: str
) -> None:
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "token").touch()
    target = outside if link == "directory" else outside / "token"
    (staging / "tokenizer" / "escape").symlink_to(target)
    result = promote(staging, destination)
    assert result.returncode != 0
    assert "OCI model artifacts must not contain symbolic links" in result.stderr
    assert not destination.exists()
    assert not Path(f"{destination}.partial").exists()


def test_promotion_is_a_no_op_once_the_marker_exists(staging: Path, destination: Path) -> None:
    destination.mkdir(parents=True)
    (destination / "config.json").write_text("already promoted")
    (destination / ".noctaya-ready").touch()
    (staging / "config.json").write_text("a different pull")
    result = promote(staging, destination)
    assert result.returncode == 0, result.stderr
    assert (destination / "config.json").read_text() == "already promoted"
    assert not (destination / "tokenizer").exists()
