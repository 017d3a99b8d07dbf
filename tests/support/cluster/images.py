"""OCI image archives made from local files, pushed to the box's registry (registry.py).

One uncompressed layer per image; the archive's name is its content, so an unchanged image is
written once and reused.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_LAYER = "application/vnd.oci.image.layer.v1.tar"
_CONFIG = "application/vnd.oci.image.config.v1+json"
_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
BUSYBOX_APPLETS = (
    "sh", "cat", "echo", "env", "grep", "ls", "nc", "nslookup", "sleep", "timeout", "true", "wget",
)  # fmt: skip


@dataclass(frozen=True)
class Image:
    """`files` maps a path in the image to a host file; `links` a path to its symlink target."""

    name: str
    files: Mapping[str, Path]
    entrypoint: tuple[str, ...]
    user: str = "0:0"
    links: Mapping[str, str] = field(default_factory=dict)

    def write_archive(self, folder: Path) -> Path:
        layer = self._layer()
        config = _json(
            {
                "architecture": "amd64",
                "os": "linux",
                "config": {"Entrypoint": list(self.entrypoint), "User": self.user},
                "rootfs": {"type": "layers", "diff_ids": [_digest(layer)]},
            }
        )
        manifest = _json(
            {
                "schemaVersion": 2,
                "mediaType": _MANIFEST,
                "config": _descriptor(_CONFIG, config),
                "layers": [_descriptor(_LAYER, layer)],
            }
        )
        index = _json(
            {
                "schemaVersion": 2,
                "manifests": [
                    {
                        **_descriptor(_MANIFEST, manifest),
                        "platform": {"architecture": "amd64", "os": "linux"},
                        "annotations": {
                            "io.containerd.image.name": self.name,
                            "org.opencontainers.image.ref.name": self.name,
                        },
                    }
                ],
            }
        )
        archive = folder / f"{_digest(index).removeprefix('sha256:')[:16]}.oci.tar"
        if archive.exists():
            return archive
        partial = archive.with_suffix(".partial")
        with tarfile.open(partial, "w") as tar:
            _add(tar, "oci-layout", _json({"imageLayoutVersion": "1.0.0"}))
            _add(tar, "index.json", index)
            for blob in (layer, config, manifest):
                _add(tar, f"blobs/sha256/{_digest(blob).removeprefix('sha256:')}", blob)
        partial.rename(archive)
        return archive

    def _layer(self) -> bytes:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
            folders = {str(Path(p).parent) for p in [*self.files, *self.links]} - {"/", "."}
            for folder in sorted(folders):
                info = tarfile.TarInfo(folder.lstrip("/"))
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            for target, source in sorted(self.files.items()):
                info = tarfile.TarInfo(target.lstrip("/"))
                info.size, info.mode = source.stat().st_size, 0o755
                with source.open("rb") as data:
                    tar.addfile(info, data)
            for path, link in sorted(self.links.items()):
                info = tarfile.TarInfo(path.lstrip("/"))
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, link, 0o777
                tar.addfile(info)
        return buffer.getvalue()


def busybox_links() -> dict[str, str]:
    return {f"/bin/{applet}": "busybox" for applet in BUSYBOX_APPLETS}


def _json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def _digest(blob: bytes) -> str:
    return f"sha256:{hashlib.sha256(blob).hexdigest()}"


def _descriptor(media_type: str, blob: bytes) -> dict[str, Any]:
    return {"mediaType": media_type, "digest": _digest(blob), "size": len(blob)}


def _add(tar: tarfile.TarFile, name: str, blob: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(blob), 0o644
    tar.addfile(info, io.BytesIO(blob))
