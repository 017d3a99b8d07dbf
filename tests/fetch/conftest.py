"""Fixtures: a fake model hub and a real OCI registry on 127.0.0.1, and fast retries."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from noctaya.fetch.retry import RetryPolicy

from .fake_hub import Hub, serve
from .registry import RunningRegistry, registry_binaries_missing, run_registry

PASSWORD = "correct-horse-battery-staple"

FAST_RETRY = RetryPolicy(attempts=4, initial=0.05, maximum=0.5)


def model_files() -> dict[str, bytes]:
    """A tiny model: small JSON files (git-blob named) and a weights file (SHA-256 named)."""
    weights = hashlib.sha256(b"weights").digest() * 8192  # 256 KiB, deterministic
    return {
        "config.json": b'{"architectures": ["TinyForCausalLM"]}',
        "model.safetensors": weights,
        "tokenizer/tokenizer.json": b'{"version": "1.0"}',
    }


@pytest.fixture
def hub() -> Iterator[Hub]:
    with serve(Hub(files=model_files())) as running:
        yield running


@pytest.fixture
def hub_env(hub: Hub, monkeypatch: pytest.MonkeyPatch) -> Hub:
    """Both hub clients pointed at the fake hub through their endpoint variables."""
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("MODELSCOPE_ENDPOINT", hub.url)
    for variable in (
        "HF_TOKEN",
        "HF_TOKEN_FILE",
        "MODELSCOPE_API_TOKEN",
        "MODELSCOPE_API_TOKEN_FILE",
    ):
        monkeypatch.delenv(variable, raising=False)
    return hub


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRegistry]:
    """One password-protected `docker-registry` for the session."""
    missing = registry_binaries_missing()
    if missing is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(missing)
        pytest.skip(missing)
    with run_registry(tmp_path_factory.mktemp("registry"), password=PASSWORD) as running:
        yield running


def tree_files(root: Path) -> dict[str, bytes]:
    """Every regular file under `root` by relative path (the marker excluded)."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name != ".noctaya-ready"
    }


def leftovers(cache: Path) -> list[str]:
    """Any `.partial` or `.stale` directory a delivery left behind."""
    return [str(p) for p in cache.rglob("*") if p.name.endswith((".partial", ".stale"))]
