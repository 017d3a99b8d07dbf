"""The box's image registry: docker-registry on the control plane's node, which every node's
containerd pulls images from, as nodes of a real cluster pull from a registry.

Images keep the names they are published under (`ghcr.io/noctaya/noctaya:0.1.0`,
`noctaya.local/box:latest`): each node's containerd is told (a `hosts.toml` per registry name)
that the box's registry mirrors those registries, so pod specs, the chart and the examples name
images exactly as users see them. The registry speaks plain HTTP on the box's own network.
"""

from __future__ import annotations

import json
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import yaml
from oras.provider import Registry

from . import layout

PORT = 5001
ADDRESS = f"{layout.NODE_IP}:{PORT}"
MIRRORED = ("noctaya.local", "ghcr.io")
"""The registries whose images the box's registry serves in their place."""


def registry_component(folders: layout.Folders) -> dict[str, Any]:
    """The registry as a component of the control plane node's supervisor, storing under the
    box's run folder (gone with `down`)."""
    config = folders.run / "registry.yaml"
    settings = {
        "version": 0.1,
        "log": {"level": "error", "accesslog": {"disabled": True}},
        "storage": {"filesystem": {"rootdirectory": str(folders.run / "registry")}},
        "http": {"addr": ADDRESS},
    }
    config.write_text(yaml.safe_dump(settings))
    return {
        "name": "registry",
        "argv": ["docker-registry", "serve", str(config)],
        "ready": f"tcp:{ADDRESS}",
    }


def write_mirrors(folder: Path) -> Path:
    """containerd's registry host folder (its `config_path`): each mirrored registry answered by
    the box's registry, over plain HTTP."""
    for name in MIRRORED:
        hosts = folder / name / "hosts.toml"
        hosts.parent.mkdir(parents=True, exist_ok=True)
        hosts.write_text(
            f'server = "http://{ADDRESS}"\n'
            f'[host."http://{ADDRESS}"]\n'
            '  capabilities = ["pull", "resolve"]\n'
        )
    return folder


def push_archive(archive: Path, tag: str | None = None) -> None:
    """Pushes every image of an OCI archive to the box's registry under the repository and tag
    of its name (`ghcr.io/noctaya/noctaya:0.1.0` → `noctaya/noctaya:0.1.0`), or under `tag` in
    that repository (an older build of the same version beside the current one)."""
    client = Registry(hostname=ADDRESS, insecure=True)
    with tarfile.open(archive) as tar, tempfile.TemporaryDirectory() as scratch:
        index = json.loads(_member(tar, "index.json"))
        for entry in index["manifests"]:
            name = entry["annotations"]["io.containerd.image.name"]
            _, _, reference = name.partition("/")
            if tag is not None:
                reference = f"{reference.rpartition(':')[0]}:{tag}"
            container = client.get_container(f"{ADDRESS}/{reference}")
            manifest = json.loads(_member(tar, _blob_path(entry["digest"])))
            for descriptor in [manifest["config"], *manifest["layers"]]:
                blob = Path(scratch) / descriptor["digest"].replace(":", "-")
                blob.write_bytes(_member(tar, _blob_path(descriptor["digest"])))
                client.upload_blob(str(blob), container, descriptor).raise_for_status()
            client.upload_manifest(manifest, container).raise_for_status()


def _blob_path(digest: str) -> str:
    algorithm, _, hexdigest = digest.partition(":")
    return f"blobs/{algorithm}/{hexdigest}"


def _member(tar: tarfile.TarFile, name: str) -> bytes:
    found = tar.extractfile(name)
    if found is None:
        raise ValueError(f"{name} is not a file in the archive")
    return found.read()
