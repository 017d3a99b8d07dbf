"""The box, a three-node cluster, once per session: `cluster` brings it up, and down at the end.

Every test here carries `e2e` (added if forgotten). A box that cannot come up (not built, not
root) skips locally and fails under CI=true; a failing test gets the component log tails. The box
is one per host (its namespace and host link have fixed names), so a second e2e session waits
for the first one's box to be taken down instead of tearing it down under it.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from helm.chart import Helm, HelmMissing, locate_helm
from images.conftest import built_images  # noqa: F401  (the session's image archives)
from kubernetes import client as k8s_client
from support.cluster import Cluster, locate_programs
from support.cluster.traces import HostTraces, host_traces
from support.envtest.prerequisites import PrerequisiteMissing

from .faults import timing_table
from .serving import install_serving
from .workloads import advertise_gpus

_CLUSTER = pytest.StashKey[Cluster]()
_HOST_BEFORE = pytest.StashKey[HostTraces]()
LAST = "takes_the_cluster_down"
GPUS = "4"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{LAST}: runs after every other e2e test")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "cluster" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("e2e"):
            item.add_marker(pytest.mark.e2e)
    items.sort(key=lambda item: item.get_closest_marker(LAST) is not None)


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    try:
        locate_programs()
    except PrerequisiteMissing as missing:
        if os.environ.get("CI", "").lower() in {"true", "1"}:
            pytest.fail(f"{missing}. CI=true: e2e tests fail instead of skipping.", pytrace=False)
        pytest.skip(str(missing))
    with open(Path(tempfile.gettempdir()) / "noctaya-box.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield from _session_box(request)


def _session_box(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    box = Cluster()
    request.config.stash[_CLUSTER] = box
    box.down()  # what a killed run left is not part of the host as it was
    request.config.stash[_HOST_BEFORE] = host_traces(box.folders)
    try:
        box.up()
        yield box
    finally:
        box.down()


@pytest.fixture(scope="session")
def host_before_box(request: pytest.FixtureRequest, cluster: Cluster) -> HostTraces:
    """The host as it was before `up` (leftovers of a killed run already removed)."""
    return request.config.stash[_HOST_BEFORE]


@pytest.fixture(scope="session")
def api_client(cluster: Cluster) -> k8s_client.ApiClient:
    """The box's admin client; the suite-wide `namespace` fixture takes it from here."""
    return cluster.api_client


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    try:
        return Helm(locate_helm(), tmp_path_factory.mktemp("helm-home"))
    except HelmMissing as missing:
        pytest.fail(str(missing), pytrace=False)


@pytest.fixture(scope="session")
def installed(
    cluster: Cluster,
    built_images: dict[str, Path],  # noqa: F811
    helm: Helm,
) -> None:
    """Noctaya's images in the node and its chart installed, with the example's runtime; once
    per session, shared by every module that serves through it."""
    install_serving(cluster, list(built_images.values()), helm)


@pytest.fixture
def gpus(api_client: k8s_client.ApiClient) -> Iterator[None]:
    """The node advertises GPUs for the backends while the test runs, none after."""
    core = k8s_client.CoreV1Api(api_client)
    advertise_gpus(core, GPUS)
    yield
    advertise_gpus(core, None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    box = item.config.stash.get(_CLUSTER, None)
    if report.failed and box is not None:
        for name, tail in box.log_tails().items():
            report.sections.append((f"{name} log, last lines", tail))
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    box = terminalreporter.config.stash.get(_CLUSTER, None)
    if box is not None and box.timings:
        times = ", ".join(f"{what} at {seconds:.1f}s" for what, seconds in box.timings.items())
        terminalreporter.write_line(f"cluster start-up: {times}")
    for line in timing_table(terminalreporter.config):
        terminalreporter.write_line(line)
