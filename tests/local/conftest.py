"""`start_local`: runs `noctaya-local` on a manifest and always stops it (and its children);
llama.cpp's built server and the tiny model it serves in tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.envtest.prerequisites import required
from support.llama_cpp import locate_llama_cpp_python
from support.tiny_llama import write_tiny_llama

from .support import LocalMode

StartLocal = Callable[..., LocalMode]


@pytest.fixture
def start_local() -> Iterator[StartLocal]:
    started: list[LocalMode] = []

    def start(
        manifest: Path | list[Path], *args: str, env: dict[str, str] | None = None
    ) -> LocalMode:
        local = LocalMode(manifest, *args, env=env)
        started.append(local)
        return local

    yield start
    for local in started:
        local.teardown()


@pytest.fixture(scope="session")
def llama_cpp_python() -> Path:
    """The interpreter llama-cpp-python is built for; skips locally, fails under CI=true."""
    return required(locate_llama_cpp_python)


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random llama model, written once per session."""
    return write_tiny_llama(tmp_path_factory.mktemp("models") / "tiny-llama.gguf")
