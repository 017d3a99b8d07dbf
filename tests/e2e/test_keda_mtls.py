"""KEDA reaches the scaler over mutual TLS, as the security page tells users to set it up: the
service's own server certificate in `tls.serverSecretName`, KEDA's client certificate in a
`TriggerAuthentication` or a `ClusterTriggerAuthentication`. A cold request wakes the backend
through that stream; a client certificate of another CA is refused by the scaler, and the service
says so in `AutoscalingReady` with KEDA's own words, until the right one is named again.

The certificates are made here and handed over in Secrets only: nothing prints them."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s_client
from scaler.certs import CertificateAuthority, Identity
from support.custom_resources import CustomResources

from .serving import SERVICE_NAME, diagnosed, example, status, stream_chat, wait_idle
from .workloads import create, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
SERVICE = SERVICE_NAME
SERVER_SECRET = f"{SERVICE}-scaler-tls"
KEDA_NAMESPACE = "keda"
"""Where the box installs KEDA (its config's own namespace), which is also where KEDA reads a
ClusterTriggerAuthentication's Secrets: its cluster-object namespace defaults to its own."""
_AUTH_PARAMETERS = {"caCert": "ca.crt", "tlsClientCert": "tls.crt", "tlsClientKey": "tls.key"}


@pytest.mark.parametrize("kind", ["TriggerAuthentication", "ClusterTriggerAuthentication"])
def test_keda_wakes_the_backend_over_mtls_and_a_foreign_client_certificate_is_reported(
    api_client: k8s_client.ApiClient, namespace: str, installed: None, gpus: None, kind: str
) -> None:
    server_ca, client_ca = CertificateAuthority("scaler CA"), CertificateAuthority("KEDA CA")
    foreign_ca = CertificateAuthority("another CA")
    host = f"{SERVICE}-scaler.{namespace}.svc"
    server = server_ca.issue(host, dns=(host,), server=True)
    _secret(api_client, namespace, SERVER_SECRET, server, client_ca.cert_pem)
    with contextlib.ExitStack() as cleanup, diagnosed(api_client, namespace):
        trusted = cleanup.enter_context(
            _keda_authentication(api_client, kind, namespace, "keda", client_ca, server_ca)
        )
        foreign = cleanup.enter_context(
            _keda_authentication(api_client, kind, namespace, "foreign", foreign_ca, server_ca)
        )
        _, service = example(scaling={"externalScaler": {"tls": _tls(trusted, kind)}})
        CustomResources(api_client).create(service, namespace)
        wait_idle(api_client, namespace)
        _wait_autoscaling_ready(api_client, namespace)

        lines = [chunk.line for chunk in stream_chat(api_client, namespace, SERVICE)]
        assert b"data: [DONE]" in lines, lines
        assert any(line.startswith(b"data: {") for line in lines), lines

        _use(api_client, namespace, _tls(foreign, kind))
        keda_said, we_said = wait_for(
            "AutoscalingReady=False quoting KEDA's Ready=False on the ScaledObject",
            lambda: _keda_objection_quoted(api_client, namespace),
            timeout=180,
        )
        assert we_said["reason"] == "ScaledObjectNotReady", we_said
        print(f"KEDA: {keda_said['reason']}: {keda_said['message']}")

        _use(api_client, namespace, _tls(trusted, kind))
        _wait_autoscaling_ready(api_client, namespace)


def _tls(authentication: str, kind: str) -> dict[str, Any]:
    return {
        "serverSecretName": SERVER_SECRET,
        "authenticationRef": {"name": authentication, "kind": kind},
    }


def _use(api_client: k8s_client.ApiClient, namespace: str, tls: dict[str, Any]) -> None:
    """Points the service at other KEDA credentials: the ScaledObject's trigger changes, and KEDA
    builds its scaler again, dialling with them."""
    k8s_client.CustomObjectsApi(api_client).patch_namespaced_custom_object(
        "serving.noctaya.io", "v1alpha1", namespace, "llmservices", SERVICE,
        {"spec": {"scaling": {"externalScaler": {"tls": tls}}}},
    )  # fmt: skip


@contextlib.contextmanager
def _keda_authentication(
    api_client: k8s_client.ApiClient,
    kind: str,
    namespace: str,
    name: str,
    ca: CertificateAuthority,
    server_ca: CertificateAuthority,
) -> Iterator[str]:
    """A KEDA client certificate that `ca` signs, with the CA that KEDA checks the scaler's
    certificate against, in a Secret and the `kind` of authentication object that hands both to
    KEDA; yields the object's name. A ClusterTriggerAuthentication and its
    Secret outlive the test's namespace, so they carry its name and are deleted here."""
    cluster_wide = kind == "ClusterTriggerAuthentication"
    if cluster_wide:
        name = f"{namespace}-{name}"
    where = KEDA_NAMESPACE if cluster_wide else namespace
    identity = ca.issue(f"keda-{secrets.token_hex(3)}", server=False)
    _secret(api_client, where, name, identity, server_ca.cert_pem)
    resources = CustomResources(api_client)
    try:
        targets = [
            {"parameter": parameter, "name": name, "key": key}
            for parameter, key in _AUTH_PARAMETERS.items()
        ]
        manifest = {
            "apiVersion": "keda.sh/v1alpha1",
            "kind": kind,
            "metadata": {"name": name},
            "spec": {"secretTargetRef": targets},
        }
        resources.create(manifest, None if cluster_wide else namespace)
        try:
            yield name
        finally:
            if cluster_wide:
                resources.delete(kind, name)
    finally:
        if cluster_wide:
            k8s_client.CoreV1Api(api_client).delete_namespaced_secret(name, where)


def _secret(
    api_client: k8s_client.ApiClient, namespace: str, name: str, identity: Identity, ca_pem: bytes
) -> None:
    """A Secret of the layout both ends read: `tls.crt`, `tls.key` and the peer's `ca.crt`."""
    data = {"tls.crt": identity.cert_pem, "tls.key": identity.key_pem, "ca.crt": ca_pem}
    manifest = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "stringData": {key: value.decode() for key, value in data.items()},
    }
    create(api_client, manifest, namespace)


def _wait_autoscaling_ready(api_client: k8s_client.ApiClient, namespace: str) -> None:
    """AutoscalingReady=True: KEDA has built the scaler and raises no objection. It may object
    for a while first, while the scaler it dials has no pod yet."""

    def ready() -> bool:
        found = _condition(status(api_client, namespace, SERVICE), "AutoscalingReady")
        return found.get("status") == "True" and found.get("reason") == "ScaledObjectApplied"

    wait_for("AutoscalingReady=True", ready, timeout=180)


def _keda_objection_quoted(
    api_client: k8s_client.ApiClient, namespace: str
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(KEDA's Ready condition, the service's AutoscalingReady) once both are False and the
    service's message quotes KEDA's as KEDA has it now."""
    scaled = CustomResources(api_client).get("ScaledObject", SERVICE, namespace)
    keda = _condition(scaled.get("status") or {}, "Ready")
    ours = _condition(status(api_client, namespace, SERVICE), "AutoscalingReady")
    if keda.get("status") != "False" or ours.get("status") != "False":
        return None
    message = str(keda.get("message") or "")
    return (keda, ours) if message and message in str(ours.get("message")) else None


def _condition(found: dict[str, Any], kind: str) -> dict[str, Any]:
    """The condition `kind` of an object's status, as written; {} while there is none."""
    return next((c for c in found.get("conditions") or [] if c["type"] == kind), {})
