"""A vendor plugin in the operator's image, the way the manual says: its wheel built with
`uv build`, then `images/derive.sh` adds it to the image `make images` built, in one layer."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml
from support.manifests import inference_runtime, llmservice
from support.vendor_plugins import EXAMPLE_PLUGIN, clean_environment, uv

from .conftest import IMAGES, REPO, release
from .oci import Bundle, extract, unpack

pytestmark = pytest.mark.images

MAIN = IMAGES[0]
PAGE = REPO / "docs" / "vendor-plugins.md"
NAME = "registry.example.com/noctaya/noctaya-example:0.1.0"
TIMEOUT = 900


def example_manifests(bundle: Bundle) -> str:
    """A service on an `example` runtime, written into the image's filesystem for its user."""
    path = bundle.rootfs / "home" / "nonroot" / "example.yaml"
    runtime = inference_runtime("example-gpu", {"vendor": "example"})
    runtime["spec"]["accelerator"]["resourceName"] = "example.com/gpu"
    service = llmservice("svc", {"runtime": {"name": "example-gpu"}, "cache": {"strategy": "None"}})
    path.write_text(yaml.safe_dump_all([runtime, service]))
    path.chmod(0o644)
    return "/home/nonroot/example.yaml"


def test_the_page_builds_the_wheel_and_derives_the_image_with_the_script_tested_here() -> None:
    text = PAGE.read_text()
    assert "uv build tests/plugins/noctaya-vendor-example --wheel --out-dir dist/" in text
    derive = re.search(r"images/derive\.sh (\S+) \\\n\s+(\S+) \\\n\s+(\S+) (\S+\.whl)", text)
    assert derive, "the page runs images/derive.sh BASE NAME OUT WHEEL"
    assert derive[1] == f"build/images/{MAIN}-{release()}.oci.tar"


def test_a_derived_image_renders_the_plugins_vendor_where_the_base_image_cannot(
    built_images: dict[str, Path], bundles: dict[str, Bundle], tmp_path: Path
) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [uv(), "build", str(EXAMPLE_PLUGIN), "--wheel", "--out-dir", str(dist)],
        cwd=REPO, env=clean_environment(), capture_output=True, check=True, timeout=TIMEOUT,
    )  # fmt: skip
    (wheel,) = dist.glob("*.whl")
    archive = tmp_path / "derived.oci.tar"
    derived = subprocess.run(
        ["bash", str(REPO / "images" / "derive.sh"), str(built_images[MAIN]), NAME,
         str(archive), str(wheel)],
        cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT, check=False,
    )  # fmt: skip
    assert derived.returncode == 0, derived.stderr

    layout = extract(archive, tmp_path / "layout")
    base = extract(built_images[MAIN], tmp_path / "base")
    assert len(layout.manifest["layers"]) == len(base.manifest["layers"]) + 1
    assert layout.descriptor["annotations"]["io.containerd.image.name"] == NAME
    assert layout.config["config"]["User"] == base.config["config"]["User"]

    bundle = unpack(layout, release(), tmp_path / "bundle")
    rendered = bundle.run("noctaya", "render", "-f", example_manifests(bundle))
    assert rendered.returncode == 0, rendered.stderr
    objects = [doc for doc in yaml.safe_load_all(rendered.stdout) if doc]
    (deployment,) = [
        o for o in objects if (o["kind"], o["metadata"]["name"]) == ("Deployment", "svc")
    ]
    pod = deployment["spec"]["template"]["spec"]
    assert {"name": "example-tools", "hostPath": {"path": "/opt/example"}} in pod["volumes"]

    refused = bundles[MAIN].run("noctaya", "render", "-f", example_manifests(bundles[MAIN]))
    assert refused.returncode == 1
    assert "UnsupportedVendor" in refused.stderr, refused.stderr
