"""hf:// delivery through the real huggingface-hub client against a hub on 127.0.0.1."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from noctaya.fetch.errors import PermanentFetchError
from noctaya.fetch.huggingface import HuggingFaceFetcher
from noctaya.fetch.retry import RetryPolicy

from .conftest import FAST_RETRY, leftovers, model_files, tree_files
from .fake_hub import Hub, serve
from .faults import Fault

URI = "hf://acme/tiny-model"
REPO_FOLDER = Path("hf/hub/models--acme--tiny-model")


def fetch(cache: Path, retry: RetryPolicy = FAST_RETRY) -> Path:
    return HuggingFaceFetcher(retry=retry).fetch(URI, cache)


def test_fetch_fills_the_hub_cache_layout_and_writes_the_marker_last(
    hub_env: Hub, tmp_path: Path
) -> None:
    snapshot = fetch(tmp_path)

    assert snapshot.parent.parent == tmp_path / REPO_FOLDER
    assert tree_files(snapshot) == model_files()
    assert (tmp_path / REPO_FOLDER / ".noctaya-ready").is_file()
    assert leftovers(tmp_path) == []


def test_rerun_with_the_marker_present_makes_no_request(hub_env: Hub, tmp_path: Path) -> None:
    first = fetch(tmp_path)
    before = len(hub_env.requests)

    assert fetch(tmp_path) == first
    assert len(hub_env.requests) == before


LARGE = model_files() | {"model.safetensors": bytes(range(256)) * 96 * 1024}
"""The client resumes only whole 10 MiB chunks, so these weights are larger than that."""


@pytest.fixture
def large_hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[Hub]:
    with serve(Hub(files=LARGE)) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        yield hub


def test_connection_dropped_mid_file_resumes_with_a_range_request(
    large_hub: Hub, tmp_path: Path
) -> None:
    hub = large_hub
    hub.fail(Fault("model.safetensors", "cut"))

    snapshot = fetch(tmp_path)

    assert tree_files(snapshot) == LARGE
    first, resumed = hub.downloads("model.safetensors")
    assert "range" not in first.headers
    assert resumed.headers["range"].startswith("bytes=")
    assert resumed.headers["range"] != "bytes=0-"


def test_connection_reset_mid_file_is_retried_and_ends_with_identical_bytes(
    hub_env: Hub, tmp_path: Path
) -> None:
    hub_env.fail(Fault("model.safetensors", "reset", times=2))

    snapshot = fetch(tmp_path)

    assert tree_files(snapshot) == model_files()
    assert len(hub_env.downloads("model.safetensors")) == 3


def test_stale_partial_from_an_earlier_crash_is_completed(hub_env: Hub, tmp_path: Path) -> None:
    stale = tmp_path / "hf/hub/models--acme--tiny-model.partial/models--acme--tiny-model"
    (stale / "blobs").mkdir(parents=True)
    (stale / "blobs" / "junk.incomplete").write_bytes(b"left by a killed run")

    snapshot = fetch(tmp_path)

    assert tree_files(snapshot) == model_files()
    assert leftovers(tmp_path) == []


def test_transient_503s_are_retried_and_end_with_identical_bytes(
    hub_env: Hub, tmp_path: Path
) -> None:
    hub_env.fail(Fault("/api/models/acme/tiny-model/tree", "status", status=503, times=2))

    snapshot = fetch(tmp_path)

    assert tree_files(snapshot) == model_files()
    tree_calls = [r for r in hub_env.requests if "/tree/" in r.path]
    assert len(tree_calls) >= 3


def test_429_waits_at_least_the_retry_after_the_hub_sends(hub_env: Hub, tmp_path: Path) -> None:
    hub_env.fail(Fault("/api/models/acme/tiny-model/tree", "status", status=429, retry_after="1"))
    started = time.monotonic()

    snapshot = fetch(tmp_path)

    assert time.monotonic() - started >= 1.0
    assert tree_files(snapshot) == model_files()


def test_missing_repository_fails_at_once_naming_the_source(hub_env: Hub, tmp_path: Path) -> None:
    with pytest.raises(PermanentFetchError, match="hf://acme/missing: repository not found"):
        HuggingFaceFetcher(retry=RetryPolicy(attempts=5, initial=10)).fetch(
            "hf://acme/missing", tmp_path
        )
    assert len(hub_env.requests) == 1
    assert leftovers(tmp_path) == []


def test_unauthorized_fails_at_once_and_a_token_from_a_mounted_file_is_used(
    hub_env: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub_env.token = "hf_secret_token"
    with pytest.raises(PermanentFetchError, match=URI):
        fetch(tmp_path, RetryPolicy(attempts=5, initial=10))

    token_file = tmp_path / "token"
    token_file.write_text("hf_secret_token\n")
    monkeypatch.setenv("HF_TOKEN_FILE", str(token_file))
    snapshot = fetch(tmp_path / "cache")

    assert tree_files(snapshot) == model_files()


def test_wrong_bytes_fail_as_a_digest_mismatch_and_leave_nothing(
    hub_env: Hub, tmp_path: Path
) -> None:
    hub_env.fail(Fault("config.json", "wrong-bytes"))

    with pytest.raises(PermanentFetchError, match=f"{URI}: digest mismatch"):
        fetch(tmp_path)

    assert not (tmp_path / REPO_FOLDER).exists()
    assert leftovers(tmp_path) == []


WEIGHTS = model_files()["model.safetensors"]


@pytest.mark.parametrize(
    "left",
    [WEIGHTS[:-1], WEIGHTS + b"x", b"X" * len(WEIGHTS)],
    ids=["cut-short", "grown", "other-bytes"],
)
def test_a_blob_an_earlier_run_left_damaged_is_fetched_again(
    hub_env: Hub, tmp_path: Path, left: bytes
) -> None:
    """The client trusts any blob it finds in its cache; this fetcher checks them first."""
    blobs = tmp_path / "hf/hub/models--acme--tiny-model.partial/models--acme--tiny-model/blobs"
    blobs.mkdir(parents=True)
    (blobs / hashlib.sha256(WEIGHTS).hexdigest()).write_bytes(left)

    snapshot = fetch(tmp_path)

    assert tree_files(snapshot) == model_files()
    assert len(hub_env.downloads("model.safetensors")) == 1
    assert leftovers(tmp_path) == []


def test_a_resume_the_hub_refuses_with_416_starts_the_file_again(
    large_hub: Hub, tmp_path: Path
) -> None:
    hub = large_hub
    hub.fail(Fault("model.safetensors", "cut"))
    hub.fail(Fault("model.safetensors", "status", status=416))

    snapshot = fetch(tmp_path)

    assert tree_files(snapshot) == LARGE
    first, refused, again = hub.downloads("model.safetensors")
    assert "range" not in first.headers
    assert refused.headers["range"].startswith("bytes=")
    assert "range" not in again.headers
