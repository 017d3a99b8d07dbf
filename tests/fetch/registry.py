"""A real OCI registry (Debian's `docker-registry`, the CNCF distribution) on 127.0.0.1, and
artifacts pushed to it with the ORAS SDK: ordinary ones as `oras push` makes them, and
hostile ones assembled layer by layer."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import oras.defaults
import oras.oci
import requests
from oras.provider import Registry as OrasRegistry
from support.ports import free_port

INSTALL = "bash hack/install-test-packages.sh  (apt-get install -y docker-registry apache2-utils)"
REGISTRY_BINARY = "docker-registry"
USER = "puller"


@dataclass
class RunningRegistry:
    host: str
    root: Path
    password: str | None

    def client(self) -> OrasRegistry:
        registry = OrasRegistry(hostname=self.host, insecure=True, auth_backend="basic")
        if self.password is not None:
            registry.auth.set_basic_auth(USER, self.password)
        return registry

    def digest(self, repository: str, tag: str) -> str:
        """The manifest digest the registry computed for `tag`."""
        auth = (USER, self.password) if self.password else None
        response = requests.head(
            f"http://{self.host}/v2/{repository}/manifests/{tag}",
            headers={"Accept": oras.defaults.default_manifest_media_type},
            auth=auth,
            timeout=10,
        )
        response.raise_for_status()
        return response.headers["Docker-Content-Digest"]

    def blob_file(self, digest: str) -> Path:
        """Where the filesystem driver keeps a blob's bytes, to corrupt them in place."""
        hex_digest = digest.removeprefix("sha256:")
        return self.root / "docker/registry/v2/blobs/sha256" / hex_digest[:2] / hex_digest / "data"

    def config_file(
        self, directory: Path, password: str | None = None, *, host: str | None = None
    ) -> Path:
        """A dockerconfigjson granting `USER` with `password` (the right one by default) on
        `host` (this registry by default)."""
        secret = password if password is not None else self.password
        token = _b64(f"{USER}:{secret}")
        path = directory / "config.json"
        path.write_text(json.dumps({"auths": {host or self.host: {"auth": token}}}))
        return path


def registry_binaries_missing() -> str | None:
    missing = [name for name in (REGISTRY_BINARY, "htpasswd") if shutil.which(name) is None]
    return f"{', '.join(missing)} not found; install with: {INSTALL}" if missing else None


@dataclass(frozen=True)
class RegistryTLS:
    """HTTPS for the registry: its certificate and key, and the CA that signed them."""

    certificate: Path
    key: Path
    ca: Path


@contextmanager
def run_registry(
    workdir: Path,
    *,
    password: str | None = None,
    listen: str | None = None,
    tls: RegistryTLS | None = None,
    launcher: tuple[str, ...] = (),
) -> Iterator[RunningRegistry]:
    """`docker-registry serve` on `listen` (a free loopback port by default), with htpasswd
    auth if `password` is set and HTTPS if `tls` is. Its storage is `workdir/storage`, so a
    later run on the same folder serves what an earlier one stored; `launcher` is put before
    its command (`ip netns exec <name>` serves inside a network namespace)."""
    host = listen or f"127.0.0.1:{free_port()}"
    root = workdir / "storage"
    config: dict[str, object] = {
        "version": 0.1,
        "log": {"level": "error", "accesslog": {"disabled": True}},
        "storage": {"filesystem": {"rootdirectory": str(root)}},
        "http": {"addr": host},
    }
    if tls is not None:
        config["http"] = {
            "addr": host,
            "tls": {"certificate": str(tls.certificate), "key": str(tls.key)},
        }
    if password is not None:
        htpasswd = workdir / "htpasswd"
        line = subprocess.run(
            ["htpasswd", "-Bbn", USER, password], check=True, capture_output=True, text=True
        ).stdout.strip()
        htpasswd.write_text(line + "\n")
        config["auth"] = {"htpasswd": {"realm": "test", "path": str(htpasswd)}}
    config_path = workdir / "registry.json"
    config_path.write_text(json.dumps(config))
    log = (workdir / "registry.log").open("wb")
    process = subprocess.Popen(
        [*launcher, REGISTRY_BINARY, "serve", str(config_path)], stdout=log, stderr=log
    )
    try:
        _wait_until_serving(host, process, tls)
        yield RunningRegistry(host, root, password)
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


def push_files(registry: RunningRegistry, repository: str, tag: str, sources: list[Path]) -> str:
    """`oras push` through the SDK: files become titled layers, directories unpackable tars."""
    registry.client().push(
        target=f"{registry.host}/{repository}:{tag}",
        files=[str(path) for path in sources],
        disable_path_validation=True,
        quiet=True,
    )
    return registry.digest(repository, tag)


@dataclass(frozen=True)
class RawLayer:
    content: bytes
    annotations: dict[str, str]
    media_type: str = "application/vnd.oci.image.layer.v1.tar"


def push_layers(
    registry: RunningRegistry, repository: str, tag: str, layers: list[RawLayer], scratch: Path
) -> str:
    """An artifact assembled by hand, with whatever titles and contents a test needs."""
    client = registry.client()
    container = client.get_container(f"{registry.host}/{repository}:{tag}")
    manifest = oras.oci.NewManifest()
    for index, layer in enumerate(layers):
        blob = scratch / f"layer-{index}"
        blob.write_bytes(layer.content)
        descriptor = oras.oci.NewLayer(str(blob), media_type=layer.media_type)
        descriptor["annotations"] = dict(layer.annotations)
        client.upload_blob(str(blob), container, descriptor).raise_for_status()
        manifest["layers"].append(descriptor)
    config = scratch / "config.json"
    config.write_bytes(b"{}")
    descriptor = {
        "mediaType": oras.defaults.unknown_config_media_type,
        "size": 2,
        "digest": "sha256:" + hashlib.sha256(b"{}").hexdigest(),
    }
    client.upload_blob(str(config), container, descriptor).raise_for_status()
    manifest["config"] = descriptor
    client.upload_manifest(manifest, container).raise_for_status()
    return registry.digest(repository, tag)


def _wait_until_serving(
    host: str, process: subprocess.Popen[bytes], tls: RegistryTLS | None
) -> None:
    url = f"https://{host}/v2/" if tls is not None else f"http://{host}/v2/"
    verify: str | bool = str(tls.ca) if tls is not None else True
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"docker-registry exited with {process.returncode}")
        try:
            if requests.get(url, timeout=1, verify=verify).status_code in (200, 401):
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.05)
    raise RuntimeError("docker-registry did not start within 30 s")


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()
