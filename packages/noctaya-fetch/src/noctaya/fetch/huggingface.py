"""`hf://` delivery through huggingface-hub into the hub cache layout the engine reads.

The repo folder is built inside `<repo folder>.partial/`, every blob is checked against the
name the hub gave it (a git blob SHA-1, or the SHA-256 of a large file), and the folder is
renamed into `<HF_HOME>/hub`. The client resumes a dropped file with a range request within one
run, a whole 10 MiB read at a time; blobs finished before a failure are not fetched again, but
this client version discards a half-written file when its download call fails.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from huggingface_hub import HfApi, snapshot_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    HFValidationError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.hf_api import RepoFile
from noctaya.core.model_source import SourceKind
from noctaya.fetch.credentials import HF_TOKEN, hub_token
from noctaya.fetch.errors import FetchError, PermanentFetchError, TransientFetchError, http_failure
from noctaya.fetch.hub import (
    HubFetcher,
    HubSteps,
    causes,
    connection_failure,
    file_sha256,
    resolve_hub_model,
)
from noctaya.fetch.layout import huggingface_destination

_GIT_SHA1 = re.compile(r"[0-9a-f]{40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_REVISION = "main"


class HuggingFaceFetcher(HubFetcher):
    """A `ModelFetcher` for `hf://` and `huggingface://`; the endpoint defaults to `HF_ENDPOINT`."""

    endpoint_variable = "HF_ENDPOINT"

    def fetch(self, uri: str, cache: Path) -> Path:
        model = resolve_hub_model(uri, SourceKind.HF)
        destination = huggingface_destination(model, cache)
        token = hub_token(HF_TOKEN, uri)
        endpoint = self.endpoint()
        folder = destination.name

        def measure(partial: Path) -> int | None:
            api = HfApi(endpoint=endpoint, token=token or False)
            try:
                tree = api.list_repo_tree(model.path, recursive=True, revision=_REVISION)
                return sum(entry.size for entry in tree if isinstance(entry, RepoFile))
            except Exception as error:
                raise _classify(uri, error) from None

        def download(partial: Path) -> None:
            try:
                snapshot_download(
                    model.path,
                    revision=_REVISION,
                    cache_dir=partial,
                    token=token or False,
                    endpoint=endpoint,
                )
            except Exception as error:
                raise _classify(uri, error) from None

        steps = HubSteps(
            measure=measure,
            download=download,
            tree=lambda partial: partial / folder,
            verify=lambda tree: _verify_blobs(uri, tree),
        )
        self.deliver(destination, steps)
        return snapshot_path(destination)


def snapshot_path(repo_folder: Path) -> Path:
    """The snapshot the `main` ref names: the directory an engine loads directly."""
    commit = (repo_folder / "refs" / _REVISION).read_text(encoding="utf-8").strip()
    return repo_folder / "snapshots" / commit


def _verify_blobs(uri: str, repo_folder: Path) -> None:
    """Each blob's bytes must hash to its name; `.incomplete` files of killed runs are dropped
    (this client version never resumes them across runs)."""
    blobs = repo_folder / "blobs"
    for blob in sorted(blobs.iterdir()) if blobs.is_dir() else []:
        if blob.name.endswith(".incomplete"):
            blob.unlink()
            continue
        if _SHA256.fullmatch(blob.name):
            actual = file_sha256(blob)
        elif _GIT_SHA1.fullmatch(blob.name):
            actual = _git_blob_sha1(blob)
        else:
            raise PermanentFetchError(uri, f"unexpected file {blob.name} in the downloaded blobs")
        if actual != blob.name:
            raise PermanentFetchError(
                uri, f"digest mismatch: a downloaded file hashes to {actual}, expected {blob.name}"
            )
    for link in (repo_folder / "snapshots").rglob("*"):
        if link.is_symlink() and not link.resolve().is_relative_to(blobs.resolve()):
            raise PermanentFetchError(uri, f"snapshot entry {link.name} points outside the blobs")


def _git_blob_sha1(path: Path) -> str:
    digest = hashlib.sha1(usedforsecurity=False)
    digest.update(f"blob {path.stat().st_size}\0".encode())
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _classify(uri: str, error: Exception) -> FetchError:
    """Map the client's exceptions to permanent or transient failures that name the source."""
    for link in causes(error):
        if isinstance(link, GatedRepoError):
            return PermanentFetchError(
                uri, "the repository is gated: accept its terms and set HF_TOKEN"
            )
        if isinstance(link, RepositoryNotFoundError):
            return PermanentFetchError(
                uri, "repository not found (or private and HF_TOKEN does not grant access)"
            )
        if isinstance(link, RevisionNotFoundError):
            return PermanentFetchError(uri, f"revision {_REVISION} not found")
        if isinstance(link, HfHubHTTPError) and link.response is not None:
            response = link.response
            return http_failure(
                uri, response.status_code, "download", response.headers.get("Retry-After")
            )
        if isinstance(link, EntryNotFoundError):
            return PermanentFetchError(uri, "a file listed by the hub was not found")
        if isinstance(link, HFValidationError):
            return PermanentFetchError(uri, f"invalid repository id: {link}")
    transient = connection_failure(uri, error)
    if transient is not None:
        return transient
    if isinstance(error, OSError) and "Consistency check failed" in str(error):
        return TransientFetchError(uri, "a file arrived shorter than announced")
    return PermanentFetchError(uri, f"download failed: {type(error).__name__}: {error}")
