"""Images derived from the archives images/build.sh writes, for what a test needs and the
release does not ship: another user in the config (an engine that runs as root), or one more
layer with files and the env that points at them (a CA bundle the fetch clients trust). Written
as OCI archives under a name of their own, for the box's registry; the source is untouched."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_LAYER = "application/vnd.oci.image.layer.v1.tar"


def derive(
    source: Path,
    folder: Path,
    name: str,
    *,
    user: str | None = None,
    files: Mapping[str, bytes] | None = None,
    env: Mapping[str, str] | None = None,
) -> Path:
    """An archive of `source`'s image as `name` (`registry/repository:tag`), its config's user
    replaced by `user`, `files` (path → content, mode 0644) added as one last layer and `env`
    added to its config."""
    work = folder / "layout"
    with tarfile.open(source) as tar:
        tar.extractall(work, filter="data")
    blobs = work / "blobs" / "sha256"
    index = json.loads((work / "index.json").read_text())
    (descriptor,) = index["manifests"]
    manifest = _read(blobs, descriptor)
    config = _read(blobs, manifest["config"])
    if files:
        layer = _layer(files)
        manifest["layers"].append(_write(blobs, _LAYER, layer))
        config["rootfs"]["diff_ids"].append(manifest["layers"][-1]["digest"])
        config.setdefault("history", []).append({"created_by": f"tests/e2e: {', '.join(files)}"})
    if user is not None:
        config["config"]["User"] = user
    if env:
        config["config"]["Env"] = [*config["config"].get("Env", []), *_pairs(env)]
    manifest["config"] = _write(blobs, manifest["config"]["mediaType"], _json(config))
    derived = _write(blobs, descriptor["mediaType"], _json(manifest))
    derived["annotations"] = {
        "io.containerd.image.name": name,
        "org.opencontainers.image.ref.name": name.rpartition(":")[2],
    }
    index["manifests"] = [derived]
    (work / "index.json").write_text(json.dumps(index))
    archive = folder / f"{name.rpartition('/')[2].replace(':', '-')}.oci.tar"
    with tarfile.open(archive, "w") as tar:
        for entry in ("oci-layout", "index.json", "blobs"):
            tar.add(work / entry, arcname=entry)
    return archive


def _read(blobs: Path, descriptor: Mapping[str, Any]) -> Any:
    return json.loads((blobs / str(descriptor["digest"]).removeprefix("sha256:")).read_bytes())


def _write(blobs: Path, media_type: str, data: bytes) -> dict[str, Any]:
    digest = hashlib.sha256(data).hexdigest()
    (blobs / digest).write_bytes(data)
    return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _pairs(env: Mapping[str, str]) -> list[str]:
    return [f"{key}={value}" for key, value in env.items()]


def _layer(files: Mapping[str, bytes]) -> bytes:
    """An uncompressed layer holding `files` and the folders above them."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        folders = sorted({str(parent) for path in files for parent in Path(path).parents})
        for folder in folders:
            if folder in ("/", "."):
                continue
            info = tarfile.TarInfo(folder.lstrip("/"))
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for path, content in sorted(files.items()):
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode = len(content), 0o644
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()
