"""oci:// delivery from a real registry on 127.0.0.1: verified, resumable, and refusing every
artifact that could write outside its directory or deliver bytes other than those pinned."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from noctaya.fetch.errors import PermanentFetchError
from noctaya.fetch.oci import OciFetcher
from noctaya.fetch.promotion import partial_of

from .conftest import FAST_RETRY, leftovers, tree_files
from .fault_proxy import Proxy, proxy_to
from .faults import Fault
from .registry import RawLayer, RunningRegistry, push_files, push_layers

TITLE = "org.opencontainers.image.title"
LINKS = "OCI model artifacts must not contain symbolic links"


def model_tree(root: Path) -> dict[str, bytes]:
    """A directory `model/` (pushed as one tar layer) and a loose `README.md` file layer."""
    files = {
        "model/config.json": b'{"architectures": ["TinyForCausalLM"]}',
        "model/weights/part-0.safetensors": bytes(range(256)) * 2048,
        "model/weights/part-1.safetensors": bytes(reversed(range(256))) * 2048,
        "README.md": b"# tiny model\n",
    }
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)
    return files


def fetcher(registry: RunningRegistry, config: Path, **options: int) -> OciFetcher:
    return OciFetcher(retry=FAST_RETRY, registry_config=config, plain_http=True, **options)


@pytest.fixture
def config(registry: RunningRegistry, tmp_path: Path) -> Path:
    return registry.config_file(tmp_path)


@pytest.fixture
def pushed(registry: RunningRegistry, tmp_path: Path) -> tuple[str, dict[str, bytes]]:
    """A multi-file artifact pushed the way `oras push model README.md` pushes it."""
    source = tmp_path / "source"
    files = model_tree(source)
    digest = push_files(registry, "models/tiny", "v1", [source / "model", source / "README.md"])
    return f"oci://{registry.host}/models/tiny@{digest}", files


def destination(cache: Path, uri: str) -> Path:
    return cache / "oci" / ("sha256-" + uri.rsplit("@sha256:", 1)[1])


def test_artifact_is_fetched_by_digest_into_its_cache_path_with_the_marker(
    registry: RunningRegistry, config: Path, pushed: tuple[str, dict[str, bytes]], tmp_path: Path
) -> None:
    uri, files = pushed
    cache = tmp_path / "cache"

    path = fetcher(registry, config).fetch(uri, cache)

    assert path == destination(cache, uri)
    assert tree_files(path) == files
    assert (path / ".noctaya-ready").is_file()
    assert leftovers(cache) == []


def test_rerun_with_the_marker_present_touches_no_registry(
    registry: RunningRegistry, config: Path, pushed: tuple[str, dict[str, bytes]], tmp_path: Path
) -> None:
    uri, files = pushed
    cache = tmp_path / "cache"
    fetcher(registry, config).fetch(uri, cache)
    unreachable = uri.replace(registry.host, "127.0.0.1:9")

    path = OciFetcher(retry=FAST_RETRY, plain_http=True).fetch(unreachable, cache)

    assert tree_files(path) == files


def test_a_blob_whose_bytes_do_not_match_its_digest_fails_and_leaves_nothing(
    registry: RunningRegistry, config: Path, tmp_path: Path
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "weights.bin").write_bytes(b"the pinned weights")
    digest = push_files(registry, "models/corrupt", "v1", [source / "weights.bin"])
    uri = f"oci://{registry.host}/models/corrupt@{digest}"
    layer = _layer_digest(registry, uri, "weights.bin")
    registry.blob_file(layer).write_bytes(b"other weights here")

    with pytest.raises(PermanentFetchError, match=f"{uri}: blob {layer} does not match"):
        fetcher(registry, config).fetch(uri, tmp_path / "cache")

    assert not (tmp_path / "cache" / "oci").exists() or leftovers(tmp_path / "cache") == []
    assert not list((tmp_path / "cache").rglob(".noctaya-ready"))


def test_a_manifest_whose_bytes_do_not_match_the_pin_is_rejected(
    registry: RunningRegistry, config: Path, tmp_path: Path
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "weights.bin").write_bytes(b"weights for a manifest test")
    digest = push_files(registry, "models/manifest", "v1", [source / "weights.bin"])
    manifest = registry.blob_file(digest)
    manifest.write_bytes(manifest.read_bytes().replace(b"weights.bin", b"weights.BIN"))

    with pytest.raises(PermanentFetchError, match="manifest digest mismatch"):
        fetcher(registry, config).fetch(
            f"oci://{registry.host}/models/manifest@{digest}", tmp_path / "cache"
        )
    assert leftovers(tmp_path / "cache") == []


def test_a_tag_instead_of_a_digest_is_refused_before_any_request(
    registry: RunningRegistry, config: Path, tmp_path: Path
) -> None:
    with pytest.raises(PermanentFetchError, match=r"expected oci://.*@sha256:"):
        fetcher(registry, config).fetch(f"oci://{registry.host}/models/tiny:v1", tmp_path)


@pytest.mark.parametrize(
    ("password", "reason"),
    [("wrong-password", "HTTP 401"), (None, "HTTP 401")],
    ids=["wrong-credentials", "no-credentials"],
)
def test_refused_credentials_fail_at_once_without_echoing_the_secret(
    registry: RunningRegistry,
    pushed: tuple[str, dict[str, bytes]],
    tmp_path: Path,
    password: str | None,
    reason: str,
) -> None:
    uri, _ = pushed
    config = registry.config_file(tmp_path, password) if password else None

    with pytest.raises(PermanentFetchError, match=reason) as failure:
        OciFetcher(retry=FAST_RETRY, registry_config=config, plain_http=True).fetch(
            uri, tmp_path / "cache"
        )

    assert "wrong-password" not in str(failure.value)
    assert leftovers(tmp_path / "cache") == []


def _tar(entries: list[tarfile.TarInfo], contents: dict[str, bytes] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for entry in entries:
            data = (contents or {}).get(entry.name)
            if data is not None:
                entry.size = len(data)
            archive.addfile(entry, io.BytesIO(data) if data is not None else None)
    return gzip.compress(buffer.getvalue())


def _entry(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    entry = tarfile.TarInfo(name)
    entry.type = kind
    entry.linkname = link
    return entry


def _directory_layer(entries: list[tarfile.TarInfo], contents: dict[str, bytes]) -> RawLayer:
    return RawLayer(
        _tar(entries, contents),
        {TITLE: "model", "io.deis.oras.content.unpack": "true"},
        "application/vnd.oci.image.layer.v1.tar+gzip",
    )


HOSTILE = {
    "symlink-in-directory": (
        [_directory_layer([_entry("model/"), _entry("model/x", tarfile.SYMTYPE, "/etc")], {})],
        LINKS,
    ),
    "hardlink-in-directory": (
        [
            _directory_layer(
                [_entry("model/a"), _entry("model/b", tarfile.LNKTYPE, "model/a")],
                {"model/a": b"a"},
            )
        ],
        LINKS,
    ),
    "dot-dot-entry-in-directory": (
        [_directory_layer([_entry("model/../../escape")], {"model/../../escape": b"x"})],
        "leaves the artifact directory",
    ),
    "absolute-entry-in-directory": (
        [_directory_layer([_entry("/tmp/escape")], {"/tmp/escape": b"x"})],
        "is not a relative path",
    ),
    "entry-outside-its-layer-title": (
        [_directory_layer([_entry("other/file")], {"other/file": b"x"})],
        "lies outside its layer's directory",
    ),
    "dot-dot-file-title": ([RawLayer(b"x", {TITLE: "../escape"})], "leaves the artifact"),
    "absolute-file-title": ([RawLayer(b"x", {TITLE: "/etc/escape"})], "is not a relative path"),
    "untitled-layer": ([RawLayer(b"x", {})], f"has no {TITLE} annotation"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_artifact_fails_with_its_reason_and_leaves_no_marker_and_no_partial(
    registry: RunningRegistry, config: Path, tmp_path: Path, case: str
) -> None:
    layers, reason = HOSTILE[case]
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    digest = push_layers(registry, f"hostile/{case}", "v1", layers, scratch)
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    cache = sandbox / "cache"

    with pytest.raises(PermanentFetchError, match=reason):
        fetcher(registry, config).fetch(f"oci://{registry.host}/hostile/{case}@{digest}", cache)

    assert not list(cache.rglob(".noctaya-ready"))
    assert leftovers(cache) == []
    assert {p.name for p in sandbox.iterdir()} <= {"cache"}


def test_artifact_over_the_size_cap_is_refused_before_download(
    registry: RunningRegistry, config: Path, pushed: tuple[str, dict[str, bytes]], tmp_path: Path
) -> None:
    uri, _ = pushed

    with pytest.raises(PermanentFetchError, match="exceed the size cap of 1024 bytes"):
        fetcher(registry, config, size_cap=1024).fetch(uri, tmp_path / "cache")
    assert leftovers(tmp_path / "cache") == []


def test_a_directory_layer_that_expands_over_the_size_cap_is_refused(
    registry: RunningRegistry, config: Path, tmp_path: Path
) -> None:
    """A small gzip can expand to far more than its descriptor's size."""
    zeros = bytes(4 * 1024 * 1024)
    layer = _directory_layer([_entry("model/zeros")], {"model/zeros": zeros})
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    digest = push_layers(registry, "hostile/expanding", "v1", [layer], scratch)

    with pytest.raises(PermanentFetchError, match="exceeds the size cap of 1048576 bytes"):
        fetcher(registry, config, size_cap=1024 * 1024).fetch(
            f"oci://{registry.host}/hostile/expanding@{digest}", tmp_path / "cache"
        )
    assert leftovers(tmp_path / "cache") == []


def test_many_layers_download_concurrently_within_the_bound(
    registry: RunningRegistry, config: Path, tmp_path: Path
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    files = {f"shard-{index}.bin": bytes([index]) * 65536 for index in range(8)}
    for name, content in files.items():
        (source / name).write_bytes(content)
    digest = push_files(registry, "models/sharded", "v1", [source / name for name in files])

    path = fetcher(registry, config, concurrency=3).fetch(
        f"oci://{registry.host}/models/sharded@{digest}", tmp_path / "cache"
    )

    assert tree_files(path) == files


def _layer_digest(registry: RunningRegistry, uri: str, title: str) -> str:
    manifest_digest = uri.rsplit("@", 1)[1]
    manifest = json.loads(registry.blob_file(manifest_digest).read_bytes())
    return next(
        layer["digest"] for layer in manifest["layers"] if layer["annotations"][TITLE] == title
    )


@pytest.fixture
def proxy(registry: RunningRegistry) -> Iterator[Proxy]:
    with proxy_to(registry.host) as running:
        yield running


def through(proxy: Proxy, registry: RunningRegistry, uri: str) -> str:
    return uri.replace(registry.host, proxy.host)


def test_registry_5xx_is_retried_and_ends_with_identical_bytes(
    registry: RunningRegistry, proxy: Proxy, pushed: tuple[str, dict[str, bytes]], tmp_path: Path
) -> None:
    uri, files = pushed
    proxy.fail(Fault("/manifests/", "status", status=503, times=2))
    proxy.fail(Fault("/blobs/", "status", status=502))
    config = registry.config_file(tmp_path, host=proxy.host)

    path = fetcher(registry, config).fetch(through(proxy, registry, uri), tmp_path / "cache")

    assert tree_files(path) == files
    assert len([r for r in proxy.requests if "/manifests/" in r.path]) >= 3


def test_registry_429_waits_at_least_its_retry_after(
    registry: RunningRegistry, proxy: Proxy, pushed: tuple[str, dict[str, bytes]], tmp_path: Path
) -> None:
    uri, files = pushed
    proxy.fail(Fault("/blobs/", "status", status=429, retry_after="1"))
    config = registry.config_file(tmp_path, host=proxy.host)
    started = time.monotonic()

    path = fetcher(registry, config).fetch(through(proxy, registry, uri), tmp_path / "cache")

    assert time.monotonic() - started >= 1.0
    assert tree_files(path) == files


def test_a_blob_cut_mid_transfer_resumes_with_a_range_request(
    registry: RunningRegistry, proxy: Proxy, tmp_path: Path
) -> None:
    """Every byte that arrived before the cut (halfway through the body) is kept."""
    source = tmp_path / "weights.bin"
    source.write_bytes(os.urandom(3 * 1024 * 1024))
    digest = push_files(registry, "models/cut", "v1", [source])
    uri = f"oci://{proxy.host}/models/cut@{digest}"
    layer = _layer_digest(registry, uri, "weights.bin")
    proxy.fail(Fault(f"/blobs/{layer}", "cut"))
    config = registry.config_file(tmp_path, host=proxy.host)

    path = fetcher(registry, config).fetch(uri, tmp_path / "cache")

    assert tree_files(path) == {"weights.bin": source.read_bytes()}
    first, resumed = [r for r in proxy.requests if r.path.endswith(layer)]
    assert "range" not in first.headers
    assert resumed.headers["range"] == f"bytes={3 * 1024 * 1024 // 2}-"


RESUMES = {
    # what the partial state holds → the Range header of each request for the blob, in order
    "a-prefix": ("part", lambda blob: blob[: len(blob) // 2], None, ["bytes=HALF-"]),
    "bytes-that-are-not-a-prefix": (
        "part",
        lambda blob: b"X" * (len(blob) // 2),
        None,
        ["bytes=HALF-", None],
    ),
    "more-bytes-than-the-blob": ("part", lambda blob: blob + b"extra", None, [None]),
    "every-byte-before-the-rename": ("part", lambda blob: blob, None, []),
    "as-many-bytes-but-others": ("part", lambda blob: b"X" * len(blob), None, [None]),
    "a-prefix-the-registry-refuses-with-416": (
        "part",
        lambda blob: blob[: len(blob) // 2],
        416,
        ["bytes=HALF-", None],
    ),
    "a-finished-blob-cut-short": ("blob", lambda blob: blob[:-1], None, [None]),
    "a-finished-blob-grown": ("blob", lambda blob: blob + b"x", None, [None]),
}


@pytest.mark.parametrize("case", list(RESUMES))
def test_resuming_a_blob_is_never_fatal(
    registry: RunningRegistry, proxy: Proxy, tmp_path: Path, case: str
) -> None:
    """Whatever an earlier run (or another writer) left, the blob completes: a resume that the
    registry refuses, or whose bytes do not match, starts the blob again from its first byte."""
    kept, content, status, ranges = RESUMES[case]
    source = tmp_path / "weights.bin"
    source.write_bytes(os.urandom(1024 * 1024))
    digest = push_files(registry, "models/resume", "v1", [source])
    uri = f"oci://{proxy.host}/models/resume@{digest}"
    layer = _layer_digest(registry, uri, "weights.bin")
    blob = registry.blob_file(layer).read_bytes()
    cache = tmp_path / "cache"
    blobs = partial_of(destination(cache, uri)) / "blobs"
    blobs.mkdir(parents=True)
    name = layer.removeprefix("sha256:") + (".part" if kept == "part" else "")
    (blobs / name).write_bytes(content(blob))
    if status is not None:
        proxy.fail(Fault(f"/blobs/{layer}", "status", status=status))

    path = fetcher(registry, registry.config_file(tmp_path, host=proxy.host)).fetch(uri, cache)

    assert tree_files(path) == {"weights.bin": source.read_bytes()}
    assert leftovers(cache) == []
    sent = [r.headers.get("range") for r in proxy.requests if r.path.endswith(layer)]
    assert sent == [r and r.replace("HALF", str(len(blob) // 2)) for r in ranges]


def test_a_fresh_blob_that_does_not_match_its_digest_is_permanent(
    registry: RunningRegistry, proxy: Proxy, tmp_path: Path
) -> None:
    """Resumed bytes that fail the digest earn one fresh download; a fresh one that fails is
    the registry's content, and final."""
    source = tmp_path / "weights.bin"
    source.write_bytes(os.urandom(64 * 1024))
    digest = push_files(registry, "models/resume-corrupt", "v1", [source])
    uri = f"oci://{proxy.host}/models/resume-corrupt@{digest}"
    layer = _layer_digest(registry, uri, "weights.bin")
    registry.blob_file(layer).write_bytes(os.urandom(64 * 1024))
    cache = tmp_path / "cache"
    blobs = partial_of(destination(cache, uri)) / "blobs"
    blobs.mkdir(parents=True)
    (blobs / (layer.removeprefix("sha256:") + ".part")).write_bytes(b"X" * 1000)

    with pytest.raises(PermanentFetchError, match=f"blob {layer} does not match its digest"):
        fetcher(registry, registry.config_file(tmp_path, host=proxy.host)).fetch(uri, cache)

    sent = [r.headers.get("range") for r in proxy.requests if r.path.endswith(layer)]
    assert sent == ["bytes=1000-", None]
    assert leftovers(cache) == []
