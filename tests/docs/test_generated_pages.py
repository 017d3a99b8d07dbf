"""The generated pages are current: each fails when the code changes without them.

The API reference and the operator's flags come from `noctaya docs`; the metrics and gateway
settings pages come from hack/gen-metrics-docs.py, which alone may import both the operator and
the gateway.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from noctaya.k8s.cli import main
from noctaya.k8s.docs import PAGES

REPO = Path(__file__).resolve().parents[2]
COMMITTED = {
    "api-reference": REPO / "docs" / "reference" / "api.md",
    "operator-flags": REPO / "docs" / "operations" / "operator-flags.md",
}
SCRIPT_PAGES = {
    "metrics": REPO / "docs" / "operations" / "metrics.md",
    "gateway-settings": REPO / "docs" / "operations" / "gateway-settings.md",
}
"""`hack/gen-metrics-docs.py --page <page>` → the committed page."""


def test_every_generated_page_is_committed() -> None:
    assert set(COMMITTED) == set(PAGES)


@pytest.mark.parametrize("page", sorted(COMMITTED))
def test_committed_page_is_what_noctaya_docs_writes(
    page: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / f"{page}.md"
    assert main(["docs", page, "--output", str(output)]) == 0
    assert capsys.readouterr().out == f"{output}\n"
    assert COMMITTED[page].read_text(encoding="utf-8") == output.read_text(encoding="utf-8"), (
        f"{COMMITTED[page].relative_to(REPO)} is stale: run "
        f"`noctaya docs {page} --output {COMMITTED[page].relative_to(REPO)}` and commit it"
    )


@pytest.mark.parametrize("page", sorted(SCRIPT_PAGES))
def test_committed_page_is_what_the_gateway_code_declares(page: str, tmp_path: Path) -> None:
    output = tmp_path / f"{page}.md"
    subprocess.run(
        [sys.executable, REPO / "hack" / "gen-metrics-docs.py", "--page", page, "--output", output],
        check=True,
        timeout=120,
    )
    committed = SCRIPT_PAGES[page]
    assert committed.read_text(encoding="utf-8") == output.read_text(encoding="utf-8"), (
        f"{committed.relative_to(REPO)} is stale: run "
        f"`python hack/gen-metrics-docs.py --page {page}` and commit it"
    )


def test_the_api_reference_documents_every_field_of_both_crds() -> None:
    page = COMMITTED["api-reference"].read_text(encoding="utf-8")
    for path in (
        "spec.scaling.externalScaler.tls.authenticationRef.kind",
        "spec.endpoint.coldStart.heartbeatInterval",
        "spec.accelerator.scheduler.queue",
        "status.conditions[].reason",
    ):
        assert f"| `{path}` |" in page
    assert "| `spec.scaling.max` | integer (int32) | `1` | ≥ 1 | Maximum backend replicas" in page


API_REFERENCE = REPO / "docs" / "reference" / "api.md"


def test_every_field_of_the_api_reference_has_a_description() -> None:
    rows = [
        row
        for row in API_REFERENCE.read_text(encoding="utf-8").splitlines()
        if row.startswith("| `")
    ]
    blank = [row.split(" | ")[0].strip("| `") for row in rows if row.rstrip().endswith("|  |")]
    assert rows
    assert blank == []
