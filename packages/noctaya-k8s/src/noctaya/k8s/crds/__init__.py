"""CustomResourceDefinitions generated from the core API models, never written by hand."""

from __future__ import annotations

from pathlib import Path

from noctaya.core.api import API_GROUP
from noctaya.k8s.crds.definitions import DEFINITIONS, INFERENCERUNTIME, LLMSERVICE
from noctaya.k8s.manifest_yaml import dump_manifest, write_files


def rendered_crds() -> dict[str, str]:
    """File name → YAML text, exactly as `noctaya crds` writes them (sorted keys, stable)."""
    return {
        f"{API_GROUP}_{definition.plural}.yaml": dump_manifest(definition.to_crd())
        for definition in DEFINITIONS
    }


def write_crds(directory: Path) -> list[Path]:
    return write_files(directory, rendered_crds())


__all__ = ["DEFINITIONS", "INFERENCERUNTIME", "LLMSERVICE", "rendered_crds", "write_crds"]
