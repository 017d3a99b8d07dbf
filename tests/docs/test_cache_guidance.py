"""Model caches: the strategy table, the node pinning advice, the `pvc://` example and the OCI
packaging recipe, each checked against what the operator renders or `noctaya-fetch` does."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from fetch.conftest import registry  # noqa: F401  (the session's real OCI registry)
from fetch.registry import RunningRegistry, push_files
from noctaya.core.plugins import VendorRegistry
from noctaya.k8s.offline import render_files
from support.manifests import llmservice

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "caches.md"
A10 = REPO / "examples" / "nvidia" / "a10"
PVC_EXAMPLE = REPO / "docs" / "snippets" / "pvc-model.yaml"
FETCH = str(Path(sys.executable).with_name("noctaya-fetch"))


def rendered(*paths: Path) -> list[dict[str, Any]]:
    outcome = render_files(
        list(paths), VendorRegistry.discover(), gateway_image="gw", gateway_replicas=1
    )
    assert outcome.problems == []
    return outcome.objects


def find(objects: list[dict[str, Any]], kind: str, suffix: str = "") -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind and o["metadata"]["name"].endswith(suffix)]


def with_cache(tmp_path: Path, cache: dict[str, Any]) -> list[dict[str, Any]]:
    service = llmservice("svc", {"runtime": {"name": "vllm-nvidia-a10"}, "cache": cache})
    path = tmp_path / "svc.yaml"
    path.write_text(yaml.safe_dump(service))
    return rendered(A10 / "runtime.yaml", path)


def strategy_rows() -> dict[str, str]:
    """The rows of the "Which strategy" table (a later table on the page has a row per
    strategy too)."""
    section = PAGE.read_text().split("## Which strategy", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)`(?: \(default\))? \| (.+?) \|", section, re.MULTILINE)
    return dict(rows)


def test_the_strategy_table_says_what_each_strategy_renders(tmp_path: Path) -> None:
    rows = strategy_rows()
    assert set(rows) == {"NodeLocalPVC", "SharedPVC", "HostPath", "None"}
    for strategy, mode in (("NodeLocalPVC", "ReadWriteOnce"), ("SharedPVC", "ReadWriteMany")):
        (claim,) = find(with_cache(tmp_path, {"strategy": strategy}), "PersistentVolumeClaim")
        assert claim["spec"]["accessModes"] == [mode]
        assert claim["spec"]["resources"]["requests"]["storage"] == "50Gi"
        assert f"`{mode}` claim `<service>-cache`" in rows[strategy]
    host = with_cache(tmp_path, {"strategy": "HostPath"})
    assert not find(host, "PersistentVolumeClaim")
    (backend,) = find(host, "Deployment", "svc")
    volumes = {v["name"]: v for v in backend["spec"]["template"]["spec"]["volumes"]}
    assert volumes["model-cache"]["hostPath"]["path"] == "/var/lib/noctaya/cache/default-svc"
    assert "`/var/lib/noctaya/cache/<namespace>-<service>`" in rows["HostPath"]
    none = with_cache(tmp_path, {"strategy": "None"})
    assert not find(none, "PersistentVolumeClaim")
    assert rows["None"] == "none"


def test_the_prewarm_job_is_placed_like_the_backends_without_an_accelerator() -> None:
    objects = rendered(A10)
    (job,) = find(objects, "Job", "-prewarm")
    (backend,) = find(objects, "Deployment", "qwen3-8b-a10")
    job_pod, backend_pod = job["spec"]["template"]["spec"], backend["spec"]["template"]["spec"]
    assert job_pod["nodeSelector"] == backend_pod["nodeSelector"]
    assert job_pod["tolerations"] == backend_pod["tolerations"]
    assert all(
        "nvidia.com/gpu" not in json.dumps(c.get("resources", {})) for c in job_pod["containers"]
    )
    text = " ".join(PAGE.read_text().split())
    assert "The Job gets the runtime's `accelerator.nodeSelector` and `tolerations`" in text


def test_the_pvc_example_mounts_the_claim_and_creates_no_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = rendered(A10 / "runtime.yaml", PVC_EXAMPLE)
    assert not find(objects, "PersistentVolumeClaim")
    assert not find(objects, "Job")
    (backend,) = find(objects, "Deployment", "qwen3-8b-pvc")
    pod = backend["spec"]["template"]["spec"]
    (store,) = [v for v in pod["volumes"] if v["name"] == "model-store"]
    assert store["persistentVolumeClaim"] == {"claimName": "models", "readOnly": True}
    assert "/models/qwen3-8b" in pod["containers"][0]["args"]
    assert "`{{ .Model.Path }}` is `/models/qwen3-8b`" in PAGE.read_text()
    # Without `strategy: None`, the default claim the page warns about would be created.
    example = yaml.safe_load(PVC_EXAMPLE.read_text())
    del example["spec"]["cache"]
    default = tmp_path / "default.yaml"
    default.write_text(yaml.safe_dump(example))
    (claim,) = find(rendered(A10 / "runtime.yaml", default), "PersistentVolumeClaim")
    assert claim["spec"]["resources"]["requests"]["storage"] == "50Gi"


def test_a_model_pushed_as_the_oras_recipe_pushes_it_is_fetched_as_the_model_directory(
    registry: RunningRegistry,  # noqa: F811
    tmp_path: Path,
) -> None:
    """`oras push REF *` from inside the model directory: one titled layer per file. The SDK
    pushes the same layout; `noctaya-fetch`, which the staging Job runs, must deliver exactly
    the directory."""
    recipe = re.findall(r"^oras (push|resolve) \S+( \*)?", PAGE.read_text(), re.MULTILINE)
    assert recipe == [("push", " *"), ("resolve", "")]
    model = tmp_path / "Qwen3-8B"
    model.mkdir()
    files = {
        "config.json": b'{"architectures": ["Qwen3ForCausalLM"]}',
        "model.safetensors": bytes(range(256)) * 64,
        "tokenizer.json": b'{"version": "1.0"}',
    }
    for name, content in files.items():
        (model / name).write_bytes(content)
    digest = push_files(registry, "models/qwen3-8b", "v1", sorted(model.iterdir()))
    cache = tmp_path / "cache"
    fetched = subprocess.run(
        [
            FETCH,
            f"oci://{registry.host}/models/qwen3-8b@{digest}",
            "--cache",
            str(cache),
            "--registry-config",
            str(registry.config_file(tmp_path)),
            "--plain-http",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert fetched.returncode == 0, fetched.stderr
    folder = Path(fetched.stdout.strip().splitlines()[-1])
    assert folder == cache / "oci" / f"sha256-{digest.removeprefix('sha256:')}"
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == {
        **files,
        ".noctaya-ready": (folder / ".noctaya-ready").read_bytes(),
    }


def test_the_oci_example_is_a_service_the_operator_plans_with_a_staging_job() -> None:
    objects = rendered(A10 / "runtime.yaml", REPO / "docs" / "snippets" / "oci-model.yaml")
    (job,) = find(objects, "Job", "-prewarm")
    assert find(objects, "PersistentVolumeClaim")
    assert "registry-pull" in json.dumps(job["spec"]["template"]["spec"]["volumes"])


def test_a_changed_backend_rolls_out_with_kubernetes_default_surge() -> None:
    """The node pinning advice: the backend Deployment sets no update strategy of its own, so a
    running replica's replacement starts before it stops."""
    (backend,) = find(rendered(A10), "Deployment", "qwen3-8b-a10")
    assert "strategy" not in backend["spec"]
    text = " ".join(PAGE.read_text().split())
    assert "default rolling update starts the new Pod before it stops the old one" in text


def concepts_prewarm_rows() -> dict[str, str]:
    """Concepts' table of what a backend does while the prewarm Job runs, per strategy."""
    page = (REPO / "docs" / "concepts.md").read_text()
    section = page.split("## Caches and prewarm", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `(\w+)` \| (.+?) \|$", section, re.MULTILINE))


def init_containers(objects: list[dict[str, Any]]) -> list[str]:
    (backend,) = find(objects, "Deployment", "svc")
    pod = backend["spec"]["template"]["spec"]
    return [c["name"] for c in pod.get("initContainers", [])]


def test_concepts_says_per_strategy_whether_a_backend_waits_for_the_prewarm_job(
    tmp_path: Path,
) -> None:
    rows = concepts_prewarm_rows()
    assert set(rows) == {"NodeLocalPVC", "SharedPVC", "HostPath", "None"}
    for strategy, row in rows.items():
        objects = with_cache(tmp_path, {"strategy": strategy, "prewarm": True})
        if strategy == "None":
            assert not find(objects, "Job")
            assert row.startswith("no Job")
            continue
        assert find(objects, "Job", "-prewarm"), strategy
        waits = "wait-for-prewarm" in init_containers(objects)
        assert row.startswith("waits:" if waits else "does not wait:"), strategy
        assert "fetch-model" not in init_containers(objects), strategy
        (backend,) = find(objects, "Deployment", "svc")
        (serving,) = backend["spec"]["template"]["spec"]["containers"]
        (cache,) = [m for m in serving["volumeMounts"] if m["name"] == "model-cache"]
        assert bool(cache.get("readOnly")) == ("mounts the cache read-only" in row), strategy


def test_the_backends_of_an_oci_model_wait_or_fetch_as_concepts_and_caches_say(
    tmp_path: Path,
) -> None:
    oci = {"uri": "oci://registry.example.com/models/qwen3-8b@sha256:" + "0" * 64}
    service = llmservice("svc", {"runtime": {"name": "vllm-nvidia-a10"}, "model": {"source": oci}})
    for strategy, init in (
        ("NodeLocalPVC", "wait-for-prewarm"),
        ("SharedPVC", "wait-for-prewarm"),
        ("HostPath", "fetch-model"),
    ):
        service["spec"]["cache"] = {"strategy": strategy}
        path = tmp_path / "oci.yaml"
        path.write_text(yaml.safe_dump(service))
        assert init_containers(rendered(A10 / "runtime.yaml", path)) == [init], strategy
    concepts = " ".join((REPO / "docs" / "concepts.md").read_text().split())
    assert (
        "on a claim (`NodeLocalPVC`, `SharedPVC`) the backend waits for the model's marker, on "
        "`HostPath` it fetches the model itself in an init container `fetch-model`"
    ) in concepts
    caches = " ".join(PAGE.read_text().split())
    assert "A hub model on `NodeLocalPVC` or `HostPath` waits for nothing" in caches
