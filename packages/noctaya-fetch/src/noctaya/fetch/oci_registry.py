"""Talking to an OCI registry through the ORAS SDK, trusting no byte it has not hashed.

The manifest is fetched by its pinned digest and hashed; each blob is streamed to disk while
being hashed and counted, resumed with an HTTP range after a cut, and renamed into place only
when its digest matches.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.client import HTTPException, HTTPResponse
from pathlib import Path
from typing import Any

import requests
from noctaya.fetch.errors import FetchError, PermanentFetchError, TransientFetchError, http_failure
from noctaya.fetch.promotion import Writeback
from oras.auth import BasicAuth  # type: ignore[import-untyped]
from oras.container import Container  # type: ignore[import-untyped]
from oras.provider import Registry  # type: ignore[import-untyped]

MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
_INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
_DIGEST = re.compile(r"sha256:(?P<hex>[a-f0-9]{64})")
_CHUNK = 1 << 20
"""Bytes read, hashed and written per step, in one buffer reused for the whole blob."""


@dataclass(frozen=True, slots=True)
class Layer:
    digest: str
    size: int
    media_type: str
    annotations: dict[str, str]

    @property
    def hex(self) -> str:
        return self.digest.removeprefix("sha256:")


class DownloadStopped(PermanentFetchError):
    """Another blob failed first; this one ends without a retry and without a message of its own."""


class _Registry(Registry):  # type: ignore[misc]
    """The SDK's client without its built-in retry loop, which sleeps for minutes on any error
    (authentication failures included); `noctaya.fetch.retry` decides instead."""

    def do_request(self, *args: Any, **kwargs: Any) -> requests.Response:
        response: requests.Response = Registry.do_request.__wrapped__(self, *args, **kwargs)
        return response


class RegistryClient:
    """One digest-pinned artifact's registry: its manifest, layers and blobs."""

    def __init__(
        self,
        source: str,
        reference: str,
        *,
        plain_http: bool = False,
        registry_config: Path | None = None,
    ) -> None:
        self._source = source
        self._container = Container(reference)
        self._plain_http = plain_http
        self._config = registry_config
        self._registry: _Registry | None = None
        self._lock = threading.Lock()

    @property
    def source(self) -> str:
        return self._source

    def manifest(self) -> list[Layer]:
        """The pinned manifest's layers, after checking the manifest bytes hash to the pin."""
        registry = self._connect()
        url = f"{registry.prefix}://{self._container.manifest_url()}"
        response = self._request(url, {"Accept": ", ".join(MANIFEST_TYPES + _INDEX_TYPES)})
        with response:
            if response.status_code != 200:
                raise http_failure(
                    self._source,
                    response.status_code,
                    "manifest request",
                    response.headers.get("Retry-After"),
                )
            try:
                body = response.content
            except requests.RequestException as error:
                raise _connection_error(self._source, error) from None
        actual = "sha256:" + hashlib.sha256(body).hexdigest()
        if actual != self._container.digest:
            raise PermanentFetchError(
                self._source, f"manifest digest mismatch: the registry sent {actual}"
            )
        return _layers(self._source, body)

    def download(
        self, layer: Layer, target: Path, advance: Callable[[int], None], stop: threading.Event
    ) -> None:
        """Stream `layer` into `target`, resuming `<target>.part`; verify, then rename into place.

        `advance` gets every new byte (the caller counts a resumed `.part` once, up front).
        """
        part = target.with_name(target.name + ".part")
        hasher = hashlib.sha256()
        offset = part.stat().st_size if part.exists() else 0
        if offset > layer.size:
            part.unlink()
            offset = 0
        if offset:
            _hash_file(part, hasher)
        headers = {"Range": f"bytes={offset}-"} if offset else {}
        url = f"{self._connect().prefix}://{self._container.get_blob_url(layer.digest)}"
        if stop.is_set():
            raise DownloadStopped(self._source, "stopped after another blob failed")
        response = self._request(url, headers, stream=True)
        with response:
            if response.status_code == 200 and offset:
                advance(-offset)  # the registry ignored the range: the bytes come again
                hasher, offset = hashlib.sha256(), 0
            elif response.status_code not in (200, 206):
                raise http_failure(
                    self._source,
                    response.status_code,
                    f"download of blob {layer.digest}",
                    response.headers.get("Retry-After"),
                )
            written = offset
            body = _body(response)
            with part.open("r+b" if offset else "wb") as output:
                output.seek(offset)
                output.truncate()
                writeback = Writeback(output, offset)
                while True:
                    try:
                        chunk = next(body, None)
                    except (requests.RequestException, HTTPException, OSError) as error:
                        raise _connection_error(self._source, error) from None
                    if chunk is None:
                        break
                    if stop.is_set():
                        raise DownloadStopped(self._source, "stopped after another blob failed")
                    written += len(chunk)
                    if written > layer.size:
                        part.unlink()
                        raise PermanentFetchError(
                            self._source,
                            f"blob {layer.digest} is larger than the {layer.size} bytes "
                            "its descriptor declares",
                        )
                    output.write(chunk)
                    hasher.update(chunk)
                    advance(len(chunk))
                    writeback.written_to(written)
                output.flush()
                os.fsync(output.fileno())
        if written < layer.size:
            raise TransientFetchError(
                self._source, f"blob {layer.digest} ended after {written} of {layer.size} bytes"
            )
        if hasher.hexdigest() != layer.hex:
            part.unlink()
            raise PermanentFetchError(
                self._source,
                f"blob {layer.digest} does not match its digest (got sha256:{hasher.hexdigest()})",
            )
        os.replace(part, target)

    def _connect(self) -> _Registry:
        """The SDK client, with the auth scheme the registry asks for and the mounted config."""
        with self._lock:
            if self._registry is not None:
                return self._registry
            prefix = "http" if self._plain_http else "https"
            try:
                probe = requests.get(f"{prefix}://{self._container.registry}/v2/", timeout=30)
            except requests.RequestException as error:
                raise _connection_error(self._source, error) from None
            challenge = probe.headers.get("WWW-Authenticate", "")
            backend = "basic" if challenge.lower().startswith("basic") else "token"
            registry = _Registry(insecure=self._plain_http, auth_backend=backend)
            configs = [str(self._config)] if self._config is not None else None
            registry.auth.load_configs(self._container, configs=configs)
            if backend == "basic" and not getattr(registry.auth, "_basic_auth", None):
                raise PermanentFetchError(
                    self._source,
                    f"the registry asks for credentials (HTTP 401) and none are configured "
                    f"for {self._container.registry}",
                )
            self._registry = registry
            return registry

    def _request(
        self, url: str, headers: dict[str, str], *, stream: bool = False
    ) -> requests.Response:
        registry = self._connect()
        headers = {**registry.headers, **headers}
        if isinstance(registry.auth, BasicAuth):
            headers.update(registry.auth.get_auth_header())  # spares a 401 round trip per blob
        try:
            response: requests.Response = registry.do_request(
                url, "GET", headers=headers, stream=stream
            )
        except requests.RequestException as error:
            raise _connection_error(self._source, error) from None
        except ValueError as error:
            raise PermanentFetchError(
                self._source, "the registry requires credentials that were not accepted"
            ) from error
        return response


def _layers(source: str, body: bytes) -> list[Layer]:
    try:
        document = json.loads(body)
    except ValueError:
        raise PermanentFetchError(source, "the manifest is not valid JSON") from None
    media_type = document.get("mediaType", "") if isinstance(document, dict) else ""
    if media_type in _INDEX_TYPES or (isinstance(document, dict) and "manifests" in document):
        raise PermanentFetchError(
            source, "the digest names an image index; pin the digest of one artifact manifest"
        )
    entries = document.get("layers") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise PermanentFetchError(source, "the manifest has no layers list")
    layers = []
    for entry in entries:
        digest = entry.get("digest") if isinstance(entry, dict) else None
        size = entry.get("size") if isinstance(entry, dict) else None
        if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
            raise PermanentFetchError(source, f"layer digest {digest!r} is not a sha256 digest")
        if not isinstance(size, int) or size < 0:
            raise PermanentFetchError(source, f"layer {digest} has no valid size")
        annotations = entry.get("annotations") or {}
        layers.append(
            Layer(
                digest=digest,
                size=size,
                media_type=str(entry.get("mediaType", "")),
                annotations={str(k): str(v) for k, v in dict(annotations).items()},
            )
        )
    return layers


def _body(response: requests.Response) -> Iterator[bytes | memoryview]:
    """The response body in chunks, each valid until the next is asked for.

    A body sent as is (no Content-Encoding, as registries send blobs) is read from the
    connection straight into one reused buffer: iterating through requests would allocate a
    chunk and copy every byte twice more before it is hashed and written, which on a busy node
    costs as much CPU as the hashing itself.
    """
    connection = getattr(response.raw, "_fp", None)  # the http.client response urllib3 wraps
    if response.headers.get("Content-Encoding") or not isinstance(connection, HTTPResponse):
        yield from response.iter_content(chunk_size=_CHUNK)
        return
    buffer = memoryview(bytearray(_CHUNK))
    while count := connection.readinto(buffer):
        yield buffer[:count]


def _hash_file(path: Path, hasher: Any) -> None:
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            hasher.update(chunk)


def _connection_error(source: str, error: Exception) -> FetchError:
    return TransientFetchError(source, f"connection failed: {type(error).__name__}")
