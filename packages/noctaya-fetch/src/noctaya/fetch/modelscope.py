"""`modelscope://` delivery through the modelscope client, into the layout it reuses.

The client downloads into `<model dir>.partial/` (resuming its `.incomplete` files with HTTP
ranges, and starting one again when it is longer than the file, the hub refuses the range or
the bytes fail their SHA-256) and checks each file's SHA-256 against the hub's listing; this
fetcher then checks that every listed file arrived with its listed size before the directory is
renamed into place.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from modelscope.hub.api import HubApi  # type: ignore[import-untyped]
from modelscope.hub.errors import (  # type: ignore[import-untyped]
    APIError,
    FileIntegrityError,
    InvalidParameter,
    NetworkError,
    NotExistError,
)
from modelscope.hub.snapshot_download import (  # type: ignore[import-untyped]
    snapshot_download,
)
from noctaya.fetch.credentials import MODELSCOPE_TOKEN, hub_refusal, hub_token
from noctaya.fetch.errors import FetchError, PermanentFetchError, TransientFetchError, http_failure
from noctaya.fetch.hub import HubFetcher, HubSteps, causes, connection_failure
from noctaya.fetch.layout import MODELSCOPE_REVISION, Target


class ModelScopeFetcher(HubFetcher):
    """The fetcher of `modelscope://`; the endpoint defaults to `MODELSCOPE_ENDPOINT`."""

    endpoint_variable = "MODELSCOPE_ENDPOINT"

    def fill(self, target: Target) -> None:
        uri, repository = target.uri, target.model.path
        token = hub_token(MODELSCOPE_TOKEN, uri)
        endpoint = self.endpoint()
        listing: dict[str, dict[str, Any]] = {}

        def classify(error: BaseException) -> FetchError:
            return _classify(uri, error, token_sent=token is not None)

        def measure(partial: Path) -> int | None:
            try:
                files: list[dict[str, Any]] = HubApi(
                    endpoint=endpoint, token=token
                ).get_model_files(repository, revision=MODELSCOPE_REVISION, recursive=True)
            except Exception as error:
                raise classify(error) from None
            listing.clear()
            listing.update({str(entry["Path"]): entry for entry in files})
            return sum(int(entry["Size"]) for entry in listing.values())

        def download(partial: Path) -> None:
            try:
                snapshot_download(
                    repository,
                    revision=MODELSCOPE_REVISION,
                    local_dir=str(partial),
                    token=token,
                    endpoint=endpoint,
                )
            except Exception as error:
                raise classify(error) from None

        def verify(tree: Path) -> dict[str, Any]:
            """Every listed file with its listed size; the client checked each one's SHA-256."""
            for name, entry in listing.items():
                path, size = tree / name, int(entry["Size"])
                if not path.is_file() or path.is_symlink():
                    raise PermanentFetchError(uri, f"{name} is missing after the download")
                if path.stat().st_size != size:
                    raise PermanentFetchError(
                        uri, f"{name} has {path.stat().st_size} bytes, the hub lists {size}"
                    )
            return {"sha256": {name: entry.get("Sha256") for name, entry in listing.items()}}

        steps = HubSteps(
            measure=measure, download=download, tree=lambda partial: partial, verify=verify
        )
        self.fill_with(target, steps)


def _classify(uri: str, error: BaseException, *, token_sent: bool) -> FetchError:
    for link in causes(error):
        failed_files = getattr(link, "failed_files", None)
        if isinstance(failed_files, dict) and failed_files:
            failures = failed_files.values()
            return _worst([_classify(uri, cause, token_sent=token_sent) for cause in failures])
        if isinstance(link, FileIntegrityError):
            return PermanentFetchError(uri, f"digest mismatch: {link}")
        if isinstance(link, NotExistError):
            return PermanentFetchError(uri, "model not found (or private without a valid token)")
        if isinstance(link, InvalidParameter):
            return PermanentFetchError(uri, f"invalid request: {link}")
        if isinstance(link, APIError) and link.status_code in (401, 403):
            return hub_refusal(uri, link.status_code, MODELSCOPE_TOKEN, sent=token_sent)
        if isinstance(link, APIError) and link.status_code is not None:
            retry_after = getattr(link, "retry_after", None)
            return http_failure(
                uri,
                link.status_code,
                "download",
                None if retry_after is None else str(retry_after),
            )
        if isinstance(link, NetworkError):
            return TransientFetchError(uri, f"connection failed: {type(link).__name__}")
    transient = connection_failure(uri, error)
    if transient is not None:
        return transient
    return PermanentFetchError(uri, f"download failed: {type(error).__name__}: {error}")


def _worst(failures: list[FetchError]) -> FetchError:
    """A snapshot whose files failed for several reasons fails for the first permanent one."""
    permanent = [failure for failure in failures if not failure.transient]
    return (permanent or failures)[0]
