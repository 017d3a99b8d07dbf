"""pytest plugin: one real control plane per session, its client, kubeconfig and namespaces.

Policy: a test that needs the API server requests one of these fixtures and carries
`@pytest.mark.integration` (added here if forgotten, so `-m "not integration"` stays honest).
Missing binaries or KEDA CRDs skip locally but fail under CI=true: CI must never turn green by
skipping.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import threading
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from types import FrameType

import pytest
from kubernetes import client as k8s_client

from .envtest import Binaries, ControlPlane, install_crds, locate_binaries
from .envtest.crds import crd_manifests
from .envtest.keda_crds import locate_keda_crds
from .envtest.prerequisites import REPO_ROOT, required

PROJECT_CRDS = REPO_ROOT / "config" / "crd" / "bases"
LOG_DIR_ENV = "NOCTAYA_CONTROL_PLANE_LOG_DIR"
_NEEDS_BINARIES = "control_plane_binaries"
_FIXTURE = "control_plane"
_PLANE = pytest.StashKey[ControlPlane]()


@pytest.fixture(scope="session")
def control_plane_binaries() -> Binaries:
    """The built etcd and kube-apiserver; skips locally, fails under CI=true, when missing."""
    return required(locate_binaries)


@pytest.fixture(scope="session")
def keda_crds() -> Path:
    """The folder of KEDA's CRDs; skips locally, fails under CI=true, when not fetched."""
    return required(locate_keda_crds)


@pytest.fixture(scope="session")
def control_plane(
    request: pytest.FixtureRequest, control_plane_binaries: Binaries, keda_crds: Path
) -> Iterator[ControlPlane]:
    """etcd + kube-apiserver with the project's and KEDA's CRDs Established."""
    log_dir = os.environ.get(LOG_DIR_ENV)
    plane = ControlPlane(control_plane_binaries, log_dir=Path(log_dir) if log_dir else None)
    request.config.stash[_PLANE] = plane
    restore_sigterm = _sigterm_tears_down()
    try:
        plane.start()
        started = time.monotonic()
        install_crds(plane.api_client, crd_manifests([PROJECT_CRDS, keda_crds]))
        plane.startup_seconds["CRDs Established in"] = time.monotonic() - started
        yield plane
    finally:
        plane.stop()
        restore_sigterm()


@pytest.fixture(scope="session")
def api_client(control_plane: ControlPlane) -> k8s_client.ApiClient:
    """A client with cluster-admin (system:masters) rights; shared, so do not close it."""
    return control_plane.api_client


@pytest.fixture(scope="session")
def kubeconfig(control_plane: ControlPlane) -> Path:
    """Admin kubeconfig file, for code under test that builds its own client."""
    return control_plane.kubeconfig


@pytest.fixture
def namespace(api_client: k8s_client.ApiClient, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test.

    Without kube-controller-manager a deleted namespace stays Terminating and keeps its
    objects; the unique name is what isolates tests.
    """
    name = f"{_dns_label(request.node.name, 40)}-{secrets.token_hex(3)}"
    core = k8s_client.CoreV1Api(api_client)
    core.create_namespace(k8s_client.V1Namespace(metadata=k8s_client.V1ObjectMeta(name=name)))
    yield name
    core.delete_namespace(name)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _NEEDS_BINARIES in getattr(item, "fixturenames", ()) and not item.get_closest_marker(
            "integration"
        ):
            item.add_marker(pytest.mark.integration)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    plane = item.config.stash.get(_PLANE, None)
    if report.failed and plane is not None and _FIXTURE in getattr(item, "fixturenames", ()):
        for name, tail in plane.log_tails().items():
            report.sections.append((f"{name} log, last lines", tail))
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    plane = terminalreporter.config.stash.get(_PLANE, None)
    if plane is not None and plane.startup_seconds:
        times = ", ".join(f"{k} {v:.2f}s" for k, v in plane.startup_seconds.items())
        terminalreporter.write_line(f"control plane start-up: {times}")


@contextlib.contextmanager
def stalled_apiserver(plane: ControlPlane) -> Iterator[None]:
    """kube-apiserver stopped (SIGSTOP) inside the block: it accepts connections, answers none."""
    pid = plane.process_ids()["kube-apiserver"]
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def _dns_label(text: str, limit: int) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower())[:limit].strip("-") or "test"


def _sigterm_tears_down() -> Callable[[], None]:
    """Turns SIGTERM into KeyboardInterrupt, which pytest answers with fixture teardown."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return lambda: None

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)

    def restore() -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    return restore
