"""`noctaya-operator` as a real process for tests, running as its generated RBAC allows.

`operator_kubeconfig` creates the objects of `noctaya rbac` for a test namespace (cluster-wide
names get a suffix, so tests do not collide) and writes a kubeconfig holding a token of the
operator's ServiceAccount: what the operator may do in a test is what it may do in a cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from noctaya.k8s.rbac import SERVICE_ACCOUNT, rbac_manifests

from .ports import free_port

OPERATOR = Path(sys.executable).with_name("noctaya-operator")
_POLL = 0.1


def poll(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    """The first truthy `condition()` within `timeout` seconds; fails naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(_POLL)


class OperatorProcess:
    """One operator process with JSON logs in a file and its probes on a free loopback port."""

    def __init__(
        self, kubeconfig: Path, log_path: Path, *flags: str, namespace: str | None = None
    ) -> None:
        self.health_port = free_port()
        self.log_path = log_path
        self.argv = [
            str(OPERATOR),
            f"--kubeconfig={kubeconfig}",
            f"--health-probe-bind-address=127.0.0.1:{self.health_port}",
            "--zap-devel=false",
            *flags,
        ]
        self._env = {**os.environ, "POD_NAMESPACE": namespace} if namespace else dict(os.environ)
        self._env.pop("KUBERNETES_SERVICE_HOST", None)
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> OperatorProcess:
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, env=self._env
            )
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def wait_ready(self, timeout: float = 60.0) -> None:
        def ready() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(
                    f"operator exited with {self.process.returncode}:\n{self.log_text()}"
                )
            try:
                url = f"http://127.0.0.1:{self.health_port}/readyz"
                with urllib.request.urlopen(url, timeout=2) as response:
                    return bool(response.status == 200)
            except OSError:
                return False

        poll(ready, timeout, f"/readyz of {self.argv}")

    def terminate(self, timeout: float = 15.0) -> tuple[int, float]:
        """SIGTERM; returns the exit code and the seconds until the process was gone."""
        assert self.process is not None
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout)
        return code, time.monotonic() - started

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def log_entries(self) -> list[dict[str, Any]]:
        """Every log line as a JSON object; a line that is not one fails the test."""
        entries = []
        for number, line in enumerate(self.log_text().splitlines(), 1):
            try:
                entry = json.loads(line)
            except ValueError as error:
                raise AssertionError(f"log line {number} is not JSON: {line!r}") from error
            assert isinstance(entry, dict), f"log line {number} is not an object: {line!r}"
            entries.append(entry)
        return entries

    def messages(self) -> list[str]:
        return [str(entry.get("msg")) for entry in self.log_entries()]


_LOG_TAIL_LINES = 40


@contextlib.contextmanager
def running(*operators: OperatorProcess) -> Iterator[tuple[OperatorProcess, ...]]:
    """Start the operators; whatever happens, none outlives the block.

    A failing block prints each operator's last log lines: a timeout alone says nothing of why.
    """
    try:
        for operator in operators:
            operator.start()
        yield operators
    except BaseException:
        for operator in operators:
            if operator.log_path.exists():
                tail = operator.log_text().splitlines()[-_LOG_TAIL_LINES:]
                print(f"---- {operator.log_path.name}, last lines ----", *tail, sep="\n")
        raise
    finally:
        for operator in operators:
            operator.kill()


def _suffixed(obj: dict[str, Any], namespace: str, suffix: str) -> dict[str, Any]:
    meta = obj["metadata"]
    if "namespace" in meta:
        meta["namespace"] = namespace
    else:
        meta["name"] = f"{meta['name']}-{suffix}"
    ref = obj.get("roleRef")
    if ref and ref["kind"] == "ClusterRole":
        ref["name"] = f"{ref['name']}-{suffix}"
    for subject in obj.get("subjects", []):
        subject["namespace"] = namespace
    return obj


def _create(api_client: k8s.ApiClient, obj: dict[str, Any]) -> Callable[[], None]:
    """Create one RBAC or core object; return how to delete it."""
    rbac, core = k8s.RbacAuthorizationV1Api(api_client), k8s.CoreV1Api(api_client)
    kind, name, namespace = obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace")
    calls: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
        "ServiceAccount": (
            core.create_namespaced_service_account,
            core.delete_namespaced_service_account,
        ),
        "Role": (rbac.create_namespaced_role, rbac.delete_namespaced_role),
        "RoleBinding": (rbac.create_namespaced_role_binding, rbac.delete_namespaced_role_binding),
        "ClusterRole": (rbac.create_cluster_role, rbac.delete_cluster_role),
        "ClusterRoleBinding": (rbac.create_cluster_role_binding, rbac.delete_cluster_role_binding),
    }
    create, delete = calls[kind]
    if namespace:
        create(namespace, obj)
        return lambda: delete(name, namespace)
    create(obj)
    return lambda: delete(name)


def grant(api_client: k8s.ApiClient, objects: list[dict[str, Any]]) -> Callable[[], None]:
    """Create the objects in order; return a cleanup that deletes them, ignoring the gone."""
    cleanups = [_create(api_client, obj) for obj in objects]

    def cleanup() -> None:
        for delete in reversed(cleanups):
            with contextlib.suppress(ApiException):
                delete()

    return cleanup


def generated_rbac(namespace: str, suffix: str) -> list[dict[str, Any]]:
    """The objects of `noctaya rbac`, placed in `namespace`, cluster-scoped names suffixed."""
    return [_suffixed(obj, namespace, suffix) for obj in rbac_manifests().values()]


def service_account_token(api_client: k8s.ApiClient, namespace: str, account: str) -> str:
    request = k8s.AuthenticationV1TokenRequest(
        spec=k8s.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
    )
    response = k8s.CoreV1Api(api_client).create_namespaced_service_account_token(
        account, namespace, request
    )
    return str(response.status.token)


def token_kubeconfig(admin_kubeconfig: Path, token: str, path: Path) -> Path:
    """The admin kubeconfig's cluster, with `token` as the only credential."""
    config = yaml.safe_load(admin_kubeconfig.read_text())
    for user in config["users"]:
        user["user"] = {"token": token}
    path.write_text(yaml.safe_dump(config))
    return path


def operator_account_kubeconfig(
    api_client: k8s.ApiClient, admin_kubeconfig: Path, namespace: str, path: Path
) -> tuple[Path, Callable[[], None]]:
    """Grant the generated RBAC in `namespace`; a kubeconfig of the operator's account."""
    cleanup = grant(api_client, generated_rbac(namespace, namespace))
    token = service_account_token(api_client, namespace, SERVICE_ACCOUNT)
    return token_kubeconfig(admin_kubeconfig, token, path), cleanup
