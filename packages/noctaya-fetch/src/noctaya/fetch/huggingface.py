"""`hf://` delivery through huggingface-hub into the hub cache layout the engine reads.

The repo folder is built inside `<repo folder>.partial/`, every blob is checked against the
name the hub gave it (a git blob SHA-1, or the SHA-256 of a large file), and the folder is
renamed into `<HF_HOME>/hub`. The client resumes a dropped file with a range request within one
run, a whole 10 MiB read at a time; blobs finished before a failure are not fetched again (once
they are checked: the client trusts any blob it finds), but this client version discards a
half-written file when its download call fails.
"""

from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path
from typing import Any

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
from noctaya.fetch.credentials import HF_TOKEN, hub_refusal, hub_token, token_advice
from noctaya.fetch.errors import FetchError, PermanentFetchError, TransientFetchError, http_failure
from noctaya.fetch.hub import HubFetcher, HubSteps, causes, connection_failure, file_sha256
from noctaya.fetch.layout import HF_REVISION, Target, read_commit

log = logging.getLogger("noctaya.fetch")
_GIT_SHA1 = re.compile(r"[0-9a-f]{40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class HuggingFaceFetcher(HubFetcher):
    """The fetcher of `hf://` and `huggingface://`; the endpoint defaults to `HF_ENDPOINT`."""

    endpoint_variable = "HF_ENDPOINT"

    def fill(self, target: Target) -> None:
        uri, repository = target.uri, target.model.path
        token = hub_token(HF_TOKEN, uri)
        endpoint = self.endpoint()
        folder = target.destination.name

        def classify(error: Exception) -> FetchError:
            return _classify(uri, error, token_sent=token is not None)

        def measure(partial: Path) -> int | None:
            api = HfApi(endpoint=endpoint, token=token or False)
            try:
                tree = api.list_repo_tree(repository, recursive=True, revision=HF_REVISION)
                return sum(entry.size for entry in tree if isinstance(entry, RepoFile))
            except Exception as error:
                raise classify(error) from None

        def download(partial: Path) -> None:
            try:
                snapshot_download(
                    repository,
                    revision=HF_REVISION,
                    cache_dir=partial,
                    token=token or False,
                    endpoint=endpoint,
                )
            except Exception as error:
                raise classify(error) from None

        steps = HubSteps(
            measure=measure,
            download=download,
            tree=lambda partial: partial / folder,
            verify=lambda tree: _verify_blobs(uri, tree),
            salvage=lambda partial: _drop_damaged_blobs(partial / folder),
        )
        self.fill_with(target, steps)


def _drop_damaged_blobs(repo_folder: Path) -> None:
    """Blobs an earlier run left are kept only if they hash to their names: the client trusts
    any blob it finds, so one cut short or grown (another writer, a full disk) would otherwise
    fail the digest check after the download, and the whole fetch with it."""
    for blob in _blobs(repo_folder):
        if blob.name.endswith(".incomplete") or _blob_digest(blob) != blob.name:
            log.info("dropping blob %s left by an earlier run: it is incomplete", blob.name)
            blob.unlink()


def _verify_blobs(uri: str, repo_folder: Path) -> dict[str, Any]:
    """Each blob's bytes must hash to its name; `.incomplete` files of killed runs are dropped
    (this client version never resumes them across runs). Returns the commit and the blobs."""
    for blob in _blobs(repo_folder):
        if blob.name.endswith(".incomplete"):
            blob.unlink()
            continue
        actual = _blob_digest(blob)
        if actual is None:
            raise PermanentFetchError(uri, f"unexpected file {blob.name} in the downloaded blobs")
        if actual != blob.name:
            raise PermanentFetchError(
                uri, f"digest mismatch: a downloaded file hashes to {actual}, expected {blob.name}"
            )
    blobs = repo_folder / "blobs"
    for link in (repo_folder / "snapshots").rglob("*"):
        if link.is_symlink() and not link.resolve().is_relative_to(blobs.resolve()):
            raise PermanentFetchError(uri, f"snapshot entry {link.name} points outside the blobs")
    commit = read_commit(repo_folder)
    if commit is None:
        raise PermanentFetchError(uri, f"the download left no commit in refs/{HF_REVISION}")
    return {"commit": commit, "blobs": sorted(blob.name for blob in _blobs(repo_folder))}


def _blobs(repo_folder: Path) -> list[Path]:
    blobs = repo_folder / "blobs"
    return sorted(blobs.iterdir()) if blobs.is_dir() else []


def _blob_digest(blob: Path) -> str | None:
    """The digest the hub names a blob by: SHA-256 for large files, else the git blob SHA-1."""
    if _SHA256.fullmatch(blob.name):
        return file_sha256(blob)
    if _GIT_SHA1.fullmatch(blob.name):
        return _git_blob_sha1(blob)
    return None


def _git_blob_sha1(path: Path) -> str:
    digest = hashlib.sha1(usedforsecurity=False)
    digest.update(f"blob {path.stat().st_size}\0".encode())
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _classify(uri: str, error: Exception, *, token_sent: bool) -> FetchError:
    """Map the client's exceptions to permanent or transient failures that name the source."""
    advice = token_advice(HF_TOKEN, sent=token_sent)
    for link in causes(error):
        response = getattr(link, "response", None)
        status = response.status_code if response is not None else None
        if isinstance(link, GatedRepoError):
            return PermanentFetchError(
                uri,
                f"the hub answered HTTP {status}: the repository is gated; accept its terms on "
                f"the hub, and {advice}",
            )
        if isinstance(link, RepositoryNotFoundError):
            if status == 401:
                return PermanentFetchError(
                    uri,
                    "the hub answered HTTP 401 (unauthorized): the repository is private or "
                    f"gated, or does not exist; {advice}",
                )
            return PermanentFetchError(
                uri, "repository not found (or private and HF_TOKEN does not grant access)"
            )
        if isinstance(link, RevisionNotFoundError):
            return PermanentFetchError(uri, f"revision {HF_REVISION} not found")
        if isinstance(link, HfHubHTTPError) and response is not None:
            if status in (401, 403):
                return hub_refusal(uri, status, HF_TOKEN, sent=token_sent)
            if status == 416:
                return TransientFetchError(
                    uri, "the hub refused to resume a file (HTTP 416); it is fetched again"
                )
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
