"""`start_local`: runs `noctaya-local` on a manifest and always stops it (and its children)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .support import LocalMode

StartLocal = Callable[..., LocalMode]


@pytest.fixture
def start_local() -> Iterator[StartLocal]:
    started: list[LocalMode] = []

    def start(manifest: Path, *args: str) -> LocalMode:
        local = LocalMode(manifest, *args)
        started.append(local)
        return local

    yield start
    for local in started:
        local.teardown()
