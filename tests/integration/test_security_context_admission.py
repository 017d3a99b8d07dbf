"""A runtime's `spec.container.securityContext`: whatever would break the baseline Pod Security
level every backend meets is refused at admission (the CRD's CEL rules, on the real API server)
and by the controller's decoding of a runtime it reads, with the same words on the same field;
what baseline allows, restricted contexts included, passes both."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from noctaya.core.api import read_inferenceruntime
from noctaya.core.errors import NoctayaError
from support.custom_resources import CustomResources, Manifest
from support.envtest.api_errors import api_status
from support.manifests import inference_runtime

pytestmark = [pytest.mark.integration, pytest.mark.kubernetes_matrix]

BASELINE = "every backend meets the baseline Pod Security level"
CONTEXT = "spec.container.securityContext"
LOCALHOST = "type Localhost needs a localhostProfile, and no other type takes one"
RESTRICTED = {
    "runAsNonRoot": True,
    "runAsUser": 65532,
    "runAsGroup": 65532,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def with_context(context: dict[str, Any]) -> Manifest:
    return inference_runtime("context-check", {"container": {"securityContext": context}})


REFUSED = [
    pytest.param(
        {"privileged": True},
        "privileged",
        f"privileged must not be true: {BASELINE}",
        id="privileged",
    ),
    pytest.param(
        {"capabilities": {"add": ["CHOWN", "NET_ADMIN"]}},
        "capabilities.add",
        "add may hold only AUDIT_WRITE, CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, MKNOD, "
        f"NET_BIND_SERVICE, SETFCAP, SETGID, SETPCAP, SETUID, SYS_CHROOT: {BASELINE}",
        id="capability-beyond-the-default-set",
    ),
    pytest.param(
        {"procMount": "Unmasked"}, "procMount", f"procMount must be Default: {BASELINE}", id="proc"
    ),
    pytest.param(
        {"seccompProfile": {"type": "Unconfined"}},
        "seccompProfile.type",
        f"type must be RuntimeDefault or Localhost: {BASELINE}",
        id="seccomp-unconfined",
    ),
    pytest.param(
        {"seccompProfile": {"type": "Localhost"}},
        "seccompProfile.type",
        LOCALHOST,
        id="seccomp-localhost-without-profile",
    ),
    pytest.param(
        {"seccompProfile": {"type": "RuntimeDefault", "localhostProfile": "p.json"}},
        "seccompProfile.type",
        LOCALHOST,
        id="seccomp-profile-without-localhost",
    ),
    pytest.param(
        {"appArmorProfile": {"type": "Unconfined"}},
        "appArmorProfile.type",
        f"type must be RuntimeDefault or Localhost: {BASELINE}",
        id="apparmor-unconfined",
    ),
    pytest.param(
        {"seLinuxOptions": {"user": "system_u"}},
        "seLinuxOptions.user",
        f"user must be empty: {BASELINE}",
        id="selinux-user",
    ),
    pytest.param(
        {"seLinuxOptions": {"role": "system_r"}},
        "seLinuxOptions.role",
        f"role must be empty: {BASELINE}",
        id="selinux-role",
    ),
    pytest.param(
        {"seLinuxOptions": {"type": "spc_t"}},
        "seLinuxOptions.type",
        f"type must be empty, container_t, container_init_t or container_kvm_t: {BASELINE}",
        id="selinux-type",
    ),
    pytest.param(
        {"windowsOptions": {"hostProcess": True}},
        "windowsOptions.hostProcess",
        f"hostProcess must not be true: {BASELINE}",
        id="windows-host-process",
    ),
]
ADMITTED = [
    pytest.param(RESTRICTED, id="restricted"),
    pytest.param({"runAsUser": 0}, id="root"),
    pytest.param(
        {"capabilities": {"add": ["NET_BIND_SERVICE", "SYS_CHROOT"]}}, id="default-capabilities"
    ),
    pytest.param(
        {
            "seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/vllm.json"},
            "appArmorProfile": {"type": "RuntimeDefault"},
            "seLinuxOptions": {"type": "container_t", "level": "s0:c1,c2"},
            "procMount": "Default",
            "privileged": False,
        },
        id="confined-profiles",
    ),
]


@pytest.mark.parametrize(("context", "field", "message"), REFUSED)
def test_what_breaks_baseline_is_refused_at_admission_and_by_the_controller_alike(
    resources: CustomResources, context: dict[str, Any], field: str, message: str
) -> None:
    manifest = with_context(context)
    with pytest.raises(ApiException) as refused:
        resources.create(manifest, dry_run=True)
    status = api_status(refused.value)
    assert refused.value.status == 422, status
    causes = status.get("details", {}).get("causes") or []
    assert any(  # the words around the rule's message differ between releases
        cause.get("field") == f"{CONTEXT}.{field}" and message in cause.get("message", "")
        for cause in causes
    ), status

    with pytest.raises(NoctayaError) as decoded:
        read_inferenceruntime(manifest)
    assert decoded.value.message == f"invalid InferenceRuntime: {CONTEXT}.{field}: {message}"


@pytest.mark.parametrize("context", ADMITTED)
def test_what_baseline_allows_passes_both(
    resources: CustomResources, context: dict[str, Any]
) -> None:
    manifest = with_context(context)
    stored = resources.create(manifest, dry_run=True)
    assert stored["spec"]["container"]["securityContext"] == context
    runtime = read_inferenceruntime(stored)
    assert runtime.spec.container.security_context is not None
    assert runtime.spec.container.security_context.to_wire() == context
