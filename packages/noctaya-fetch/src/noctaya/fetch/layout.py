"""Where each source's model lives inside a cache directory, mirroring the serving pods' `/cache`.

OCI artifacts go where the backend's `.Model.Path` points (`oci/sha256-<digest>`). Hub models go
where the hub library the engine runs would look, under the cache env the pods get (`HF_HOME`,
`MODELSCOPE_CACHE`), so a prefilled cache is found without the engine downloading again.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from noctaya.core.cache_planning import CACHE_ENV, CACHE_MOUNT_PATH
from noctaya.core.model_source import ResolvedModel

_CACHE_HOMES = {
    env.name: PurePosixPath(env.value).relative_to(CACHE_MOUNT_PATH) for env in CACHE_ENV
}


def oci_destination(model: ResolvedModel, cache: Path) -> Path:
    return cache / PurePosixPath(model.path).relative_to(CACHE_MOUNT_PATH)


def huggingface_destination(model: ResolvedModel, cache: Path) -> Path:
    """The hub cache's repo folder, `<HF_HOME>/hub/models--<owner>--<name>`."""
    return cache / _CACHE_HOMES["HF_HOME"] / "hub" / ("models--" + model.path.replace("/", "--"))


def modelscope_destination(model: ResolvedModel, cache: Path) -> Path:
    """`<MODELSCOPE_CACHE>/models/<owner>/<name>`, a layout the ModelScope client reuses
    (dots in the name spelled `___`, as it does)."""
    owner, _, name = model.path.partition("/")
    home = cache / _CACHE_HOMES["MODELSCOPE_CACHE"] / "models"
    return home / owner / name.replace(".", "___")
