"""etcd plus kube-apiserver on loopback ports, with throwaway credentials.

Flags switch off what a test API server does not need (priority-and-fairness, the endpoint
reconciler, the ServiceAccount admission plugin, fsync in etcd) because start-up time is paid
by every test run. RBAC stays on (about a second of role bootstrapping) so that tests can check
what a restricted identity may do. A bounded watch-termination grace period makes SIGTERM close
open watches at once; without it the server waits on them until it is killed.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import ssl
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from ..ports import free_port
from .binaries import Binaries
from .pki import Pki, write_pki
from .processes import ManagedProcess, is_running

SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/16"
"""Room for the ClusterIPs of one session (three Services per LLMService; a /24 ran out) and of
the operator benchmark's 1,000 services. Only allocated in etcd: nothing routes to it."""
WORKDIR_PREFIX = "noctaya-control-plane-"
OWNER_FILE = "owner.pid"
_PORT_ATTEMPTS = 3
_POLL_SECONDS = 0.05


class ControlPlaneError(Exception):
    """The control plane could not be started; the message carries the relevant log tail."""


class _PortTaken(ControlPlaneError):
    """Another process took a port between probing and binding it."""


def _retry_if_port_taken(start: Callable[[], None]) -> None:
    """Runs `start` again, a bounded number of times, when a racing process took its port."""
    for attempt in range(_PORT_ATTEMPTS):
        try:
            start()
            return
        except _PortTaken:
            if attempt == _PORT_ATTEMPTS - 1:
                raise


def sweep_abandoned_workdirs() -> None:
    """Deletes work dirs of test processes killed outright (SIGKILL, a CI timeout).

    Their etcd and kube-apiserver died with them (parent-death signal), but no one was left to
    delete the files; a live owner's dir is never touched, so concurrent sessions are safe.
    """
    for folder in Path(tempfile.gettempdir()).glob(f"{WORKDIR_PREFIX}*"):
        try:
            owner = int((folder / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue  # still being created, or not one of ours
        if not is_running(owner):
            shutil.rmtree(folder, ignore_errors=True)


class ControlPlane:
    """A running etcd and kube-apiserver; `start()` then `stop()` (idempotent)."""

    def __init__(
        self,
        binaries: Binaries,
        *,
        log_dir: Path | None = None,  # default: inside the throwaway work dir
        ready_timeout: float = 120.0,
    ) -> None:
        self._binaries = binaries
        self._ready_timeout = ready_timeout
        sweep_abandoned_workdirs()
        self.workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
        (self.workdir / OWNER_FILE).write_text(str(os.getpid()))
        self.log_dir = log_dir or self.workdir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.kubeconfig = self.workdir / "kubeconfig"
        self.startup_seconds: dict[str, float] = {}  # what -> seconds, for the run summary
        self._pki: Pki | None = None
        self._etcd: ManagedProcess | None = None
        self._apiserver: ManagedProcess | None = None
        self._api_client: k8s_client.ApiClient | None = None
        self._admin_tls: ssl.SSLContext | None = None
        self.secure_port = 0
        self._started = 0.0
        self.etcd_url = ""
        atexit.register(self.stop)

    @property
    def host(self) -> str:
        return f"https://127.0.0.1:{self.secure_port}"

    @property
    def api_client(self) -> k8s_client.ApiClient:
        if self._api_client is None:
            raise ControlPlaneError("control plane is not started")
        return self._api_client

    def start(self) -> None:
        """Boots etcd and kube-apiserver side by side: the API server's own boot hides etcd's."""
        self._started = time.monotonic()
        self._pki = write_pki(self.workdir / "pki")
        _retry_if_port_taken(self._start_processes)
        self._write_kubeconfig()
        self._api_client = k8s_config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(self.kubeconfig), persist_config=False
        )

    def stop(self) -> None:
        if self._api_client is not None:
            self._api_client.close()  # type: ignore[no-untyped-call]
            self._api_client = None
        for process in (self._apiserver, self._etcd):
            if process is not None:
                process.stop()
        self._apiserver = self._etcd = None
        shutil.rmtree(self.workdir, ignore_errors=True)
        atexit.unregister(self.stop)

    def restart_apiserver(self) -> float:
        """Stops kube-apiserver and starts it again on the same port with the same etcd.

        Open watches break, as they do when a real API server is rolled. Returns the seconds
        until the new process was ready.
        """
        started = time.monotonic()
        self.stop_apiserver()
        self.start_apiserver()
        return time.monotonic() - started

    def stop_apiserver(self) -> None:
        if self._apiserver is not None:
            self._apiserver.stop()

    def start_apiserver(self) -> None:
        process = self._apiserver_process()
        process.start()
        self._wait_ready(process, self._apiserver_ready)

    def process_ids(self) -> dict[str, int]:
        return {p.name: p.pid for p in (self._etcd, self._apiserver) if p and p.pid}

    def log_tails(self, lines: int = 40) -> dict[str, str]:
        return {p.name: p.log_tail(lines) for p in (self._etcd, self._apiserver) if p}

    def _start_processes(self) -> None:
        etcd = self._etcd_process(client_port=free_port(), peer_port=free_port())
        etcd.start()
        self.secure_port = free_port()
        apiserver = self._apiserver_process()
        apiserver.start()
        try:
            self._wait_ready(etcd, self._etcd_ready)
            self.startup_seconds["etcd ready at"] = time.monotonic() - self._started
            self._wait_ready(apiserver, self._apiserver_ready)
            self.startup_seconds["kube-apiserver ready at"] = time.monotonic() - self._started
        except ControlPlaneError:
            apiserver.stop()
            etcd.stop()
            raise

    def _etcd_process(self, client_port: int, peer_port: int) -> ManagedProcess:
        self.etcd_url = f"http://127.0.0.1:{client_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        self._etcd = ManagedProcess(
            "etcd",
            [
                str(self._binaries.etcd),
                "--name=noctaya-test",
                f"--data-dir={self.workdir / f'etcd-{client_port}'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=noctaya-test={peer_url}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
            self.log_dir / "etcd.log",
        )
        return self._etcd

    def _apiserver_process(self) -> ManagedProcess:
        pki = self._require_pki()
        self._apiserver = ManagedProcess(
            "kube-apiserver",
            [
                str(self._binaries.kube_apiserver),
                f"--etcd-servers={self.etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.secure_port}",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                f"--tls-cert-file={pki.serving_cert}",
                f"--tls-private-key-file={pki.serving_key}",
                f"--client-ca-file={pki.ca_cert}",
                f"--service-account-issuer={self.host}",
                f"--service-account-key-file={pki.service_account_public_key}",
                f"--service-account-signing-key-file={pki.service_account_key}",
                f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
                "--authorization-mode=RBAC",
                "--disable-admission-plugins=ServiceAccount",
                "--enable-priority-and-fairness=false",
                "--endpoint-reconciler-type=none",
                "--allow-privileged=true",
                "--profiling=false",
                "--shutdown-watch-termination-grace-period=2s",
            ],
            self.log_dir / "kube-apiserver.log",
        )
        return self._apiserver

    def _wait_ready(self, process: ManagedProcess, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self._ready_timeout
        while time.monotonic() < deadline:
            if not process.running:
                tail = process.log_tail()
                code = process.exit_code
                process.stop()
                error = _PortTaken if "address already in use" in tail else ControlPlaneError
                raise error(
                    f"{process.name} exited with code {code} before it was ready; "
                    f"log tail ({process.log_path}):\n{tail}"
                )
            if ready():
                return
            time.sleep(_POLL_SECONDS)
        tail = process.log_tail()
        process.stop()
        raise ControlPlaneError(
            f"{process.name} not ready within {self._ready_timeout:.0f}s; log tail:\n{tail}"
        )

    def _etcd_ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.etcd_url}/health", timeout=2) as response:
                return bool(json.load(response).get("health") == "true")
        except (OSError, ValueError):
            return False

    def _apiserver_ready(self) -> bool:
        if self._admin_tls is None:
            pki = self._require_pki()
            self._admin_tls = ssl.create_default_context(cafile=str(pki.ca_cert))
            self._admin_tls.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
        try:
            with urllib.request.urlopen(
                f"{self.host}/readyz", timeout=2, context=self._admin_tls
            ) as response:
                return bool(response.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def _write_kubeconfig(self) -> None:
        pki = self._require_pki()
        self.kubeconfig.write_text(yaml.safe_dump(pki.admin_kubeconfig("noctaya-test", self.host)))

    def _require_pki(self) -> Pki:
        if self._pki is None:
            raise ControlPlaneError("control plane is not started")
        return self._pki
