"""The caches page's example renders as the page says: the hub token reaches the prewarm Job and
the serving container only as a reference to its Secret, the mirror and proxy settings reach
both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .rendering import rendered

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "docs" / "snippets" / "gated-mirrored-prewarm.yaml"
TOKEN = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}
STEERING = ["HF_ENDPOINT", "HTTPS_PROXY", "NO_PROXY"]


def test_the_gated_and_mirrored_example_renders_the_token_and_the_mirror_into_both() -> None:
    objects = rendered([EXAMPLE])
    [prewarm] = containers(objects["Job", "llama-gated-prewarm"])
    [serving] = containers(objects["Deployment", "llama-gated"])

    for container in (prewarm, serving):
        names = [entry["name"] for entry in container["env"]]
        assert all(name in names for name in STEERING)
        assert TOKEN in container["env"]
    assert "hf-token" not in " ".join(prewarm["command"])


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = obj["spec"]["template"]["spec"]["containers"]
    return found
