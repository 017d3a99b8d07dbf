"""CustomResourceDefinitions generated from the core API models, never written by hand."""

from __future__ import annotations

from pathlib import Path

import yaml
from noctaya.core.api import API_GROUP
from noctaya.k8s.crds.definitions import DEFINITIONS, INFERENCERUNTIME, LLMSERVICE


def rendered_crds() -> dict[str, str]:
    """File name → YAML text, exactly as `noctaya crds` writes them (sorted keys, stable)."""
    return {
        f"{API_GROUP}_{definition.plural}.yaml": _dump(definition.to_crd())
        for definition in DEFINITIONS
    }


def write_crds(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in rendered_crds().items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


class _PlainDumper(yaml.SafeDumper):
    """Writes repeated sub-trees out in full: anchors and aliases would only confuse readers."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def _dump(document: object) -> str:
    text = yaml.dump(document, Dumper=_PlainDumper, sort_keys=True, allow_unicode=True, width=100)
    return "---\n" + text


__all__ = ["DEFINITIONS", "INFERENCERUNTIME", "LLMSERVICE", "rendered_crds", "write_crds"]
