"""Getting the images' kustomize overlay, built as the page has the user build it (with the box's
`kubectl kustomize`, beside a folder standing for the clone): the operator's container and the
gateway and Job images it renders all come from the registry the overlay names."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from noctaya.k8s.operator.flags import parse_flags
from support.cluster.layout import locate_programs

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "operations" / "images.md"
SNIPPET = REPO / "docs" / "snippets" / "kustomize-registry.yaml"
IMAGE = "registry.example.com/noctaya/noctaya:0.1.0"


def test_the_page_includes_the_overlay_and_applies_its_folder() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert '--8<-- "docs/snippets/kustomize-registry.yaml"' in page
    assert "kubectl apply -k my-noctaya/" in page


def test_the_overlay_moves_the_operator_the_gateway_and_the_jobs_to_the_registry(
    tmp_path: Path,
) -> None:
    (tmp_path / "noctaya").symlink_to(REPO)  # the clone, beside the overlay
    overlay = tmp_path / "my-noctaya"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(SNIPPET.read_text(encoding="utf-8"))
    built = subprocess.run(
        [str(locate_programs().path("kubectl")), "kustomize", str(overlay)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    objects = [doc for doc in yaml.safe_load_all(built.stdout) if doc]
    (operator,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = operator["spec"]["template"]["spec"]["containers"]
    assert container["image"] == IMAGE
    flags = parse_flags(container["args"])
    assert (flags.gateway_image, flags.fetch_image) == (IMAGE, IMAGE)
    images = [line for line in built.stdout.splitlines() if "ghcr.io/noctaya/noctaya" in line]
    assert images == [], images
