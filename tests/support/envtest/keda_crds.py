"""Where KEDA's CRDs live, copied from KEDA's Go module at the pinned version."""

from __future__ import annotations

from pathlib import Path

from .prerequisites import REPO_ROOT, PrerequisiteMissing, cached_folder

FETCH_SCRIPT = REPO_ROOT / "hack" / "fetch-keda-crds.sh"
FETCH_COMMAND = "bash hack/fetch-keda-crds.sh"


class KedaCrdsMissing(PrerequisiteMissing):
    """KEDA's CRDs are not fetched; the message names the fetch command."""


def locate_keda_crds() -> Path:
    folder = cached_folder(FETCH_SCRIPT)
    if not any(folder.glob("*.yaml")):
        raise KedaCrdsMissing(
            f"KEDA's CRDs not fetched ({folder} holds none); run `{FETCH_COMMAND}` first"
        )
    return folder
