"""Talking to an OCI registry through the ORAS SDK, trusting no byte it has not hashed.

The manifest is fetched by its pinned digest and hashed; each blob is streamed to disk while
being hashed and counted, resumed with an HTTP range after a cut (and started again when the
registry will not resume or the resumed bytes do not match), and renamed into place only when
its digest matches.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.client import HTTPException, HTTPResponse
from pathlib import Path
from typing import Any, BinaryIO

import requests
from noctaya.core.files import open_regular
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
log = logging.getLogger("noctaya.fetch")
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


class _ResumeRefused(Exception):
    """The registry will not continue a blob where its partial file ends."""


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

        A resume that cannot be trusted starts the blob again from its first byte: a `.part`
        longer than the blob, a 416 or a range other than the one asked for, and resumed bytes
        whose digest does not match. Only a fresh download that does not match is permanent.
        `advance` gets every new byte; the caller counts a resumed `.part` once, up front, and
        a restart takes those bytes back.
        """
        part = target.with_name(target.name + ".part")
        descriptor = open_regular(
            part, os.O_RDWR | os.O_CREAT, follow_symlinks=False, single_link=True
        )  # appended to and truncated: never a link or another file's second name
        with os.fdopen(descriptor, "r+b") as output:
            offset = os.fstat(descriptor).st_size
            if offset > layer.size:
                self._restart(layer, output, advance, f"its partial file has {offset} bytes")
                offset = 0
            try:
                if offset == layer.size:  # every byte arrived before the rename: nothing to ask
                    digest, resumed = _file_digest(output), True
                else:
                    digest, resumed = self._transfer(layer, output, offset, advance, stop)
            except _ResumeRefused as refused:
                self._restart(layer, output, advance, str(refused))
                digest, resumed = self._transfer(layer, output, 0, advance, stop)
            if digest != layer.hex and resumed:
                self._restart(layer, output, advance, "the resumed bytes do not match its digest")
                digest, resumed = self._transfer(layer, output, 0, advance, stop)
            if digest != layer.hex:
                raise PermanentFetchError(
                    self._source,
                    f"blob {layer.digest} does not match its digest (got sha256:{digest})",
                )
            if os.stat(part, follow_symlinks=False).st_ino != os.fstat(descriptor).st_ino:
                raise TransientFetchError(
                    self._source, f"the partial file of blob {layer.digest} was replaced"
                )
        os.replace(part, target)

    def _restart(
        self, layer: Layer, output: BinaryIO, advance: Callable[[int], None], reason: str
    ) -> None:
        """Empty the partial file and take back the bytes it was counted with."""
        held = os.fstat(output.fileno()).st_size
        log.warning("%s: starting blob %s again: %s", self._source, layer.digest, reason)
        output.seek(0)
        output.truncate()
        advance(-held)

    def _transfer(
        self,
        layer: Layer,
        output: BinaryIO,
        offset: int,
        advance: Callable[[int], None],
        stop: threading.Event,
    ) -> tuple[str, bool]:
        """Fill `output` from `offset` to the blob's end; return the whole file's digest and
        whether the bytes before `offset` were used.

        Raises `_ResumeRefused` when the registry will not resume at `offset`.
        """
        hasher = hashlib.sha256()
        if offset:
            output.seek(0)
            _hash_prefix(output, offset, hasher)
        headers = {"Range": f"bytes={offset}-"} if offset else {}
        url = f"{self._connect().prefix}://{self._container.get_blob_url(layer.digest)}"
        if stop.is_set():
            raise DownloadStopped(self._source, "stopped after another blob failed")
        response = self._request(url, headers, stream=True)
        with response:
            start = self._body_start(layer, response, offset)
            if start != offset:
                advance(-offset)  # the registry ignored the range: the bytes come again
                hasher = hashlib.sha256()
            written = self._write_body(layer, response, output, start, hasher, advance, stop)
        if written < layer.size:
            raise TransientFetchError(
                self._source, f"blob {layer.digest} ended after {written} of {layer.size} bytes"
            )
        return hasher.hexdigest(), start > 0

    def _body_start(self, layer: Layer, response: requests.Response, offset: int) -> int:
        """Where in the blob the response's body starts: at `offset` for a resume (206), at 0
        when the registry sends the whole blob (200). Raises `_ResumeRefused` for a resume that
        cannot be used and the HTTP failure for any other status."""
        status = response.status_code
        if offset and status == 416:
            raise _ResumeRefused(f"the registry refused to resume at byte {offset} (HTTP 416)")
        if offset and status == 206 and not _starts_at(response, offset):
            raise _ResumeRefused(
                f"asked for bytes from {offset}, the registry sent "
                f"{response.headers.get('Content-Range')!r}"
            )
        if status == 200:
            return 0
        if status == 206:
            return offset
        raise http_failure(
            self._source,
            status,
            f"download of blob {layer.digest}",
            response.headers.get("Retry-After"),
        )

    def _write_body(
        self,
        layer: Layer,
        response: requests.Response,
        output: BinaryIO,
        start: int,
        hasher: Any,
        advance: Callable[[int], None],
        stop: threading.Event,
    ) -> int:
        """Write the body into `output` from `start`, hashing and counting each chunk, then
        sync it; return the file's length. A body longer than the blob ends the transfer: as a
        refused resume when it continued a partial file, as a permanent failure otherwise."""
        written = start
        body = _body(response)
        output.seek(start)
        output.truncate()
        writeback = Writeback(output, start)
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
                if start:
                    raise _ResumeRefused(f"the resumed blob runs past its {layer.size} bytes")
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
        return written

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


def _hash_prefix(source: BinaryIO, length: int, hasher: Any) -> None:
    """Hash the first `length` bytes of `source`, read from its start."""
    left = length
    while left and (chunk := source.read(min(_CHUNK, left))):
        hasher.update(chunk)
        left -= len(chunk)


def _file_digest(source: BinaryIO) -> str:
    hasher = hashlib.sha256()
    source.seek(0)
    _hash_prefix(source, os.fstat(source.fileno()).st_size, hasher)
    return hasher.hexdigest()


def _starts_at(response: requests.Response, offset: int) -> bool:
    """Whether a 206 carries the bytes from `offset` on (`Content-Range: bytes <offset>-…`)."""
    match = re.fullmatch(r"bytes (\d+)-\d+/(\d+|\*)", response.headers.get("Content-Range", ""))
    return match is not None and int(match.group(1)) == offset


def _connection_error(source: str, error: Exception) -> FetchError:
    return TransientFetchError(source, f"connection failed: {type(error).__name__}")
