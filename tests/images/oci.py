"""Reading the OCI archives images/build.sh writes, and running commands from them with runc.

An archive is checked the way a runtime would trust it: every descriptor's digest and size
against its blob. Commands run through `umoci unpack`'s runtime bundle, so they get the user,
environment and working directory the image config declares, as under containerd.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tarfile
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TIMEOUT = 120


@dataclass(frozen=True)
class Layout:
    """An OCI image layout holding one image, as images/build.sh archives it."""

    root: Path

    def blob(self, descriptor: dict[str, Any]) -> bytes:
        algorithm, digest = str(descriptor["digest"]).split(":", 1)
        data: bytes = (self.root / "blobs" / algorithm / digest).read_bytes()
        assert len(data) == descriptor["size"], f"{descriptor['digest']}: size differs"
        assert hashlib.new(algorithm, data).hexdigest() == digest, f"{digest}: digest differs"
        return data

    def json_blob(self, descriptor: dict[str, Any]) -> Any:
        return json.loads(self.blob(descriptor))

    @property
    def index(self) -> Any:
        return json.loads((self.root / "index.json").read_text())

    @property
    def descriptor(self) -> dict[str, Any]:
        (descriptor,) = self.index["manifests"]
        return dict(descriptor)

    @property
    def manifest(self) -> Any:
        return self.json_blob(self.descriptor)

    @property
    def config(self) -> Any:
        return self.json_blob(self.manifest["config"])


def extract(archive: Path, into: Path) -> Layout:
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return Layout(into)


@dataclass(frozen=True)
class Mount:
    """A host folder or file bound into a container at `destination`."""

    destination: str
    source: Path
    read_only: bool = False


@dataclass(frozen=True)
class Confinement:
    """What a pod's security context makes of a container: its user, groups and capabilities."""

    uid: int
    gid: int
    supplementary_gids: tuple[int, ...] = ()
    no_new_privileges: bool = False
    capabilities: tuple[str, ...] | None = None
    """None keeps the runtime's default set."""


@dataclass(frozen=True)
class Bundle:
    """A runtime bundle unpacked from an image: its root filesystem and runc config."""

    root: Path

    @property
    def rootfs(self) -> Path:
        return self.root / "rootfs"

    def _container(
        self,
        args: list[str] | None,
        env: Mapping[str, str],
        host_network: bool,
        mounts: tuple[Mount, ...] = (),
        confinement: Confinement | None = None,
    ) -> tuple[str, list[str]]:
        """A container's name and runc command line; args None keeps the image entrypoint."""
        config = json.loads((self.root / "config.json").read_text())
        process = config["process"]
        process["terminal"] = False
        if args is not None:
            process["args"] = args
        process["env"] += [f"{name}={value}" for name, value in env.items()]
        config["root"] = {"path": str(self.rootfs), "readonly": True}
        for mount in mounts:
            options = ["rbind", "ro" if mount.read_only else "rw"]
            config["mounts"].append(
                {
                    "destination": mount.destination,
                    "type": "bind",
                    "source": str(mount.source),
                    "options": options,
                }
            )
        if confinement is not None:
            process["user"] = {
                "uid": confinement.uid,
                "gid": confinement.gid,
                "additionalGids": list(confinement.supplementary_gids),
            }
            process["noNewPrivileges"] = confinement.no_new_privileges
            if confinement.capabilities is not None:
                sets = ("bounding", "effective", "permitted", "inheritable", "ambient")
                process["capabilities"] = {name: list(confinement.capabilities) for name in sets}
        if host_network:
            namespaces = config["linux"]["namespaces"]
            config["linux"]["namespaces"] = [ns for ns in namespaces if ns["type"] != "network"]
        name = f"noctaya-images-{uuid.uuid4().hex[:12]}"
        bundle = self.root.parent / name
        bundle.mkdir()
        (bundle / "config.json").write_text(json.dumps(config))
        return name, ["runc", "run", "--bundle", str(bundle), name]

    def run(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        mounts: tuple[Mount, ...] = (),
        confinement: Confinement | None = None,
        host_network: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        """Run args in a fresh container of the image: a read-only root and the image's user,
        unless `confinement` says who runs them."""
        name, command = self._container(list(args), env or {}, host_network, mounts, confinement)
        try:
            return subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
                check=False,
            )
        finally:
            _delete(name)

    @contextmanager
    def serving(
        self, env: Mapping[str, str], mounts: tuple[Mount, ...] = ()
    ) -> Iterator[subprocess.Popen[bytes]]:
        """The image's entrypoint in a container on the host's network, killed on exit."""
        name, command = self._container(None, env, host_network=True, mounts=mounts)
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        try:
            yield process
        finally:
            subprocess.run(["runc", "kill", name, "KILL"], capture_output=True, check=False)
            process.communicate(timeout=TIMEOUT)
            _delete(name)


def _delete(name: str) -> None:
    subprocess.run(
        ["runc", "delete", "--force", name], capture_output=True, check=False, timeout=TIMEOUT
    )


def unpack(layout: Layout, tag: str, into: Path) -> Bundle:
    subprocess.run(
        ["umoci", "unpack", "--image", f"{layout.root}:{tag}", str(into)],
        check=True,
        capture_output=True,
        timeout=TIMEOUT,
    )
    return Bundle(into)
