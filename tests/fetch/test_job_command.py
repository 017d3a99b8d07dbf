"""The prewarm / staging Job's command as the operator plans it, run for real: what it writes
is what the backend's `wait-for-prewarm` init container waits for.

The Job's paths (`/cache`, the mounted registry credentials) are mapped onto a temporary
folder and its `secretKeyRef` env is filled from the Secrets a test gives, as the kubelet
would; the test registry speaks plain HTTP, which a cluster's would not.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from noctaya.core.cache_planning import (
    CACHE_MOUNT_PATH,
    FETCH_PERMANENT_FAILURE,
    CachePlan,
    plan_cache,
    plan_prewarm,
)
from noctaya.core.model_source import resolve_model
from noctaya.core.plan.container import Env

from .conftest import model_files, tree_files
from .fake_hub import Hub
from .registry import RunningRegistry, push_files
from .test_cli import COMMAND

REGISTRY_AUTH = "/var/run/noctaya/registry-auth/config.json"
GATED_TOKEN = "hf_gated_do_not_log"


@dataclass
class Job:
    argv: list[str]
    env: dict[str, str]
    marker: Path | None
    """The local path of the marker the backend waits for, if it waits for one."""

    def start(self) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **self.env},
        )

    def run(self) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, **self.env}
        return subprocess.run(self.argv, capture_output=True, text=True, timeout=120, env=env)


def plan_job(
    uri: str,
    strategy: str,
    *,
    secret: str | None,
    mounts: dict[str, Path],
    service: str = "svc",
    serving_env: tuple[Env, ...] = (),
    secrets: dict[str, dict[str, str]] | None = None,
    extra: tuple[str, ...] = (),
) -> Job:
    """The planned Job with its in-pod paths mapped and its env as the kubelet would set it."""
    model = resolve_model(uri, secret_ref_name=secret)
    cache: CachePlan = plan_cache(
        strategy=strategy,
        size=None,
        storage_class_name=None,
        prewarm=True,
        model=model,
        service_name=service,
        namespace="team-a",
    )
    job = plan_prewarm(cache, model, "ghcr.io/noctaya/noctaya:test", serving_env)
    assert job is not None

    def local(path: str) -> str:
        for pod_path, folder in mounts.items():
            if path == pod_path or path.startswith(pod_path + "/"):
                return str(folder) + path.removeprefix(pod_path)
        return path

    env = {item.name: item.value for item in job.env}
    env |= {item.name: str(item.value) for item in job.runtime_env}
    if job.token_env is not None:
        data = (secrets or {}).get(job.token_env.secret_name, {})
        assert job.token_env.key in data, "the kubelet would not start the container"
        env[job.token_env.name] = data[job.token_env.key]
    argv = [COMMAND, *(local(word) for word in job.command[1:]), *extra]
    marker = cache.readiness_marker
    return Job(argv, env, Path(local(marker)) if marker else None)


def test_the_staging_job_writes_the_marker_the_backend_waits_for(
    registry: RunningRegistry, tmp_path: Path
) -> None:
    source = tmp_path / "weights.bin"
    source.write_bytes(b"w" * 4096)
    digest = push_files(registry, "models/job", "v1", [source])
    cache = tmp_path / "cache"
    mounts = {CACHE_MOUNT_PATH: cache, REGISTRY_AUTH: registry.config_file(tmp_path)}

    job = plan_job(
        f"oci://{registry.host}/models/job@{digest}",
        "NodeLocalPVC",
        secret="registry-creds",
        mounts=mounts,
        extra=("--plain-http",),
    )
    result = job.run()

    assert result.returncode == 0, result.stderr
    assert job.marker is not None
    assert job.marker.is_file()
    assert tree_files(job.marker.parent) == {"weights.bin": b"w" * 4096}


def test_a_shared_cache_prewarm_job_writes_the_cache_wide_marker(hub: Hub, tmp_path: Path) -> None:
    cache = tmp_path / "cache"

    job = plan_job(
        "hf://acme/tiny-model",
        "SharedPVC",
        secret=None,
        mounts={CACHE_MOUNT_PATH: cache},
        serving_env=(Env("HF_ENDPOINT", hub.url),),
    )
    result = job.run()

    assert result.returncode == 0, result.stderr
    assert job.marker == cache / ".noctaya-ready"
    assert job.marker.is_file()
    [snapshot] = (cache / "hf/hub/models--acme--tiny-model/snapshots").iterdir()
    assert tree_files(snapshot) == model_files()


@pytest.mark.parametrize("uri", ["hf://acme/tiny-model", "modelscope://acme/tiny-model"])
def test_two_services_on_one_shared_cache_download_their_model_once(
    hub: Hub, tmp_path: Path, uri: str
) -> None:
    """Two services' claims bound to one volume (one NFS export): their Jobs run at once, one
    downloads, the other waits and finishes on its result; a rerun downloads nothing."""
    mounts = {CACHE_MOUNT_PATH: tmp_path / "volume"}
    mirror = (Env("HF_ENDPOINT", hub.url), Env("MODELSCOPE_ENDPOINT", hub.url))
    jobs = [
        plan_job(uri, "SharedPVC", secret=None, mounts=mounts, service=name, serving_env=mirror)
        for name in ("first", "second")
    ]

    running = [job.start() for job in jobs]
    outputs = [process.communicate(timeout=120) for process in running]
    assert [process.returncode for process in running] == [0, 0], outputs
    assert all(job.marker is not None and job.marker.is_file() for job in jobs)
    downloads = [
        r.path
        for r in hub.requests
        if r.method == "GET" and ("/resolve/" in r.path or "FilePath=" in r.path)
    ]
    assert sorted(downloads) == sorted(set(downloads)), "every file downloaded once"
    assert len(set(downloads)) == len(model_files())
    requests = len(hub.requests)

    again = jobs[1].run()
    assert again.returncode == 0, again.stderr
    assert "already complete" in again.stderr
    assert len(hub.requests) == requests


@pytest.mark.parametrize(
    ("uri", "variable"),
    [
        ("hf://acme/tiny-model", "HF_TOKEN"),
        ("modelscope://acme/tiny-model", "MODELSCOPE_API_TOKEN"),
    ],
)
def test_a_gated_model_is_prewarmed_with_the_token_of_its_secret_ref(
    hub: Hub, tmp_path: Path, uri: str, variable: str
) -> None:
    hub.token, hub.gated = GATED_TOKEN, True
    mirror = (Env("HF_ENDPOINT", hub.url), Env("MODELSCOPE_ENDPOINT", hub.url))
    field = 'spec.model.source.secretRef names a Secret whose key "token" holds it'

    def job(secret: str | None, token: str, folder: str) -> subprocess.CompletedProcess[str]:
        mounts = {CACHE_MOUNT_PATH: tmp_path / folder}
        secrets = {"hub-token": {"token": token}}
        planned = plan_job(
            uri, "NodeLocalPVC", secret=secret, mounts=mounts, serving_env=mirror, secrets=secrets
        )
        return planned.run()

    without = job(None, GATED_TOKEN, "without")
    wrong = job("hub-token", "hf_not_granted", "wrong")
    granted = job("hub-token", GATED_TOKEN, "granted")

    assert without.returncode == FETCH_PERMANENT_FAILURE  # the Job fails at once, no retry
    assert "the hub answered HTTP 401" in without.stderr.splitlines()[-1]
    assert f"set {variable} to a token that grants access (for an LLMService, {field})" in (
        without.stderr
    )
    assert wrong.returncode == FETCH_PERMANENT_FAILURE
    assert "the hub answered HTTP 403" in wrong.stderr.splitlines()[-1]
    assert f"the token in {variable} does not grant access" in wrong.stderr
    assert granted.returncode == 0, granted.stderr
    assert tree_files(Path(granted.stdout.strip())) == model_files()
    for run in (without, wrong, granted):
        assert GATED_TOKEN not in run.stdout + run.stderr
        assert "hf_not_granted" not in run.stdout + run.stderr
