"""`noctaya-operator` as a process: it serves, reconciles with only its own RBAC, logs JSON,
stops on SIGTERM, refuses bad flags, hands leadership over (and exits 1 when it loses it), and
guards its metrics."""

from __future__ import annotations

import http.client
import re
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from noctaya.k8s.runtime import LEADER_ELECTION_ID
from scaler.certs import CertificateAuthority
from support.custom_resources import CustomResources, Manifest
from support.manifests import inference_runtime, llmservice
from support.operator_process import (
    OPERATOR,
    OperatorProcess,
    grant,
    operator_account_kubeconfig,
    poll,
    running,
    service_account_token,
)
from support.ports import free_port

pytestmark = pytest.mark.integration

CONVERGE = 60.0  # seconds; a busy 2-core machine runs other suites meanwhile
RECONCILED = "Reconciled LLMService"


@pytest.fixture
def operator_kubeconfig(
    api_client: k8s.ApiClient, kubeconfig: Path, namespace: str, tmp_path: Path
) -> Iterator[Path]:
    """A kubeconfig of the operator's ServiceAccount, bound to the generated roles only."""
    path, cleanup = operator_account_kubeconfig(
        api_client, kubeconfig, namespace, tmp_path / "operator.kubeconfig"
    )
    yield path
    cleanup()


def _serving(resources: CustomResources, runtime_name: str, namespace: str, name: str) -> Manifest:
    resources.create(llmservice(name, {"runtime": {"name": runtime_name}}), namespace)
    return llmservice(name)


def _stack_ready(
    api_client: k8s.ApiClient, resources: CustomResources, namespace: str, name: str
) -> bool:
    """The service has a status and every object of a one-gateway stack exists."""
    status = resources.get("LLMService", name, namespace).get("status") or {}
    if not status.get("phase"):
        return False
    apps, core = k8s.AppsV1Api(api_client), k8s.CoreV1Api(api_client)
    try:
        apps.read_namespaced_deployment(name, namespace)
        apps.read_namespaced_deployment(f"{name}-gateway", namespace)
        for service in (name, f"{name}-backend", f"{name}-scaler"):
            core.read_namespaced_service(service, namespace)
        resources.get("ScaledObject", name, namespace)
    except ApiException as missing:
        if missing.status == 404:
            return False
        raise
    return True


def _metric(body: str, name: str, labels: str) -> float:
    match = re.search(rf"^{re.escape(name)}{{{re.escape(labels)}}} (\S+)$", body, re.M)
    assert match, f"{name}{{{labels}}} not in metrics:\n{body[:2000]}"
    return float(match.group(1))


def _get(port: int, path: str, context: ssl.SSLContext | None = None, token: str = "") -> Any:
    connection = (
        http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
        if context
        else http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    )
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


@pytest.mark.kubernetes_matrix
def test_operator_with_only_its_rbac_reconciles_a_service_then_stops_cleanly_on_sigterm(
    api_client: k8s.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    operator_kubeconfig: Path,
    tmp_path: Path,
) -> None:
    metrics_port = free_port()
    operator = OperatorProcess(
        operator_kubeconfig,
        tmp_path / "operator.log",
        f"--metrics-bind-address=127.0.0.1:{metrics_port}",
        "--metrics-secure=false",
        "--gateway-image=registry.example/noctaya-gateway:e2e",
    )
    # The runtime exists before the operator starts, so its first list holds it: created after,
    # its watch event may reach the operator after the service's, and the first reconcile would
    # fail (and be retried) for a runtime it has not seen yet.
    resources.create(inference_runtime(runtime_name))
    with running(operator):
        operator.wait_ready()
        _serving(resources, runtime_name, namespace, "qwen")

        poll(
            lambda: _stack_ready(api_client, resources, namespace, "qwen"),
            CONVERGE,
            "the service's objects and status",
        )
        gateway = k8s.AppsV1Api(api_client).read_namespaced_deployment("qwen-gateway", namespace)
        assert gateway.spec.template.spec.containers[0].image == (
            "registry.example/noctaya-gateway:e2e"
        )
        status, body = _get(metrics_port, "/metrics")
        assert status == 200
        labels = 'controller="llmservice",result="success"'
        assert _metric(body, "controller_runtime_reconcile_total", labels) >= 1
        assert _metric(body, "workqueue_depth", 'name="llmservice"') >= 0

        code, seconds = operator.terminate()

    assert code == 0, operator.log_text()
    assert seconds < 10
    entries = operator.log_entries()
    assert all({"level", "ts", "logger", "msg"} <= entry.keys() for entry in entries)
    reconciled = [e for e in entries if e["msg"] == RECONCILED and e.get("llmservice")]
    assert f"{namespace}/qwen" in {e["llmservice"] for e in reconciled}
    # The session's cluster holds other tests' services too (some broken on purpose): judge
    # only this namespace's reconciles, and the watches, which fail if the RBAC falls short.
    failed = [e for e in entries if e["level"] == "error" and f"{namespace}/" in e["msg"]]
    watch_trouble = [
        e for e in entries if e["logger"].endswith(".informer") and e["level"] == "warning"
    ]
    assert not failed + watch_trouble, operator.log_text()
    assert [e["msg"] for e in entries][-1] == "stopped"


def test_zero_gateway_replicas_exit_1_naming_the_bound(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(OPERATOR), "--gateway-replicas=0", f"--kubeconfig={tmp_path / 'unused'}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "gateway replicas must be at least 1" in result.stderr


def test_an_unusable_kubeconfig_exits_1_naming_the_problem(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(OPERATOR), f"--kubeconfig={tmp_path / 'absent'}", "--zap-devel=false"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "invalid Kubernetes client configuration" in result.stderr
    assert "Traceback" not in result.stderr


def _lease_holder(api_client: k8s.ApiClient, namespace: str) -> str:
    try:
        lease = k8s.CoordinationV1Api(api_client).read_namespaced_lease(
            LEADER_ELECTION_ID, namespace
        )
    except ApiException as error:
        if error.status == 404:
            return ""
        raise
    return str(lease.spec.holder_identity or "")


def _identity(operator: OperatorProcess) -> str:
    prefix = "waiting for leadership as "
    return str(
        poll(
            lambda: next(
                (m[len(prefix) :] for m in operator.messages() if m.startswith(prefix)), ""
            ),
            CONVERGE,
            "the candidate's identity in its log",
        )
    )


def test_leader_election_one_process_reconciles_and_a_sigterm_hands_over_at_once(
    api_client: k8s.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    operator_kubeconfig: Path,
    tmp_path: Path,
) -> None:
    first, second = (
        OperatorProcess(
            operator_kubeconfig,
            tmp_path / f"operator-{n}.log",
            "--leader-elect=true",
            namespace=namespace,
        )
        for n in (1, 2)
    )
    with running(first, second):
        first.wait_ready()
        second.wait_ready()
        by_identity = {_identity(first): first, _identity(second): second}
        holder = poll(
            lambda: _lease_holder(api_client, namespace), CONVERGE, "a leader in the Lease"
        )
        leader = by_identity[holder]
        standby = second if leader is first else first
        resources.create(inference_runtime(runtime_name))
        _serving(resources, runtime_name, namespace, "before")
        poll(
            lambda: _stack_ready(api_client, resources, namespace, "before"),
            CONVERGE,
            "the leader to reconcile",
        )
        assert RECONCILED not in standby.messages()
        assert _lease_holder(api_client, namespace) == holder

        code, _ = leader.terminate()
        released = time.monotonic()
        new_holder = poll(
            lambda: (h := _lease_holder(api_client, namespace)) not in ("", holder) and h,
            CONVERGE,
            "the standby to take the Lease",
        )
        takeover = time.monotonic() - released
        _serving(resources, runtime_name, namespace, "after")
        poll(
            lambda: _stack_ready(api_client, resources, namespace, "after"),
            CONVERGE,
            "the new leader to reconcile",
        )

    assert code == 0, leader.log_text()
    assert by_identity[new_holder] is standby
    assert takeover < 12, f"took {takeover:.1f}s: the Lease was not released on SIGTERM"
    assert f"{holder} released lease {namespace}/{LEADER_ELECTION_ID}" in leader.messages()
    events = k8s.CoreV1Api(api_client).list_namespaced_event(namespace).items
    became = {e.message for e in events if e.reason == "LeaderElection"}
    assert {f"{holder} became leader", f"{new_holder} became leader"} <= became


def _steal_lease(api_client: k8s.ApiClient, namespace: str) -> None:
    """Another candidate writes itself into the Lease for a minute, as after a network split."""
    leases = k8s.CoordinationV1Api(api_client)
    lease = leases.read_namespaced_lease(LEADER_ELECTION_ID, namespace)
    lease.spec.holder_identity = "usurper"
    lease.spec.lease_duration_seconds = 60
    lease.spec.renew_time = datetime.now(UTC)
    leases.replace_namespaced_lease(LEADER_ELECTION_ID, namespace, lease)


def test_a_leader_that_loses_its_lease_stops_reconciling_and_exits_1(
    api_client: k8s.ApiClient, namespace: str, operator_kubeconfig: Path, tmp_path: Path
) -> None:
    operator = OperatorProcess(
        operator_kubeconfig, tmp_path / "operator.log", "--leader-elect=true", namespace=namespace
    )
    with running(operator):
        operator.wait_ready()
        identity = _identity(operator)
        poll(lambda: _lease_holder(api_client, namespace) == identity, CONVERGE, "leadership")
        _steal_lease(api_client, namespace)
        assert operator.process is not None
        code = operator.process.wait(CONVERGE)  # the renew deadline is 10 s

    assert code == 1
    assert "leader election lost" in operator.messages()
    assert _lease_holder(api_client, namespace) == "usurper"


@pytest.fixture
def metrics_certificate(tmp_path: Path) -> tuple[Path, ssl.SSLContext]:
    """A serving certificate directory for the operator, and a client context trusting it."""
    authority = CertificateAuthority("metrics-ca")
    directory = tmp_path / "metrics-certs"
    directory.mkdir()
    identity = authority.issue("localhost", dns=("localhost",), server=True)
    (directory / "tls.crt").write_bytes(identity.cert_pem)
    (directory / "tls.key").write_bytes(identity.key_pem)
    context = ssl.create_default_context(cadata=authority.cert_pem.decode())
    context.check_hostname = False  # issued for localhost; the test dials 127.0.0.1
    return directory, context


def _scraper(
    api_client: k8s.ApiClient, namespace: str, name: str, reader_role: str | None
) -> tuple[str, Callable[[], None]]:
    """A ServiceAccount token, optionally bound to the metrics-reader ClusterRole."""
    objects: list[dict[str, Any]] = [
        {"kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}}
    ]
    if reader_role:
        objects.append(
            {
                "kind": "ClusterRoleBinding",
                "metadata": {"name": f"{namespace}-{name}"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": reader_role,
                },
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
            }
        )
    cleanup = grant(api_client, objects)
    return service_account_token(api_client, namespace, name), cleanup


def _reviews(api_client: k8s.ApiClient) -> dict[str, float]:
    """TokenReviews and SubjectAccessReviews the API server has answered so far."""
    response = api_client.rest_client.request("GET", f"{api_client.configuration.host}/metrics")
    body = response.read().decode()
    counts = dict.fromkeys(("tokenreviews", "subjectaccessreviews"), 0.0)
    for resource, value in re.findall(
        r'^apiserver_request_total{[^}]*resource="(\w+)"[^}]*} (\S+)$', body, re.M
    ):
        if resource in counts:
            counts[resource] += float(value)
    return counts


def test_secure_metrics_answer_only_allowed_scrapers_and_ask_the_api_server_once_per_token(
    api_client: k8s.ApiClient,
    namespace: str,
    operator_kubeconfig: Path,
    metrics_certificate: tuple[Path, ssl.SSLContext],
    tmp_path: Path,
) -> None:
    cert_dir, client_tls = metrics_certificate
    reader, unbind_reader = _scraper(
        api_client, namespace, "prometheus", f"noctaya-metrics-reader-{namespace}"
    )
    stranger, unbind_stranger = _scraper(api_client, namespace, "stranger", None)
    metrics_port = free_port()
    operator = OperatorProcess(
        operator_kubeconfig,
        tmp_path / "operator.log",
        f"--metrics-bind-address=127.0.0.1:{metrics_port}",
        f"--metrics-cert-path={cert_dir}",
    )
    try:
        with running(operator):
            operator.wait_ready()
            allowed = poll(
                lambda: (r := _get(metrics_port, "/metrics", client_tls, reader))[0] == 200 and r,
                CONVERGE,
                "the reader's scrape to be allowed",
            )
            anonymous = _get(metrics_port, "/metrics", client_tls)
            refused = _get(metrics_port, "/metrics", client_tls, stranger)
            bogus = _get(metrics_port, "/metrics", client_tls, "not-a-token")
            before = _reviews(api_client)
            again = [
                _get(metrics_port, "/metrics", client_tls, token)[0]
                for token in (reader, stranger, "not-a-token")
                for _ in range(5)
            ]
            asked = {name: n - before[name] for name, n in _reviews(api_client).items()}
            code, _ = operator.terminate()
    finally:
        unbind_reader()
        unbind_stranger()

    assert anonymous == (401, "Unauthorized\n")
    assert bogus == (401, "Unauthorized\n")
    assert refused == (403, "Forbidden\n")
    assert "controller_runtime_reconcile_total" in allowed[1]
    # Decisions are remembered for a while: repeated scrapes cost the API server nothing.
    assert again == [200] * 5 + [403] * 5 + [401] * 5
    assert asked == {"tokenreviews": 0, "subjectaccessreviews": 0}
    assert code == 0


def _served_certificate(port: int, trust: ssl.SSLContext) -> bytes:
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        trust.wrap_socket(raw) as tls,
    ):
        certificate = tls.getpeercert(binary_form=True)
    assert certificate is not None
    return certificate


def test_secure_metrics_without_a_certificate_are_served_with_a_generated_one(
    operator_kubeconfig: Path, tmp_path: Path
) -> None:
    metrics_port = free_port()
    operator = OperatorProcess(
        operator_kubeconfig,
        tmp_path / "operator.log",
        f"--metrics-bind-address=127.0.0.1:{metrics_port}",  # --metrics-secure is true by default
    )
    unverified = ssl.create_default_context()
    unverified.check_hostname = False
    unverified.verify_mode = ssl.CERT_NONE
    with running(operator):
        operator.wait_ready()
        anonymous = _get(metrics_port, "/metrics", unverified)
        served = x509.load_der_x509_certificate(_served_certificate(metrics_port, unverified))
        code, _ = operator.terminate()

    assert anonymous == (401, "Unauthorized\n")  # over TLS, behind the access review
    assert served.issuer == served.subject
    assert any("self-signed certificate generated at start-up" in m for m in operator.messages())
    assert code == 0, operator.log_text()


def test_a_rotated_metrics_certificate_is_served_without_a_restart(
    operator_kubeconfig: Path, tmp_path: Path
) -> None:
    authority = CertificateAuthority("metrics-ca")
    cert_dir = tmp_path / "metrics-certs"
    cert_dir.mkdir()
    authority.issue("before", server=True).write(cert_dir, "tls")
    trust = ssl.create_default_context(cadata=authority.cert_pem.decode())
    trust.check_hostname = False
    metrics_port = free_port()
    operator = OperatorProcess(
        operator_kubeconfig,
        tmp_path / "operator.log",
        f"--metrics-bind-address=127.0.0.1:{metrics_port}",
        f"--metrics-cert-path={cert_dir}",
    )
    with running(operator):
        operator.wait_ready()
        before = _served_certificate(metrics_port, trust)
        authority.issue("after", server=True).write(cert_dir, "tls")
        after = poll(
            lambda: (c := _served_certificate(metrics_port, trust)) != before and c,
            CONVERGE,
            "the rotated certificate to be served",
        )
        code, _ = operator.terminate()

    common_name = x509.load_der_x509_certificate(after).subject.rfc4514_string()
    assert common_name == "CN=after"
    assert code == 0, operator.log_text()
