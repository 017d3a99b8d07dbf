"""The prewarm / staging Job's command as the operator plans it, run for real: what it writes
is what the backend's `wait-for-prewarm` init container waits for.

The Job's paths (`/cache`, the mounted registry credentials) are mapped onto a temporary
folder; the test registry speaks plain HTTP, which a cluster's would not.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from noctaya.core.cache_planning import CACHE_MOUNT_PATH, plan_cache, plan_prewarm
from noctaya.core.model_source import resolve_model

from .conftest import model_files, tree_files
from .fake_hub import Hub
from .registry import RunningRegistry, push_files
from .test_cli import COMMAND

REGISTRY_AUTH = "/var/run/noctaya/registry-auth/config.json"


def run_job(
    uri: str,
    strategy: str,
    *,
    secret: str | None,
    mounts: dict[str, Path],
    env: dict[str, str] | None = None,
    extra: tuple[str, ...] = (),
) -> Path:
    """Run the planned Job command with its in-pod paths mapped; return the in-pod marker's
    local path, after checking the Job succeeded."""
    model = resolve_model(uri, secret_ref_name=secret)
    cache = plan_cache(
        strategy=strategy,
        size=None,
        storage_class_name=None,
        prewarm=True,
        model=model,
        service_name="svc",
        namespace="team-a",
    )
    job = plan_prewarm(cache, model, "ghcr.io/noctaya/noctaya:test")
    assert job is not None
    assert cache.readiness_marker is not None

    def local(path: str) -> str:
        for pod_path, folder in mounts.items():
            if path == pod_path or path.startswith(pod_path + "/"):
                return str(folder) + path.removeprefix(pod_path)
        return path

    argv = [COMMAND, *(local(word) for word in job.command[1:]), *extra]
    result = subprocess.run(
        argv, capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})}
    )
    assert result.returncode == 0, result.stderr
    return Path(local(cache.readiness_marker))


def test_the_staging_job_writes_the_marker_the_backend_waits_for(
    registry: RunningRegistry, tmp_path: Path
) -> None:
    source = tmp_path / "weights.bin"
    source.write_bytes(b"w" * 4096)
    digest = push_files(registry, "models/job", "v1", [source])
    cache = tmp_path / "cache"
    mounts = {CACHE_MOUNT_PATH: cache, REGISTRY_AUTH: registry.config_file(tmp_path)}

    marker = run_job(
        f"oci://{registry.host}/models/job@{digest}",
        "NodeLocalPVC",
        secret="registry-creds",
        mounts=mounts,
        extra=("--plain-http",),
    )

    assert marker.is_file()
    assert tree_files(marker.parent) == {"weights.bin": b"w" * 4096}


def test_a_shared_cache_prewarm_job_writes_the_cache_wide_marker(hub: Hub, tmp_path: Path) -> None:
    cache = tmp_path / "cache"

    marker = run_job(
        "hf://acme/tiny-model",
        "SharedPVC",
        secret=None,
        mounts={CACHE_MOUNT_PATH: cache},
        env={"HF_ENDPOINT": hub.url},
    )

    assert marker == cache / ".noctaya-ready"
    assert marker.is_file()
    [snapshot] = (cache / "hf/hub/models--acme--tiny-model/snapshots").iterdir()
    assert tree_files(snapshot) == model_files()
