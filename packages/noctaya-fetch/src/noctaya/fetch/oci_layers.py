"""Placing verified OCI layers in a directory without letting an artifact escape it.

A plain layer becomes the file its `org.opencontainers.image.title` names; a directory layer
(as ORAS pushes a directory) is a tar extracted under that title. Names that
are absolute, climb with `..` or resolve outside the directory are rejected, and so is every
link: a link could point a backend at files outside the artifact.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import stat
import tarfile
from pathlib import Path

from noctaya.fetch.errors import PermanentFetchError
from noctaya.fetch.promotion import Writeback

TITLE = "org.opencontainers.image.title"
UNPACK = "io.deis.oras.content.unpack"
DIRECTORY_MEDIA_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"


def is_directory_layer(media_type: str, annotations: dict[str, str]) -> bool:
    """ORAS marks a pushed directory with the unpack annotation (Go CLI) or, in the Python SDK,
    with the gzip'd tar media type alone; both are unpacked as ORAS itself would."""
    return annotations.get(UNPACK) == "true" or media_type == DIRECTORY_MEDIA_TYPE


LINKS = "OCI model artifacts must not contain symbolic links or hard links"
_CHUNK = 1 << 20


class SizeBudget:
    """The artifact's size cap, spent by every byte written into the tree."""

    def __init__(self, source: str, limit: int) -> None:
        self._source = source
        self.limit = limit
        self.spent = 0

    def spend(self, count: int) -> None:
        self.spent += count
        if self.spent > self.limit:
            raise PermanentFetchError(
                self._source,
                f"the artifact exceeds the size cap of {self.limit} bytes",
            )


def safe_target(source: str, root: Path, name: str) -> Path:
    """`root/name` for a relative, clean name that stays inside `root`; anything else fails."""
    cleaned = name[2:] if name.startswith("./") else name
    cleaned = cleaned.rstrip("/")
    if not cleaned or cleaned.startswith("/") or "\\" in cleaned:
        raise PermanentFetchError(source, f"entry {name!r} is not a relative path")
    if ".." in cleaned.split("/") or posixpath.normpath(cleaned) != cleaned:
        raise PermanentFetchError(source, f"entry {name!r} leaves the artifact directory")
    target = root / cleaned
    resolved = Path(os.path.realpath(target))
    if not resolved.is_relative_to(os.path.realpath(root)):
        raise PermanentFetchError(source, f"entry {name!r} resolves outside the artifact directory")
    return target


def place_file(source: str, blob: Path, root: Path, title: str, *, keep_blob: bool) -> None:
    """Move (or copy, when another layer reuses the blob) a verified blob to its title."""
    target = safe_target(source, root, title)
    _make_parents(source, root, target)
    if target.exists() or target.is_symlink():
        raise PermanentFetchError(source, f"entry {title!r} appears twice in the artifact")
    if keep_blob:
        shutil.copyfile(blob, target)
    else:
        os.rename(blob, target)


def extract_tar(source: str, blob: Path, root: Path, title: str, budget: SizeBudget) -> None:
    """Extract a directory layer; every entry must lie under `title` and be a file or directory."""
    top = safe_target(source, root, title)
    try:
        with tarfile.open(blob, mode="r:*") as archive:
            for member in archive:
                _extract_member(source, archive, member, root, top, budget)
    except tarfile.TarError as error:
        raise PermanentFetchError(source, f"layer {title!r} is not a valid tar: {error}") from None


def _extract_member(
    source: str,
    archive: tarfile.TarFile,
    member: tarfile.TarInfo,
    root: Path,
    top: Path,
    budget: SizeBudget,
) -> None:
    if member.issym() or member.islnk():
        raise PermanentFetchError(source, f"{LINKS}: {member.name}")
    target = safe_target(source, root, member.name)
    if target != top and not target.is_relative_to(top):
        raise PermanentFetchError(
            source, f"entry {member.name!r} lies outside its layer's directory {top.name!r}"
        )
    if member.isdir():
        _make_parents(source, root, target / "_")
        return
    if not member.isfile():
        raise PermanentFetchError(source, f"entry {member.name!r} is not a file or directory")
    _make_parents(source, root, target)
    content = archive.extractfile(member)
    assert content is not None
    try:
        descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        raise PermanentFetchError(source, f"entry {member.name!r} appears twice") from None
    with os.fdopen(descriptor, "wb") as output:
        writeback = Writeback(output)  # promotion's fsync then finds little left
        while chunk := content.read(_CHUNK):
            budget.spend(len(chunk))
            output.write(chunk)
            writeback.written_to(output.tell())


def _make_parents(source: str, root: Path, target: Path) -> None:
    """Create the directories above `target`, refusing to go through anything but directories."""
    current = root
    for part in target.relative_to(root).parts[:-1]:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            current.mkdir(mode=0o755)
            continue
        if not stat.S_ISDIR(mode):
            raise PermanentFetchError(
                source, f"entry {current.relative_to(root)} is not a directory"
            )
