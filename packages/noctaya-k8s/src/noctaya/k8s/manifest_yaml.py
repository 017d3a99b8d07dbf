"""How generated manifests are written: one stable YAML form for every committed file.

Sorted keys and no anchors, so regenerating gives byte-identical files and the drift tests can
compare text.
"""

from __future__ import annotations

from pathlib import Path

import yaml


class _PlainDumper(yaml.SafeDumper):
    """Writes repeated sub-trees out in full: anchors and aliases would only confuse readers."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def dump_manifest(document: object) -> str:
    text = yaml.dump(document, Dumper=_PlainDumper, sort_keys=True, allow_unicode=True, width=100)
    return "---\n" + text


def write_files(directory: Path, files: dict[str, str]) -> list[Path]:
    """Write `name -> text` into `directory` (created if needed); return the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files.items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
