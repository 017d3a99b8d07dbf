"""The test control plane itself: a real, admin-reachable API server that tests can rely on."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

import pytest
import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from support.envtest import ControlPlane
from support.envtest.binaries import kubernetes_version
from support.envtest.crds import established

pytestmark = pytest.mark.integration


def _named(name: str) -> k8s_client.V1ObjectMeta:
    return k8s_client.V1ObjectMeta(name=name)


@pytest.mark.kubernetes_matrix
def test_api_server_runs_the_release_the_session_asked_for(
    api_client: k8s_client.ApiClient,
) -> None:
    """The pinned release, or the matrix release a `make matrix` run names."""
    assert k8s_client.VersionApi(api_client).get_code().git_version == kubernetes_version()


def test_kubeconfig_authenticates_as_a_cluster_admin(kubeconfig: Path) -> None:
    client = k8s_config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(kubeconfig), persist_config=False
    )
    try:
        review = k8s_client.AuthenticationV1Api(client).create_self_subject_review(
            k8s_client.V1SelfSubjectReview()
        )
    finally:
        client.close()
    assert review.status
    assert review.status.user_info
    assert "system:masters" in (review.status.user_info.groups or [])


def test_namespace_fixture_gives_the_test_its_own_active_namespace(
    api_client: k8s_client.ApiClient, namespace: str
) -> None:
    found = k8s_client.CoreV1Api(api_client).read_namespace(namespace)
    assert found.status
    assert found.status.phase == "Active"
    assert namespace.startswith("test-namespace-fixture-gives")


@pytest.mark.parametrize(
    "crd",
    [
        "scaledobjects.keda.sh",
        "triggerauthentications.keda.sh",
        "clustertriggerauthentications.keda.sh",
    ],
)
def test_keda_crds_are_installed_and_established(
    api_client: k8s_client.ApiClient, crd: str
) -> None:
    assert established(api_client, crd)


def test_process_logs_are_kept_for_failure_reports(control_plane: ControlPlane) -> None:
    tails = control_plane.log_tails(lines=5)
    assert set(tails) == {"etcd", "kube-apiserver"}
    assert all(tail.strip() for tail in tails.values())


def test_apiserver_restart_breaks_open_watches_and_keeps_stored_objects(
    control_plane: ControlPlane, api_client: k8s_client.ApiClient, namespace: str
) -> None:
    core = k8s_client.CoreV1Api(api_client)
    core.create_namespaced_config_map(
        namespace, k8s_client.V1ConfigMap(metadata=_named("survivor"), data={"k": "v"})
    )
    stream = core.list_namespaced_config_map(
        namespace, watch=True, timeout_seconds=120, _preload_content=False
    )
    watch_ended = threading.Event()

    def drain() -> None:
        # A stream cut by a stopping server ends either cleanly or with a protocol error.
        with contextlib.suppress(urllib3.exceptions.HTTPError):
            for _event in stream:
                pass
        watch_ended.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    assert not watch_ended.wait(timeout=0.5), "watch ended before the restart"

    control_plane.restart_apiserver()

    assert watch_ended.wait(timeout=30), "watch survived an API-server restart"
    survivor = core.read_namespaced_config_map("survivor", namespace)
    assert survivor.data == {"k": "v"}


def test_objects_are_validated_by_the_real_server(
    api_client: k8s_client.ApiClient, namespace: str
) -> None:
    with pytest.raises(ApiException) as rejected:
        k8s_client.CoreV1Api(api_client).create_namespaced_config_map(
            namespace, k8s_client.V1ConfigMap(metadata=_named("Not_A_DNS_Name"))
        )
    assert rejected.value.status == 422
