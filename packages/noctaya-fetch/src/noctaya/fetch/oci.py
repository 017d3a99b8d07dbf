"""`oci://` delivery: a digest-pinned ORAS artifact, verified blob by blob, promoted atomically.

`<destination>.partial/blobs` holds verified blobs (and `.part` files a rerun resumes);
`<destination>.partial/tree` is rebuilt from them on every run and renamed into place. Blobs
download concurrently, a bounded number at a time, each retried on its own.
"""

from __future__ import annotations

import threading
from collections import Counter
from functools import partial as bind
from pathlib import Path

import anyio
import anyio.to_thread
from noctaya.fetch.credentials import check_registry_config
from noctaya.fetch.delivery import Fetcher
from noctaya.fetch.errors import FetchError, PermanentFetchError, TransientFetchError
from noctaya.fetch.layout import Target
from noctaya.fetch.limits import DEFAULT_CONCURRENCY, DEFAULT_SIZE_CAP
from noctaya.fetch.oci_layers import (
    TITLE,
    SizeBudget,
    extract_tar,
    is_directory_layer,
    place_file,
)
from noctaya.fetch.oci_registry import DownloadStopped, Layer, RegistryClient
from noctaya.fetch.ownership import Waiting
from noctaya.fetch.progress import Progress
from noctaya.fetch.promotion import fresh_directory, partial_of, promote, remove
from noctaya.fetch.retry import RetryPolicy


class OciFetcher(Fetcher):
    """The fetcher of `oci://<registry>/<repository>@sha256:<digest>`."""

    def __init__(
        self,
        *,
        retry: RetryPolicy | None = None,
        progress: Progress | None = None,
        waiting: Waiting | None = None,
        registry_config: Path | None = None,
        plain_http: bool = False,
        size_cap: int = DEFAULT_SIZE_CAP,
        concurrency: int = DEFAULT_CONCURRENCY,
    ) -> None:
        super().__init__(retry=retry, progress=progress, waiting=waiting)
        self._registry_config = registry_config
        self._plain_http = plain_http
        self._size_cap = size_cap
        self._concurrency = max(1, concurrency)

    def fill(self, target: Target) -> None:
        uri = target.uri
        config = self._registry_config
        if config is not None:
            check_registry_config(config, uri)
        reference = str(target.model.oci_reference)
        client = RegistryClient(uri, reference, plain_http=self._plain_http, registry_config=config)
        partial = partial_of(target.destination)
        try:
            tree, layers = self._stage(uri, client, partial)
        except PermanentFetchError:
            remove(partial)
            raise
        self._progress.settle()
        verified = {
            "layers": [
                {"digest": layer.digest, "title": layer.annotations[TITLE]} for layer in layers
            ]
        }
        promote(tree, target.destination, source=uri, identity=target.identity, verified=verified)
        remove(partial)

    def _stage(self, uri: str, client: RegistryClient, partial: Path) -> tuple[Path, list[Layer]]:
        """The artifact's tree, built from its verified blobs, and the layers it came from."""
        layers = self._retry.call(client.manifest)
        total = sum(layer.size for layer in layers)
        if total > self._size_cap:
            raise PermanentFetchError(
                uri,
                f"the artifact's {total} bytes exceed the size cap of {self._size_cap} bytes",
            )
        for layer in layers:
            if not layer.annotations.get(TITLE):
                raise PermanentFetchError(uri, f"layer {layer.digest} has no {TITLE} annotation")
        blobs = partial / "blobs"
        blobs.mkdir(parents=True, exist_ok=True)
        tree = fresh_directory(partial / "tree")
        self._progress.begin(total)
        anyio.run(self._download_all, client, _unique(layers), blobs)
        budget = SizeBudget(uri, self._size_cap)
        uses = Counter(layer.digest for layer in layers)
        for layer in layers:
            uses[layer.digest] -= 1
            blob = blobs / layer.hex
            title = layer.annotations[TITLE]
            if is_directory_layer(layer.media_type, layer.annotations):
                extract_tar(uri, blob, tree, title, budget)
            else:
                budget.spend(layer.size)
                place_file(uri, blob, tree, title, keep_blob=uses[layer.digest] > 0)
        return tree, layers

    async def _download_all(self, client: RegistryClient, layers: list[Layer], blobs: Path) -> None:
        """Download the missing blobs, `concurrency` at a time; the first failure stops the rest."""
        limiter = anyio.CapacityLimiter(self._concurrency)
        stop = threading.Event()
        failures: list[FetchError] = []

        def one(layer: Layer) -> None:
            target = blobs / layer.hex
            if target.exists() and target.stat().st_size == layer.size:
                self._progress.advance(layer.size)
                return
            part = target.with_name(target.name + ".part")
            self._progress.advance(part.stat().st_size if part.exists() else 0)
            try:
                self._retry.call(
                    lambda: client.download(layer, target, self._progress.advance, stop)
                )
            except FetchError as error:
                failures.append(error)
                stop.set()
            except OSError as error:  # the cache volume, not the registry: full, read-only, …
                failures.append(TransientFetchError(client.source, f"writing a blob: {error}"))
                stop.set()

        async with anyio.create_task_group() as group:
            for layer in layers:
                group.start_soon(bind(anyio.to_thread.run_sync, one, layer, limiter=limiter))
        causes = [error for error in failures if not isinstance(error, DownloadStopped)]
        if causes:
            permanent = [error for error in causes if not error.transient]
            raise (permanent or causes)[0]


def _unique(layers: list[Layer]) -> list[Layer]:
    seen: dict[str, Layer] = {}
    for layer in layers:
        seen.setdefault(layer.digest, layer)
    return list(seen.values())
