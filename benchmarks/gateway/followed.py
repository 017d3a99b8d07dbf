"""A gateway as the operator deploys it with its endpoint reader: following a backend's pods
through their EndpointSlice on a real API server (the test suite's control plane,
tests/support/envtest), instead of sending to a backend URL."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from kubernetes import client as k8s_client

TESTS = Path(__file__).resolve().parents[2] / "tests"
NAMESPACE = "bench"
MODE = "gateway following pods"
"""How the tables name a gateway that follows its backend's pods."""


def _tests_importable() -> None:
    """The test suite's control plane and gateway access, importable (added to the path once)."""
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))


def host_address() -> str:
    """This machine's non-loopback address: the API server refuses loopback addresses in an
    EndpointSlice, so a followed engine listens there."""
    _tests_importable()
    from gateway.kube_access import host_address as address

    return address()


@contextlib.contextmanager
def pods(address: tuple[str, int]) -> Iterator[dict[str, str]]:
    """A control plane holding one ready pod at `address` in its backend Service's
    EndpointSlice, and an account that may read it, as the operator grants it; yields the
    gateway's settings to follow it (what the operator renders and Kubernetes adds to every
    pod)."""
    _tests_importable()
    from support.envtest import ControlPlane, locate_binaries

    from gateway.kube_access import READY, SERVICE, kube_access

    plane = ControlPlane(locate_binaries())
    plane.start()
    try:
        with tempfile.TemporaryDirectory(prefix="noctaya-bench-") as folder:
            api_client = plane.api_client
            k8s_client.CoreV1Api(api_client).create_namespace({"metadata": {"name": NAMESPACE}})
            ca = plane.workdir / "pki" / "ca.crt"

            async def grant() -> Path:
                access = await kube_access(api_client, NAMESPACE, plane.host, ca, Path(folder))
                await access.bind()
                await access.put_slice("pod", [(address[0], READY)], address[1])
                return access.token_file

            token_file = asyncio.run(grant())
            api = urlsplit(plane.host)
            yield {
                "NOCTAYA_BACKEND_ENDPOINTS": f"{NAMESPACE}/{SERVICE}",
                "NOCTAYA_KUBERNETES_TOKEN_FILE": str(token_file),
                "NOCTAYA_KUBERNETES_CA_FILE": str(token_file.parent / "ca.crt"),
                "KUBERNETES_SERVICE_HOST": api.hostname or "",
                "KUBERNETES_SERVICE_PORT": str(api.port),
            }
    finally:
        plane.stop()
