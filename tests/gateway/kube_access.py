"""What a gateway pod gets from Kubernetes, made by hand on the test control plane: a
ServiceAccount with a Role to read EndpointSlices (bound or not), its token and the API server's
CA in files; EndpointSlices of a backend Service; and a TCP relay to the API server whose
connections a test can cut.

The API server refuses loopback addresses in an EndpointSlice, so the "pods" are engine stubs on
this machine's own non-loopback address (`host_address`), one port each, one slice each.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client as k8s_client
from noctaya.gateway.process.config import BackendEndpoints

SERVICE = "backend"
ACCOUNT = "gateway"
ROLE = "endpointslice-reader"


@dataclass
class KubeAccess:
    api_client: k8s_client.ApiClient
    namespace: str
    api_url: str
    token_file: Path
    ca_file: Path

    def endpoints(self, api_url: str | None = None) -> BackendEndpoints:
        return BackendEndpoints(
            self.namespace,
            SERVICE,
            api_url or self.api_url,
            token_file=str(self.token_file),
            ca_file=str(self.ca_file),
        )

    async def bind(self) -> None:
        binding: Any = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": ROLE},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE},
            "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": self.namespace}],
        }
        rbac = k8s_client.RbacAuthorizationV1Api(self.api_client)
        await asyncio.to_thread(rbac.create_namespaced_role_binding, self.namespace, binding)

    async def put_slice(
        self,
        name: str,
        endpoints: list[tuple[str, dict[str, bool]]],
        port: int,
        *,
        address_type: str = "IPv4",
    ) -> None:
        """Create or replace the EndpointSlice `name` of the backend Service."""
        body: Any = {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": name, "labels": {"kubernetes.io/service-name": SERVICE}},
            "addressType": address_type,
            "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
            "endpoints": [
                {"addresses": [address], "conditions": conditions}
                for address, conditions in endpoints
            ],
        }
        discovery = k8s_client.DiscoveryV1Api(self.api_client)
        try:
            await asyncio.to_thread(
                discovery.create_namespaced_endpoint_slice, self.namespace, body
            )
        except k8s_client.ApiException as error:
            if error.status != 409:
                raise
            await asyncio.to_thread(
                discovery.patch_namespaced_endpoint_slice,
                name,
                self.namespace,
                {"endpoints": body["endpoints"]},
            )

    async def delete_slice(self, name: str) -> None:
        discovery = k8s_client.DiscoveryV1Api(self.api_client)
        await asyncio.to_thread(discovery.delete_namespaced_endpoint_slice, name, self.namespace)


def host_address() -> str:
    """This machine's IPv4 address on its default route (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("198.51.100.1", 9))
        except OSError as error:
            raise AssertionError(f"no non-loopback IPv4 address for the pods: {error}") from None
        address: str = probe.getsockname()[0]
    assert not address.startswith("127."), address
    return address


READY = {"ready": True, "serving": True, "terminating": False}
NOT_READY = {"ready": False, "serving": False, "terminating": False}
TERMINATING = {"ready": False, "serving": True, "terminating": True}


async def kube_access(
    api_client: k8s_client.ApiClient, namespace: str, api_url: str, ca_file: Path, folder: Path
) -> KubeAccess:
    """The ServiceAccount and its Role (not bound: `bind()`), its token and CA in files."""
    core = k8s_client.CoreV1Api(api_client)
    rbac = k8s_client.RbacAuthorizationV1Api(api_client)
    account: Any = {"metadata": {"name": ACCOUNT}}
    await asyncio.to_thread(core.create_namespaced_service_account, namespace, account)
    role: Any = {
        "metadata": {"name": ROLE},
        "rules": [
            {
                "apiGroups": ["discovery.k8s.io"],
                "resources": ["endpointslices"],
                "verbs": ["get", "list", "watch"],
            }
        ],
    }
    await asyncio.to_thread(rbac.create_namespaced_role, namespace, role)
    request: Any = {"spec": {"audiences": [], "expirationSeconds": 3600}}
    token = await asyncio.to_thread(
        core.create_namespaced_service_account_token, ACCOUNT, namespace, request
    )
    token_file, copied_ca = folder / "token", folder / "ca.crt"
    assert token.status is not None
    assert token.status.token
    await asyncio.to_thread(token_file.write_text, token.status.token)
    await asyncio.to_thread(shutil.copyfile, ca_file, copied_ca)
    return KubeAccess(api_client, namespace, api_url, token_file, copied_ca)


@dataclass
class Relay:
    """A TCP relay to `upstream`; `cut()` breaks every connection through it."""

    upstream: tuple[str, int]
    server: asyncio.Server | None = None
    writers: set[asyncio.StreamWriter] = field(default_factory=set)
    connections: int = 0

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"https://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._relay, "127.0.0.1", 0)

    def cut(self) -> None:
        for writer in list(self.writers):
            writer.transport.abort()

    async def close(self) -> None:
        self.cut()
        if self.server is not None:
            self.server.close()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        self.writers |= {writer, up_writer}
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            self.writers -= {writer, up_writer}


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.transport.abort()
