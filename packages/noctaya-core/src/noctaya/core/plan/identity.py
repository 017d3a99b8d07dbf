"""Names and in-cluster addresses derived from a service's name and namespace."""

from __future__ import annotations

from dataclasses import dataclass


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
        return f"{self._svc_host(self.scaler)}:9090"

    @property
    def aggregator_url(self) -> str:
        return f"http://{self._svc_host(self.scaler)}:9091/v1/demand"
