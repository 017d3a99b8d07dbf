"""The fill both hub fetchers share: resume the `.partial`, retry, verify, promote.

A transient failure keeps the `.partial` (what is complete there is not fetched again, and
ModelScope's client resumes its half-written files from it); a permanent one removes it, so a
rerun starts clean instead of trusting rejected bytes.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from noctaya.fetch.credentials import check_endpoint
from noctaya.fetch.delivery import Fetcher
from noctaya.fetch.errors import (
    FetchError,
    PermanentFetchError,
    TransientFetchError,
    describe,
    os_failure,
)
from noctaya.fetch.layout import Target
from noctaya.fetch.ownership import Waiting
from noctaya.fetch.progress import Progress
from noctaya.fetch.promotion import partial_of, promote, remove
from noctaya.fetch.retry import RetryPolicy


class HubFetcher(Fetcher):
    """What both hub fetchers are built from: the delivery, and the endpoint."""

    endpoint_variable: str
    """The environment variable naming the hub's endpoint when none is given."""

    def __init__(
        self,
        *,
        retry: RetryPolicy | None = None,
        progress: Progress | None = None,
        waiting: Waiting | None = None,
        endpoint: str | None = None,
    ) -> None:
        super().__init__(retry=retry, progress=progress, waiting=waiting)
        self._endpoint = endpoint

    def endpoint(self) -> str | None:
        """The given endpoint, else the variable's value read now (clients cache theirs);
        refused if it carries credentials."""
        value = self._endpoint or os.environ.get(self.endpoint_variable)
        return check_endpoint(self.endpoint_variable, value) if value else None

    def fill_with(self, target: Target, steps: HubSteps) -> None:
        """Fill the destination's `.partial`, verify it, promote it with what was verified."""
        partial = partial_of(target.destination)
        partial.mkdir(parents=True, exist_ok=True)
        try:
            total = self._retry.call(lambda: steps.measure(partial))
            self._progress.begin(total, partial)
            steps.salvage(partial)
            self._retry.call(lambda: steps.download(partial))
            tree = steps.tree(partial)
            verified = steps.verify(tree)
        except PermanentFetchError:
            remove(partial)
            raise
        self._progress.settle()
        promote(
            tree, target.destination, source=target.uri, identity=target.identity, verified=verified
        )
        remove(partial)


def _nothing_to_salvage(partial: Path) -> None:
    return None


@dataclass(frozen=True, slots=True)
class HubSteps:
    """One hub's part of the delivery; each step raises `FetchError` for what it cannot do."""

    measure: Callable[[Path], int | None]
    """Total bytes of the repository (a metadata request)."""
    download: Callable[[Path], None]
    """Download everything into the `.partial` directory, resuming what is there."""
    tree: Callable[[Path], Path]
    """The directory inside the `.partial` that becomes the destination."""
    verify: Callable[[Path], Mapping[str, Any]]
    """Check the tree against the hub's digests; return what was checked, for the marker."""
    salvage: Callable[[Path], None] = _nothing_to_salvage
    """Drop what an earlier run left in the `.partial` that cannot be resumed."""


def connection_failure(source: str, error: BaseException) -> FetchError | None:
    """What a later try can fix anywhere in the cause chain, or None: a reset, refused or
    timed-out connection, or an OS error `noctaya.fetch.errors.ERRNO_VERDICTS` calls transient
    (the hub clients raise a full cache volume from inside their download as well)."""
    for link in causes(error):
        failure = os_failure(source, link) if isinstance(link, OSError) else None
        if failure is not None and failure.transient:
            return failure
        if isinstance(link, ConnectionError | TimeoutError) or _is_transport_error(link):
            return TransientFetchError(source, f"connection failed: {describe(link)}")
    return None


def causes(error: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    link: BaseException | None = error
    while link is not None and link not in chain:
        chain.append(link)
        link = link.__cause__ or link.__context__
    return chain


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _is_transport_error(error: BaseException) -> bool:
    names = {cls.__name__ for cls in type(error).__mro__}
    return bool(
        names
        & {
            "TransportError",
            "NetworkError",
            "RemoteProtocolError",
            "TimeoutException",
            "ConnectionError",
            "ChunkedEncodingError",
            "ProtocolError",
            "ReadTimeoutError",
        }
    )
