"""Troubleshooting has one entry per condition of the contract and per reason in the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from noctaya.core import observation
from noctaya.k8s import cli
from noctaya.k8s.observe import JOB_NAME_LABEL
from noctaya.k8s.operator.flags import build_parser

from .rendering import rendered
from .status_reasons import code_reasons

PAGE = Path(__file__).resolve().parents[2] / "docs" / "troubleshooting.md"
CONDITIONS = {"Ready", "Degraded", "AutoscalingReady"}
_ENTRY = re.compile(r"^### `(\w+)`$", re.MULTILINE)


def entries() -> list[str]:
    return _ENTRY.findall(PAGE.read_text(encoding="utf-8"))


def test_every_reason_the_code_can_report_has_an_entry() -> None:
    missing = sorted(code_reasons() - set(entries()))
    assert missing == [], f"docs/troubleshooting.md has no `### `Reason`` entry for {missing}"


def test_every_condition_of_the_contract_has_an_entry() -> None:
    assert set(entries()) >= CONDITIONS


def test_no_entry_describes_a_reason_the_code_no_longer_has() -> None:
    stale = sorted(set(entries()) - code_reasons() - CONDITIONS)
    assert stale == []


def test_each_entry_appears_once() -> None:
    assert len(entries()) == len(set(entries()))


def test_the_scan_finds_reasons_of_every_shape() -> None:
    """One reason per way of writing it, so a broken scan cannot pass as an empty one."""
    assert {
        "InvalidSpec",  # super().__init__ of a NoctayaError subclass
        "RuntimeResolution",  # REASON constant
        "UnsupportedVendor",  # NoctayaError("...") literal
        "ObserveBackendPods",  # api_step("...")
        "ApplyScaledObject",  # applier.apply(obj, owner, "...")
        "OOMKilled",  # observation constant
        "Healthy",  # status condition value
        "BackendRecovered",  # StatusEvent reason
    } <= code_reasons()
    assert "ContainerCreating" not in code_reasons()  # the kubelet's word, read, never written


def section(reason: str) -> str:
    """The text of one `### `Reason`` entry, up to the next heading."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(f"### `{reason}`\n")
    end = text.find("\n#", start + 1)
    return " ".join(text[start : end if end > 0 else None].split())


def test_image_pull_failed_lists_exactly_the_waiting_reasons_that_map_to_it() -> None:
    listed = set(re.findall(r"`([A-Za-z]+)`", section("ImagePullFailed"))) - {"ImagePullFailed"}
    waiting = listed - {"imagePullSecrets"}
    assert waiting == set(observation._IMAGE_PULL_WAITING_REASONS)
    for reason in waiting:
        found = observation.classify_pod(observation.PodFacts("p", waiting_reason=reason))
        assert found.reason == observation.IMAGE_PULL_FAILED, reason


def test_gateway_config_is_said_to_come_from_planning_not_from_a_running_operator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The operator exits 1 on these flags before reconciling anything
    (tests/integration/test_operator_process.py); `noctaya validate` reports the reason."""
    text = section("GatewayConfig")
    assert "a running operator never reports this reason" in text
    assert "exits 1" in text
    examples = PAGE.parents[1] / "examples" / "nvidia" / "a10"
    code = cli.main(["validate", "-f", str(examples), "--gateway-replicas=-1"])
    assert code == 1
    assert "GatewayConfig: gateway replicas must be at least 1" in capsys.readouterr().err


def _selectors() -> dict[str, str]:
    """The `-l` selector of each entry's kubectl command that names a service's backend pods."""
    found = {}
    for reason in ("Starting", "CrashLoopBackOff"):
        (selector,) = re.findall(r"`kubectl [^`]*?-l (\S+)[^`]*`", section(reason))
        found[reason] = selector
    return found


def _matches(selector: str, labels: dict[str, str]) -> bool:
    """kubectl's equality- and existence-based label selector (`k=v`, `k==v`, `k!=v`, `k`,
    `!k`, comma-separated, all must hold)."""
    for term in selector.split(","):
        if "!=" in term:
            key, value = term.split("!=")
            ok = labels.get(key) != value
        elif "=" in term:
            key, value = term.replace("==", "=").split("=")
            ok = labels.get(key) == value
        elif term.startswith("!"):
            ok = term[1:] not in labels
        else:
            ok = term in labels
        if not ok:
            return False
    return True


def test_the_backend_pod_selectors_match_backend_pods_and_not_the_prewarm_job_pod() -> None:
    """Rendered in-process as the operator would: the a10 example prewarms, so it has a Job."""
    objects = rendered([PAGE.parents[1] / "examples" / "nvidia" / "a10"])
    backend = objects["Deployment", "qwen3-8b-a10"]
    templates = {
        "backend": backend["spec"]["template"],
        "job": objects["Job", "qwen3-8b-a10-prewarm"]["spec"]["template"],
        "gateway": objects["Deployment", "qwen3-8b-a10-gateway"]["spec"]["template"],
    }
    containers = {
        tier: {c["name"] for c in template["spec"]["containers"]}
        for tier, template in templates.items()
    }
    assert "serving" in containers["backend"]
    assert "serving" not in containers["job"]
    for reason, selector in _selectors().items():
        matched = {
            tier
            for tier, template in templates.items()
            if _matches(selector, template["metadata"]["labels"])
        }
        assert matched == {"backend"}, reason
    # Why `kubectl logs deployment/…` is no substitute: the Deployment's selector takes the Job's
    # pod too.
    deployment_selector = ",".join(
        f"{k}={v}" for k, v in backend["spec"]["selector"]["matchLabels"].items()
    )
    assert _matches(deployment_selector, templates["job"]["metadata"]["labels"])
    assert "that selector matches the Job's pod too" in section("CrashLoopBackOff")


def _pull_section() -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("## Pods that cannot pull their image\n")
    return text[start : text.index("\n## ", start + 1)]


def test_the_image_pull_section_finds_the_operator_and_job_pods_by_their_real_labels() -> None:
    repo = PAGE.parents[1]
    section_text = _pull_section()
    (operator_selector,) = re.findall(r"-n noctaya-system get pods -l (\S+)", section_text)
    chart = (repo / "charts" / "noctaya" / "templates" / "deployment.yaml").read_text()
    (kustomized,) = [
        doc
        for doc in yaml.safe_load_all((repo / "config" / "manager" / "manager.yaml").read_text())
        if doc and doc["kind"] == "Deployment"
    ]
    key, value = operator_selector.split("=")
    assert f"{key}: {value}" in chart
    assert kustomized["spec"]["template"]["metadata"]["labels"][key] == value
    (job_selector,) = re.findall(r"-n ai get pods -l (\S+)", section_text)
    job_label, job_name = job_selector.split("=")
    assert job_label == JOB_NAME_LABEL
    assert ("Job", job_name) in rendered([repo / "examples" / "nvidia" / "a10"])


def test_the_image_pull_section_names_values_flags_and_fields_that_exist() -> None:
    repo = PAGE.parents[1]
    text = " ".join(_pull_section().split())
    values = yaml.safe_load((repo / "charts" / "noctaya" / "values.yaml").read_text())
    for name in re.findall(r"`image\.(\w+)`", text):
        assert name in values["image"], name
    assert "imagePullSecrets" in values
    flags = build_parser().format_help()
    for flag in re.findall(r"`(--[a-z-]+)`", text):
        assert flag in flags, flag
    assert "--gateway-image=" in (repo / "config" / "manager" / "manager.yaml").read_text()
    assert "images:" in (repo / "config" / "default" / "kustomization.yaml").read_text()
    assert set(observation._IMAGE_PULL_WAITING_REASONS) >= {"ErrImagePull", "ImagePullBackOff"}
