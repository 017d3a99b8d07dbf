"""Names and in-cluster addresses derived from a service's name and namespace."""

from __future__ import annotations

from dataclasses import dataclass

GRPC_PORT = 9090
"""The scaler Service's ExternalScaler port (KEDA dials it), and the container port behind it."""
AGGREGATOR_PORT = 9091
"""The scaler Service's demand-report port when several gateways report to the aggregator."""


@dataclass(frozen=True, slots=True)
class ServiceIdentity:
    name: str
    namespace: str

    @property
    def backend_service(self) -> str:
        return f"{self.name}-backend"

    @property
    def gateway(self) -> str:
        return f"{self.name}-gateway"

    @property
    def scaler(self) -> str:
        return f"{self.name}-scaler"

    @property
    def demand_secret(self) -> str:
        return f"{self.name}-demand-auth"

    @property
    def endpoint_reader(self) -> str:
        """The ServiceAccount, Role and RoleBinding through which the gateway (and an aggregator
        scaling on KV-cache use) follow the backend Service's EndpointSlices."""
        return f"{self.name}-endpoint-reader"

    @property
    def cache_claim(self) -> str:
        return f"{self.name}-cache"

    @property
    def prewarm_job(self) -> str:
        return f"{self.name}-prewarm"

    def _svc_host(self, service: str) -> str:
        return f"{service}.{self.namespace}.svc"

    @property
    def endpoint_url(self) -> str:
        """The OpenAI-compatible base URL clients in the cluster use."""
        return f"http://{self._svc_host(self.name)}/v1"

    @property
    def backend_url(self) -> str:
        return f"http://{self._svc_host(self.backend_service)}:80"

    @property
    def scaler_address(self) -> str:
        """What KEDA dials; the scaler's server certificate must be valid for its host part."""
        return f"{self._svc_host(self.scaler)}:{GRPC_PORT}"

    @property
    def aggregator_url(self) -> str:
        return f"http://{self._svc_host(self.scaler)}:{AGGREGATOR_PORT}/v1/demand"
