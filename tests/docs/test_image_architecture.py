"""Getting the images says every image is linux/amd64 only: the build makes one image per
archive for the building machine's architecture (no platform list, no cross-build), and the
llama.cpp wheel is compiled for any x86-64 CPU."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from .markdown_tables import table_after

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "operations" / "images.md"
IMAGES = REPO / "images"


def test_the_build_targets_the_building_machine_and_x86_64_only() -> None:
    build = (IMAGES / "build.sh").read_text()
    rootfs = (IMAGES / "build-rootfs.sh").read_text()
    wheel = (IMAGES / "build-llama-cpp-wheel.sh").read_text()
    scripts = build + rootfs + wheel + (IMAGES / "Dockerfile").read_text()
    # no architecture is chosen anywhere: mmdebstrap and umoci take the machine's own
    for word in ("--architectures", "--arch", "--platform", "buildx", "arm64", "aarch64"):
        assert word not in scripts, word
    assert "mmdebstrap " in rootfs
    assert "umoci new" in build
    # one manifest per archive, not an index of platforms
    writer = (IMAGES / "write-archive.sh").read_text()
    assert '(manifest,) = index["manifests"]' in writer
    # the llama.cpp wheel: x86-64 with every extension beyond SSE2 off
    assert "for any x86-64 CPU" in wheel
    for flag in ("GGML_NATIVE=OFF", "GGML_AVX=OFF", "GGML_AVX2=OFF", "GGML_AVX512=OFF"):
        assert f"-D{flag}" in wheel, flag


def test_the_page_states_linux_amd64_for_each_image_built() -> None:
    build = (IMAGES / "build.sh").read_text()
    (images,) = re.findall(r"for image in ([\w -]+); do", build)
    built = {
        f"ghcr.io/noctaya/{('noctaya-' + i).removesuffix('-noctaya')}:0.1.0" for i in images.split()
    }
    rows = table_after(PAGE, "## Architecture: x86-64 only")
    assert {row[0].strip("`") for row in rows} == built
    assert {row[1] for row in rows} == {"`linux/amd64`"}
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    assert "No arm64 image is built or tested." in text
    assert "`exec format error`" in text
    assert "`no match for platform in manifest`" in text
    assert "--set-string 'operator.nodeSelector.kubernetes\\.io/arch=amd64'" in text
    assert "--set-string 'gateway.nodeSelector.kubernetes\\.io/arch=amd64'" in text


def test_the_chart_values_that_keep_pods_on_amd64_nodes_exist() -> None:
    values = yaml.safe_load((REPO / "charts" / "noctaya" / "values.yaml").read_text())
    assert values["operator"]["nodeSelector"] == {}
    assert values["gateway"]["nodeSelector"] == {}
