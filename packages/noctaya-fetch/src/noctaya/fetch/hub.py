"""The delivery both hub fetchers share: resume the `.partial`, retry, verify, promote.

A transient failure keeps the `.partial` (what is complete there is not fetched again, and
ModelScope's client resumes its half-written files from it); a permanent one removes it, so a
rerun starts clean instead of trusting rejected bytes.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from noctaya.core.errors import NoctayaError
from noctaya.core.model_source import ResolvedModel, SourceKind, resolve_model
from noctaya.fetch.errors import FetchError, PermanentFetchError, TransientFetchError
from noctaya.fetch.progress import Progress
from noctaya.fetch.promotion import is_complete, partial_of, promote, remove
from noctaya.fetch.retry import RetryPolicy

_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+")
_CONNECTION_ERRNOS = frozenset(
    {errno.ECONNRESET, errno.ECONNREFUSED, errno.ECONNABORTED, errno.EPIPE, errno.ETIMEDOUT}
)


class HubFetcher:
    """What both hub fetchers are built from: the retry policy, the progress, the endpoint."""

    endpoint_variable: str
    """The environment variable naming the hub's endpoint when none is given."""

    def __init__(
        self,
        *,
        retry: RetryPolicy | None = None,
        progress: Progress | None = None,
        endpoint: str | None = None,
    ) -> None:
        self._retry = retry or RetryPolicy()
        self._progress = progress or Progress()
        self._endpoint = endpoint

    def endpoint(self) -> str | None:
        """The given endpoint, else the variable's value read now (clients cache theirs)."""
        return self._endpoint or os.environ.get(self.endpoint_variable) or None

    def deliver(self, destination: Path, steps: HubSteps) -> None:
        deliver(destination, steps, retry=self._retry, progress=self._progress)


@dataclass(frozen=True, slots=True)
class HubSteps:
    """One hub's part of the delivery; each step raises `FetchError` for what it cannot do."""

    measure: Callable[[Path], int | None]
    """Total bytes of the repository (a metadata request)."""
    download: Callable[[Path], None]
    """Download everything into the `.partial` directory, resuming what is there."""
    tree: Callable[[Path], Path]
    """The directory inside the `.partial` that becomes the destination."""
    verify: Callable[[Path], None]


def resolve_hub_model(uri: str, kind: SourceKind) -> ResolvedModel:
    """Parse the URI with the core's rules; the repo id must be `<owner>/<name>`."""
    try:
        model = resolve_model(uri)
    except NoctayaError as error:
        raise PermanentFetchError(uri, error.message) from None
    if model.kind is not kind:
        raise PermanentFetchError(uri, f"not a {kind.value}:// source")
    if not _REPO_ID.fullmatch(model.path) or ".." in model.path:
        raise PermanentFetchError(
            uri, f"invalid repository id {model.path!r}: expected <owner>/<name>"
        )
    return model


def deliver(destination: Path, steps: HubSteps, *, retry: RetryPolicy, progress: Progress) -> None:
    """Fill `destination` unless its marker says it is complete (then touch no network)."""
    if is_complete(destination):
        return
    partial = partial_of(destination)
    partial.mkdir(parents=True, exist_ok=True)
    try:
        total = retry.call(lambda: steps.measure(partial))
        progress.begin(total, partial)
        retry.call(lambda: steps.download(partial))
        tree = steps.tree(partial)
        steps.verify(tree)
    except PermanentFetchError:
        remove(partial)
        raise
    progress.settle()
    promote(tree, destination)
    remove(partial)


def connection_failure(source: str, error: BaseException) -> FetchError | None:
    """A reset, refused or timed-out connection anywhere in the cause chain, or None."""
    for link in causes(error):
        if isinstance(link, ConnectionError | TimeoutError) or (
            isinstance(link, OSError) and link.errno in _CONNECTION_ERRNOS
        ):
            return TransientFetchError(source, f"connection failed: {_describe(link)}")
        if _is_transport_error(link):
            return TransientFetchError(source, f"connection failed: {_describe(link)}")
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


def _describe(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
