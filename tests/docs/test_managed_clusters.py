"""Managed clusters (EKS, GKE, AKS): the labels, taints, instance sizes, storage and pages it
names agree with what the example runtimes select and tolerate, with what the A10 example's
service requests, with the cache strategies and with the manual's navigation."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from noctaya.core.api import CacheStrategy, parse_llmservice

from .markdown_tables import table_after

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "operations" / "managed-clusters.md"
NVIDIA = REPO / "examples" / "nvidia"
A10_SERVICE = NVIDIA / "a10" / "llmservice.yaml"
GIB = 1024**3
MIB = 1024**2


def text() -> str:
    return " ".join(PAGE.read_text(encoding="utf-8").split())


def runtime(profile: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((NVIDIA / profile / "runtime.yaml").read_text())
    return document


def test_the_page_is_in_the_navigation_and_getting_started_links_to_it() -> None:
    nav = yaml.safe_load(
        re.sub(r"!!python/name:\S+", "null", (REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    )["nav"]
    operations = next(item["Operations"] for item in nav if "Operations" in item)
    assert {"Managed clusters: EKS, GKE, AKS": "operations/managed-clusters.md"} in operations
    started = (REPO / "docs" / "getting-started.md").read_text(encoding="utf-8")
    assert "(operations/managed-clusters.md)" in started
    assert "(operations/managed-clusters.md#instance-sizes-on-eks)" in started


def test_the_labels_the_page_keeps_are_the_ones_the_examples_select() -> None:
    page = text()
    for profile in ("a10", "a100"):
        selector = runtime(profile)["spec"]["accelerator"]["nodeSelector"]
        assert list(selector) == ["nvidia.com/gpu.product"]  # GFD's label, the page's subject
        ((key, value),) = selector.items()
        assert f"| `examples/nvidia/{profile}` | `{key}: {value}` |" in page
    assert "(`nvidia.com/gpu.product`)" in page
    assert "helm install nvdp nvdp/nvidia-device-plugin" in page
    assert "--set gfd.enabled=true" in page
    assert "kubectl get nodes -L nvidia.com/gpu.product" in page
    # the cloud labels the page offers instead, one per cloud
    for label in (
        "cloud.google.com/gke-accelerator",
        "kubernetes.azure.com/accelerator",
        "node.kubernetes.io/instance-type",
    ):
        assert f"`{label}" in page
    # Getting started's table of labels names GFD for the same label
    started = (REPO / "docs" / "getting-started.md").read_text(encoding="utf-8")
    assert "| `nvidia.com/gpu.product` | NVIDIA GPU Feature Discovery" in started


def test_the_example_runtimes_tolerate_the_gke_gpu_taint_the_page_names() -> None:
    (taint,) = re.findall(r"`(nvidia\.com/gpu=\w+:NoSchedule)`", text())
    key, _, rest = taint.partition("=")
    _value, _, effect = rest.partition(":")
    for profile in ("a10", "a100"):
        tolerations = runtime(profile)["spec"]["accelerator"]["tolerations"]
        assert {"key": key, "operator": "Exists", "effect": effect} in tolerations, profile


def _allocatable(vcpus: int, gib: int, max_pods: int) -> tuple[float, float]:
    """CPUs and bytes a node gives pods under EKS's bootstrap reservations: kube-reserved CPU of
    6 % of the first core, 1 % of the second, 0.5 % of the next two and 0.25 % of the rest;
    kube-reserved memory of 255 MiB + 11 MiB per pod; a 100 MiB eviction threshold; and a
    kernel that keeps about 5 % of the instance's memory for itself."""
    shares = [0.06, 0.01, 0.005, 0.005] + [0.0025] * (vcpus - 4)
    cpus = vcpus - sum(shares[:vcpus])
    memory = gib * GIB * 0.95 - (255 + 11 * max_pods) * MIB - 100 * MIB
    return cpus, memory


def _quantity(text: str) -> float:
    units = {"Gi": GIB, "Mi": MIB}
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return float(text.removesuffix(suffix)) * factor
    return float(text)


def test_the_a10_example_fits_a_g5_2xlarge_and_not_a_g5_xlarge() -> None:
    """The instance table's figures come from EKS's reservations, and the example's requests,
    with a DaemonSet margin, fit the instance the page, the example and Getting started name."""
    service = parse_llmservice(yaml.safe_load(A10_SERVICE.read_text()))
    cpu = _quantity(str(service.spec.resources.cpu))
    memory = _quantity(str(service.spec.resources.memory))
    daemonsets = (0.5, 1 * GIB)  # VPC CNI, kube-proxy, EBS CSI node, device plugin, GFD
    rows = {row[0]: row for row in table_after(PAGE, "## Instance sizes on EKS")}
    shapes = {"g5.xlarge": (4, 16), "g5.2xlarge": (8, 32)}
    fits = {}
    for name, (vcpus, gib) in shapes.items():
        row = rows[f"`{name}`"]
        assert row[1] == f"{vcpus}, {gib} GiB"
        assert row[2] == "one A10G 24 GB"
        cpus, bytes_ = _allocatable(vcpus, gib, max_pods=58)
        assert row[3] == f"{cpus:.1f} CPUs, {int(bytes_ // GIB)} GiB", (row[3], cpus, bytes_ / GIB)
        fits[name] = cpu + daemonsets[0] <= cpus and memory + daemonsets[1] <= bytes_
    assert fits == {"g5.xlarge": False, "g5.2xlarge": True}
    assert rows["`g5.xlarge`"][4].startswith("does not fit")
    assert rows["`g5.2xlarge`"][4].startswith("fits")
    header = f"`examples/nvidia/a10` ({cpu:g} CPUs, {service.spec.resources.memory})"
    assert header in PAGE.read_text(encoding="utf-8")
    comment = " ".join(A10_SERVICE.read_text().split())
    assert "Sized for an AWS g5.2xlarge (8 vCPU, 32 GiB, one A10G) or larger" in comment
    assert "about 7.9 CPUs and 29 GiB" in comment
    assert "about 3.9 CPUs and 14 GiB" in comment
    examples = " ".join((REPO / "examples" / "README.md").read_text().split())
    assert (
        f"`nvidia/a10` asks {cpu:g} CPUs and {service.spec.resources.memory}, which an AWS"
        " g5.2xlarge or larger holds and a g5.xlarge does not" in examples
    )
    started = " ".join((REPO / "docs" / "getting-started.md").read_text().split())
    assert f"it asks {cpu:g} CPUs and {service.spec.resources.memory} of memory" in started


def test_the_storage_advice_matches_the_cache_strategies_and_the_gp3_class() -> None:
    page = text()
    strategies = {s.value for s in CacheStrategy}
    for named in re.findall(r"\| `(\w+)` \(`ReadWrite\w+`\)", page):
        assert named in strategies
    assert "`NodeLocalPVC` (`ReadWriteOnce`)" in page
    assert "`SharedPVC` (`ReadWriteMany`)" in page
    caches = " ".join((REPO / "docs" / "caches.md").read_text().split())
    assert "`NodeLocalPVC` (default) | a `ReadWriteOnce` claim" in caches
    assert "`SharedPVC` | a `ReadWriteMany` claim" in caches
    snippet = REPO / "docs" / "snippets" / "eks-gp3-storageclass.yaml"
    assert f'--8<-- "{snippet.relative_to(REPO)}"' in PAGE.read_text(encoding="utf-8")
    assert f"kubectl apply -f {snippet.relative_to(REPO)}" in page
    gp3 = yaml.safe_load(snippet.read_text())
    assert gp3["kind"] == "StorageClass"
    assert gp3["provisioner"] == "ebs.csi.aws.com"
    assert "`ebs.csi.aws.com`" in page
    assert gp3["volumeBindingMode"] == "WaitForFirstConsumer"
    assert "Every class above binds with `WaitForFirstConsumer`" in page
    assert gp3["parameters"]["type"] == "gp3"
    default = "storageclass.kubernetes.io/is-default-class"
    assert gp3["metadata"]["annotations"][default] == "true"
    assert f"{gp3['metadata']['name']} (default)" in page


def test_the_a100_requests_the_pages_state_are_the_example_s() -> None:
    service = parse_llmservice(yaml.safe_load((NVIDIA / "a100" / "llmservice.yaml").read_text()))
    cpu, memory = service.spec.resources.cpu, service.spec.resources.memory
    assert f"The A100 example's service ({cpu} CPUs, {memory})" in text()
    examples = " ".join((REPO / "examples" / "README.md").read_text().split())
    assert f"`nvidia/a100` asks {cpu} CPUs and {memory}" in examples
