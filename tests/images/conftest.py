"""The images, built once by images/build.sh and reused while its inputs stay the same.

The build needs root, mmdebstrap, umoci and runc. Without them the tests skip locally, naming
the install command, and fail under CI=true, where a missing tool must not pass unnoticed.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fetch.conftest import hub, registry  # noqa: F401  (the prewarm Job's sources)

from .oci import Bundle, Layout, extract, unpack

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "build" / "images"
STAMP = OUT / "inputs.sha256"
TOOLS = ("mmdebstrap", "umoci", "runc", "chroot")
BUILD_TIMEOUT = 1800
IMAGES = ("noctaya", "noctaya-engine-stub", "noctaya-llamacpp")


def release() -> str:
    return subprocess.run(
        ["bash", str(REPO / "images" / "version.sh")],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()


def archive(image: str) -> Path:
    return OUT / f"{image}-{release()}.oci.tar"


def _inputs_digest() -> str:
    """What the archives are built from: the packages, the locks and images/."""
    digest = hashlib.sha256()
    paths = [
        REPO / "uv.lock",
        *(REPO / "hack" / "llama-cpp").rglob("*"),
        *(REPO / "images").rglob("*"),
        *(REPO / "packages").rglob("*"),
    ]
    for path in sorted(paths):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _unavailable() -> str | None:
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        tools = ", ".join(missing)
        return f"{tools} missing: run `bash hack/install-test-packages.sh` (root, apt-get)"
    if os.geteuid() != 0:
        return "building the images needs root (images/build.sh chroots into the image)"
    return None


@pytest.fixture(scope="session")
def built_images() -> dict[str, Path]:
    """The archives by image name, built now if the packages, lock or build scripts changed."""
    reason = _unavailable()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    digest = _inputs_digest()
    archives = {image: archive(image) for image in IMAGES}
    OUT.mkdir(parents=True, exist_ok=True)
    # One builder at a time: a second test session (the e2e run beside the main suite) waits
    # for the first one's build and then finds it fresh, instead of removing its work folder.
    with open(OUT.parent / "images.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        fresh = STAMP.exists() and STAMP.read_text() == digest
        if not (fresh and all(path.exists() for path in archives.values())):
            started = time.monotonic()
            done = subprocess.run(
                ["bash", str(REPO / "images" / "build.sh"), str(OUT)],
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT,
                check=False,
            )
            assert done.returncode == 0, f"images/build.sh failed:\n{done.stdout}\n{done.stderr}"
            STAMP.write_text(digest)
            print(f"images/build.sh: {time.monotonic() - started:.0f}s")
    return archives


@pytest.fixture(scope="session")
def layouts(
    built_images: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Layout]:
    return {
        image: extract(path, tmp_path_factory.mktemp(f"{image}-layout"))
        for image, path in built_images.items()
    }


@pytest.fixture(scope="session")
def bundles(
    layouts: dict[str, Layout], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Bundle]]:
    bundles = {
        image: unpack(layout, release(), tmp_path_factory.mktemp(f"{image}-bundle") / "bundle")
        for image, layout in layouts.items()
    }
    yield bundles
    for bundle in bundles.values():
        shutil.rmtree(bundle.root, ignore_errors=True)
