"""`modelscope://` delivery through the modelscope client, into the layout it reuses.

The client downloads into `<model dir>.partial/` (resuming its `.incomplete` files with HTTP
ranges) and checks each file's SHA-256 against the hub's listing; this fetcher then checks that
every listed file arrived with its listed size before the directory is renamed into place.
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
from noctaya.core.model_source import SourceKind
from noctaya.fetch.credentials import MODELSCOPE_TOKEN, hub_token
from noctaya.fetch.errors import FetchError, PermanentFetchError, TransientFetchError, http_failure
from noctaya.fetch.hub import HubFetcher, HubSteps, causes, connection_failure, resolve_hub_model
from noctaya.fetch.layout import modelscope_destination

_REVISION = "master"


class ModelScopeFetcher(HubFetcher):
    """A `ModelFetcher` for `modelscope://`; the endpoint defaults to `MODELSCOPE_ENDPOINT`."""

    endpoint_variable = "MODELSCOPE_ENDPOINT"

    def fetch(self, uri: str, cache: Path) -> Path:
        model = resolve_hub_model(uri, SourceKind.MODELSCOPE)
        destination = modelscope_destination(model, cache)
        token = hub_token(MODELSCOPE_TOKEN, uri)
        endpoint = self.endpoint()
        listing: dict[str, int] = {}

        def measure(partial: Path) -> int | None:
            try:
                files: list[dict[str, Any]] = HubApi(
                    endpoint=endpoint, token=token
                ).get_model_files(model.path, revision=_REVISION, recursive=True)
            except Exception as error:
                raise _classify(uri, error) from None
            listing.clear()
            listing.update({str(entry["Path"]): int(entry["Size"]) for entry in files})
            return sum(listing.values())

        def download(partial: Path) -> None:
            try:
                snapshot_download(
                    model.path,
                    revision=_REVISION,
                    local_dir=str(partial),
                    token=token,
                    endpoint=endpoint,
                )
            except Exception as error:
                raise _classify(uri, error) from None

        def verify(tree: Path) -> None:
            for name, size in listing.items():
                path = tree / name
                if not path.is_file() or path.is_symlink():
                    raise PermanentFetchError(uri, f"{name} is missing after the download")
                if path.stat().st_size != size:
                    raise PermanentFetchError(
                        uri, f"{name} has {path.stat().st_size} bytes, the hub lists {size}"
                    )

        steps = HubSteps(
            measure=measure, download=download, tree=lambda partial: partial, verify=verify
        )
        self.deliver(destination, steps)
        return destination


def _classify(uri: str, error: BaseException) -> FetchError:
    for link in causes(error):
        failed_files = getattr(link, "failed_files", None)
        if isinstance(failed_files, dict) and failed_files:
            return _worst([_classify(uri, cause) for cause in failed_files.values()])
        if isinstance(link, FileIntegrityError):
            return PermanentFetchError(uri, f"digest mismatch: {link}")
        if isinstance(link, NotExistError):
            return PermanentFetchError(uri, "model not found (or private without a valid token)")
        if isinstance(link, InvalidParameter):
            return PermanentFetchError(uri, f"invalid request: {link}")
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
