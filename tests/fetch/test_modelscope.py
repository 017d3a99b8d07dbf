"""modelscope:// delivery through the real modelscope client against a hub on 127.0.0.1."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from noctaya.fetch.errors import PermanentFetchError
from noctaya.fetch.modelscope import ModelScopeFetcher
from noctaya.fetch.retry import RetryPolicy

from .conftest import FAST_RETRY, leftovers, model_files, tree_files
from .fake_hub import Hub
from .faults import Fault

URI = "modelscope://acme/tiny-model"
MODEL_DIR = Path("modelscope/models/acme/tiny-model")


def fetch(cache: Path, retry: RetryPolicy = FAST_RETRY) -> Path:
    return ModelScopeFetcher(retry=retry).fetch(URI, cache)


def test_fetch_fills_the_reused_layout_and_a_rerun_makes_no_request(
    hub_env: Hub, tmp_path: Path
) -> None:
    path = fetch(tmp_path)
    before = len(hub_env.requests)

    assert path == tmp_path / MODEL_DIR
    assert tree_files(path) == model_files()
    assert (path / ".noctaya-ready").is_file()
    assert leftovers(tmp_path) == []
    assert fetch(tmp_path) == path
    assert len(hub_env.requests) == before


def test_connection_dropped_mid_file_resumes_with_a_range_request(
    hub_env: Hub, tmp_path: Path
) -> None:
    hub_env.fail(Fault("FilePath=model.safetensors", "cut"))

    path = fetch(tmp_path)

    assert tree_files(path) == model_files()
    first, resumed = [r for r in hub_env.requests if "FilePath=model.safetensors" in r.path]
    assert "range" not in first.headers
    assert resumed.headers["range"] == f"bytes={len(model_files()['model.safetensors']) // 2}-"


def test_transient_503s_are_retried_and_end_with_identical_bytes(
    hub_env: Hub, tmp_path: Path
) -> None:
    hub_env.fail(Fault("/repo/files", "status", status=503, times=2))

    path = fetch(tmp_path)

    assert tree_files(path) == model_files()


def test_missing_model_fails_at_once_naming_the_source(hub_env: Hub, tmp_path: Path) -> None:
    with pytest.raises(PermanentFetchError, match="modelscope://acme/missing: model not found"):
        ModelScopeFetcher(retry=RetryPolicy(attempts=5, initial=10)).fetch(
            "modelscope://acme/missing", tmp_path
        )
    assert leftovers(tmp_path) == []


def test_wrong_bytes_fail_as_a_digest_mismatch_and_leave_nothing(
    hub_env: Hub, tmp_path: Path
) -> None:
    hub_env.fail(Fault("FilePath=", "wrong-bytes", times=100))

    with pytest.raises(PermanentFetchError, match=f"{URI}: digest mismatch"):
        fetch(tmp_path)

    assert not (tmp_path / MODEL_DIR).exists()
    assert leftovers(tmp_path) == []


def test_unauthorized_fails_at_once_and_a_token_from_a_mounted_file_is_used(
    hub_env: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub_env.token = "ms_secret_token"
    refused = (
        f"{URI}: the hub answered HTTP 401 (unauthorized): set MODELSCOPE_API_TOKEN to a token "
        "that grants access (for an LLMService, spec.model.source.secretRef names a Secret whose "
        'key "token" holds it)'
    )
    with pytest.raises(PermanentFetchError, match=re.escape(refused)):
        fetch(tmp_path, RetryPolicy(attempts=5, initial=10))
    assert len(hub_env.requests) == 1

    token_file = tmp_path / "token"
    token_file.write_text("ms_secret_token\n")
    monkeypatch.setenv("MODELSCOPE_API_TOKEN_FILE", str(token_file))
    path = fetch(tmp_path / "cache")

    assert tree_files(path) == model_files()


WEIGHTS = model_files()["model.safetensors"]
HALF = len(WEIGHTS) // 2


@pytest.mark.parametrize(
    ("left", "status", "ranges"),
    [
        (WEIGHTS[:HALF], None, [f"bytes={HALF}-"]),
        (WEIGHTS + b"x", None, [None]),
        (b"X" * HALF, None, [f"bytes={HALF}-", None]),
        (WEIGHTS[:HALF], 416, [f"bytes={HALF}-", None]),
    ],
    ids=["a-prefix", "grown", "other-bytes", "refused-with-416"],
)
def test_resuming_a_file_is_never_fatal(
    hub_env: Hub, tmp_path: Path, left: bytes, status: int | None, ranges: list[str | None]
) -> None:
    """The client resumes its `.incomplete` file from an earlier run, and starts it again when
    it is longer than the file, the hub refuses the range, or the bytes fail the SHA-256."""
    partial = tmp_path / "modelscope/models/acme/tiny-model.partial"
    partial.mkdir(parents=True)
    (partial / "model.safetensors.incomplete").write_bytes(left)
    if status is not None:
        hub_env.fail(Fault("FilePath=model.safetensors", "status", status=status))

    path = fetch(tmp_path)

    assert tree_files(path) == model_files()
    downloads = [r for r in hub_env.requests if "FilePath=model.safetensors" in r.path]
    assert [r.headers.get("range") for r in downloads if r.method == "GET"] == ranges
    assert leftovers(tmp_path) == []
