"""What the stub was given as its model: each file of the `--model` directory, so a test can see
that a fetched model reached the serving container whole."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

_CHUNK = 1 << 20


def model_files(directory: Path) -> Iterator[str]:
    """`<relative path> <size> sha256:<hex>` for each regular file, in path order; raises
    OSError when `directory` is not a readable directory."""
    if not directory.is_dir():
        raise NotADirectoryError(f"{directory} is not a directory")
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        digest = hashlib.sha256()
        with path.open("rb") as file:
            while chunk := file.read(_CHUNK):
                digest.update(chunk)
        size = path.stat().st_size
        yield f"{path.relative_to(directory).as_posix()} {size} sha256:{digest.hexdigest()}"
