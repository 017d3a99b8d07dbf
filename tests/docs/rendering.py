"""The objects a page's example renders to, rendered in-process as `noctaya render` and the
operator render them: what the pages' tests check a page's names, selectors and paths against."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from noctaya.core.plugins import VendorRegistry
from noctaya.k8s.offline import render_files

Objects = dict[tuple[str, str], dict[str, Any]]


def rendered(paths: list[Path], namespace: str = "ai", gateway_replicas: int = 1) -> Objects:
    """The rendered objects of `paths` by (kind, name); the files must render without problems."""
    outcome = render_files(
        paths,
        VendorRegistry.discover(),
        gateway_image="gateway:test",
        gateway_replicas=gateway_replicas,
        namespace=namespace,
    )
    assert outcome.problems == []
    return {(o["kind"], o["metadata"]["name"]): o for o in outcome.objects}
