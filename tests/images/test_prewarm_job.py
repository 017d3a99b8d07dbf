"""The prewarm / staging Job's container as the operator renders it, run from the main image
under runc: the pod's user, group and fsGroup, no capabilities and no new privileges, the
read-only root filesystem, the rendered env and the mounts as the kubelet prepares them (a claim
the fsGroup may write, the scratch emptyDir, the registry credentials given to the fsGroup).

Each source lands in the cache, so nothing the fetch clients write goes to the root filesystem;
without the scratch volume the hub clients fail on it. The fake hub and the registry listen on
127.0.0.1 (the container shares the host's network), the registry over plain HTTP, which a
cluster's would not: `--plain-http` is the one word added to the rendered command.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from fetch.conftest import model_files, tree_files
from fetch.fake_hub import Hub
from fetch.registry import RunningRegistry, push_files
from noctaya.k8s.render.cache import render_prewarm_job
from support.plans import serving_plan

from .conftest import IMAGES
from .oci import Bundle, Confinement, Mount

pytestmark = pytest.mark.images

MAIN = IMAGES[0]
Obj = dict[str, Any]


def rendered_job(service: Obj, runtime_env: list[Obj]) -> Obj:
    """The Job the operator renders for `service` (spec changes) with a runtime of `runtime_env`."""
    job = render_prewarm_job(serving_plan(service, {"container": {"env": runtime_env}}))
    assert job is not None
    return job


def run_job(
    bundle: Bundle,
    job: Obj,
    scratch: Path,
    *,
    extra: tuple[str, ...] = (),
    sources: dict[str, Path] | None = None,
    skip: str | None = None,
) -> tuple[int, str, Path]:
    """Run the Job's container as its pod would; returns the exit code, stderr and the host
    folder behind `/cache`. `sources` backs volumes by name (the rest are made here, as the
    kubelet makes them); `skip` leaves one volume mount out."""
    pod = job["spec"]["template"]["spec"]
    [container] = pod["containers"]
    identity, context = pod["securityContext"], container["securityContext"]
    fs_group = identity.get("fsGroup")
    assert context["readOnlyRootFilesystem"] is True  # as the bundle's root always is
    assert context["capabilities"] == {"drop": ["ALL"]}
    confinement = Confinement(
        uid=identity["runAsUser"],
        gid=identity["runAsGroup"],
        supplementary_gids=(fs_group,) if fs_group is not None else (),
        no_new_privileges=context["allowPrivilegeEscalation"] is False,
        capabilities=(),
    )
    prepared = {
        volume["name"]: _prepare(volume, scratch, fs_group, (sources or {}).get(volume["name"]))
        for volume in pod["volumes"]
    }
    mounts = tuple(
        Mount(entry["mountPath"], prepared[entry["name"]], entry.get("readOnly", False))
        for entry in container["volumeMounts"]
        if entry["name"] != skip
    )
    env = {entry["name"]: entry["value"] for entry in container["env"]}
    done = bundle.run(
        *container["command"],
        *extra,
        env=env,
        mounts=mounts,
        confinement=confinement,
        host_network=True,
    )
    return done.returncode, done.stderr, prepared["model-cache"]


def _prepare(volume: Obj, scratch: Path, fs_group: int | None, given: Path | None) -> Path:
    """A volume's host side as the kubelet leaves it for the container."""
    folder = given or scratch / volume["name"]
    folder.mkdir(parents=True, exist_ok=True)
    if "emptyDir" in volume:
        folder.chmod(0o777)
    elif "persistentVolumeClaim" in volume and fs_group is not None:
        os.chown(folder, 0, fs_group)  # fsGroup ownership: group-writable, setgid
        folder.chmod(0o2775)
    elif "hostPath" in volume:
        folder.chmod(0o755)  # DirectoryOrCreate: root's, 0755
    elif "secret" in volume:
        for item in volume["secret"]["items"]:
            path = folder / item["path"]
            os.chown(path, 0, fs_group if fs_group is not None else 0)
            path.chmod(volume["secret"]["defaultMode"] | 0o040)  # the group reads it
    return folder


@pytest.mark.parametrize(
    ("source", "endpoint"), [("hf", "HF_ENDPOINT"), ("modelscope", "MODELSCOPE_ENDPOINT")]
)
def test_a_hub_prewarm_job_fills_a_claim_from_a_read_only_image(
    bundles: dict[str, Bundle], hub: Hub, tmp_path: Path, source: str, endpoint: str
) -> None:
    """The runtime's hub endpoint reaches the Job as hub-steering env."""
    job = rendered_job(
        {"model": {"source": {"uri": f"{source}://acme/tiny-model"}}, "cache": {"prewarm": True}},
        [{"name": endpoint, "value": hub.url}],
    )

    code, stderr, cache = run_job(bundles[MAIN], job, tmp_path)

    assert code == 0, stderr
    [snapshot] = [path.parent for path in cache.rglob("config.json")]
    assert tree_files(snapshot) == model_files()
    written = {str(path.relative_to(tmp_path)) for path in (tmp_path / "scratch").rglob("*")}
    assert written <= {
        "scratch/.modelscope",
        "scratch/.modelscope/credentials",
        "scratch/.modelscope/credentials/session",
    }


def test_a_staging_job_fills_a_claim_with_the_artifact_its_mounted_credentials_unlock(
    bundles: dict[str, Bundle], registry: RunningRegistry, tmp_path: Path
) -> None:
    weights = tmp_path / "weights.bin"
    weights.write_bytes(b"w" * 4096)
    digest = push_files(registry, "models/job", "v1", [weights])
    uri = f"oci://{registry.host}/models/job@{digest}"
    job = rendered_job(
        {"model": {"source": {"uri": uri, "secretRef": {"name": "registry-creds"}}}}, []
    )
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    registry.config_file(credentials)
    sources = {"oci-registry-auth": credentials}

    code, stderr, cache = run_job(
        bundles[MAIN], job, tmp_path, extra=("--plain-http",), sources=sources
    )

    assert code == 0, stderr
    [marker] = cache.rglob(".noctaya-ready")
    assert tree_files(marker.parent) == {"weights.bin": b"w" * 4096}


def test_a_host_folder_is_filled_as_root_without_any_capability(
    bundles: dict[str, Bundle], hub: Hub, tmp_path: Path
) -> None:
    job = rendered_job(
        {"cache": {"strategy": "HostPath", "prewarm": True}},
        [{"name": "HF_ENDPOINT", "value": hub.url}],
    )
    job["spec"]["template"]["spec"]["containers"][0]["command"][1] = "hf://acme/tiny-model"

    code, stderr, cache = run_job(bundles[MAIN], job, tmp_path)

    assert code == 0, stderr
    assert {path.stat().st_uid for path in cache.rglob("*")} == {0}


def test_without_the_scratch_volume_modelscope_fails_on_the_read_only_root(
    bundles: dict[str, Bundle], hub: Hub, tmp_path: Path
) -> None:
    """What the scratch volume is for: the modelscope client keeps a session file in its home
    (`~/.modelscope/credentials`), which the Job's env puts on the scratch volume. The same Job
    with `/tmp` left on the image cannot write it."""
    job = rendered_job(
        {"model": {"source": {"uri": "modelscope://acme/tiny-model"}}, "cache": {"prewarm": True}},
        [{"name": "MODELSCOPE_ENDPOINT", "value": hub.url}],
    )

    code, stderr, _ = run_job(bundles[MAIN], job, tmp_path, skip="scratch")

    assert code != 0
    assert "Read-only file system" in stderr, stderr
