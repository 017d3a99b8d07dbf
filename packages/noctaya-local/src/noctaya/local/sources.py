"""The files local mode serves: `FILE_OR_DIR…` expanded to manifest files and read together.

A folder stands for the YAML files directly in it (`*.yaml`, `*.yml`; hidden files such as an
editor's swap files are skipped), listed again whenever local mode looks for changes, so a file
added to it is served and a file removed from it is no longer. Together the files are what
`kubectl apply -f` would be given: every runtime is there for every service, and two services
(or two runtimes) of one name are refused, naming both files.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from noctaya.core.api import LLMService
from noctaya.core.api.names import shown
from noctaya.local.errors import LocalConfigError
from noctaya.local.manifest import ManifestFile
from noctaya.local.runtimes import FileRuntimes

MANIFEST_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True, slots=True)
class ServedService:
    service: LLMService
    source: str
    """The file it came from."""

    @property
    def name(self) -> str:
        return self.service.metadata.name or ""


@dataclass(frozen=True, slots=True)
class LocalManifests:
    """What the files declare, checked as one set."""

    services: tuple[ServedService, ...]
    """By name."""
    runtimes: FileRuntimes


def folder_manifests(folder: Path) -> list[Path]:
    """The manifest files directly in `folder`, sorted; none when it cannot be listed (it is
    gone, no longer a folder, or unreadable: as if its files were removed). An entry that is not
    a regular file, through its symlinks (a folder named `x.yaml`, a FIFO, a device, a dangling
    or looping symlink), is skipped: it can hold no manifest, and opening a FIFO would block."""
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []
    return sorted(
        entry
        for entry in entries
        if entry.suffix in MANIFEST_SUFFIXES and not entry.name.startswith(".") and entry.is_file()
    )


def combine(files: Iterable[ManifestFile]) -> LocalManifests:
    listed = list(files)
    runtimes = FileRuntimes(listed)
    services: dict[str, ServedService] = {}
    for file in listed:
        for service in file.services:
            served = ServedService(service, file.source)
            other = services.setdefault(served.name, served)
            if other is not served:
                raise LocalConfigError(
                    f"{file.source}: LLMService {shown(served.name)}: metadata.name is also "
                    f"the name of one in {other.source}; local mode serves every service under "
                    "its name"
                )
    return LocalManifests(tuple(services[name] for name in sorted(services)), runtimes)
