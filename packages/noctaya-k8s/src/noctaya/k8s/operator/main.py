"""`noctaya-operator`: flags → logging → cluster client → controller, metrics, probes → run.

Exit codes: 0 after a graceful stop (SIGTERM/SIGINT), 1 when the configuration is unusable or
leadership was lost (the replica restarts as a standby, as controller-runtime's does), 2 for
flags that do not parse.

The metrics (prometheus_client) and their HTTPS server (cryptography, for a self-signed
certificate) are imported only when the metrics are served: the chart turns them off, and
the two cost every operator 10 MiB of memory and a fifth of its start-up.
"""

from __future__ import annotations

import logging
import socket
import sys
from collections.abc import Sequence
from importlib.metadata import version
from typing import TYPE_CHECKING

from kubernetes import client as k8s
from noctaya.k8s.controller import build_controller
from noctaya.k8s.operator.cluster import ClusterConfigError, load_api_client, manager_namespace
from noctaya.k8s.operator.flags import FlagError, OperatorFlags, parse_flags, validate
from noctaya.k8s.operator.leader_event import announce_leadership
from noctaya.k8s.operator.logging_setup import configure_logging
from noctaya.k8s.reconciler import OperatorSettings
from noctaya.k8s.runtime import (
    LeaderElectionConfig,
    LeadershipLost,
    Manager,
    ManagerOptions,
    Reconciler,
    ResourceResolver,
)

if TYPE_CHECKING:
    from noctaya.k8s.operator.metrics import ControllerMetrics
    from noctaya.k8s.operator.metrics_server import MetricsServer, TlsContexts

log = logging.getLogger("noctaya.k8s.operator")


def main(argv: Sequence[str] | None = None) -> int:
    flags = parse_flags(argv)
    if flags.version:
        print(f"noctaya-operator {version('noctaya-k8s')}")
        return 0
    configure_logging(development=flags.zap_devel, encoder=flags.log_format, level=flags.log_level)
    try:
        validate(flags)
        api_client = load_api_client(flags.kubeconfig)
    except (FlagError, ClusterConfigError) as error:
        log.error("unable to start the operator", extra={"error": str(error)})
        return 1
    return run(flags, api_client)


def run(flags: OperatorFlags, api_client: k8s.ApiClient) -> int:
    leader_election = (
        LeaderElectionConfig(namespace=manager_namespace()) if flags.leader_elect else None
    )
    manager, reconciler = build_controller(
        api_client,
        OperatorSettings(
            flags.gateway_image,
            flags.gateway_replicas,
            flags.fetch_image,
            gateway_defaults=flags.gateway_defaults(),
            plain_http_registries=frozenset(flags.plain_http_registries),
        ),
        ManagerOptions(
            workers=flags.max_concurrent_reconciles,
            leader_election=leader_election,
            health_probe_address=flags.health_probe_bind_address,
        ),
    )
    metrics = _metrics(manager) if flags.metrics_enabled else None
    if leader_election is not None:
        announce_leadership(manager, ResourceResolver(manager.api_client), leader_election)
    log.info(
        "starting the operator",
        extra={
            "version": version("noctaya-k8s"),
            "gatewayImage": flags.gateway_image,
            "fetchImage": flags.fetch_image,
            "plainHTTPRegistries": list(flags.plain_http_registries),
            "gatewayReplicas": flags.gateway_replicas,
            "maxConcurrentReconciles": flags.max_concurrent_reconciles,
            "leaderElection": leader_election.namespace if leader_election else False,
        },
    )
    server: MetricsServer | None = None
    reconcile: Reconciler = reconciler.reconcile
    try:
        if metrics is not None:
            reconcile = metrics.instrument(reconcile)
            server = _metrics_server(flags, metrics, manager.api_client)
            server.start()
        manager.run(reconcile)
    except LeadershipLost as lost:
        log.error("leader election lost", extra={"error": str(lost)})
        return 1
    except OSError as error:  # a port in use, an unreadable certificate
        log.error("problem running the operator", extra={"error": str(error)})
        return 1
    finally:
        if server is not None:
            server.stop()
    log.info("stopped")
    return 0


def _metrics(manager: Manager) -> ControllerMetrics:
    from noctaya.k8s.operator.metrics import ControllerMetrics

    metrics = ControllerMetrics()
    metrics.observe_manager(manager)
    return metrics


def _metrics_server(
    flags: OperatorFlags, metrics: ControllerMetrics, api_client: k8s.ApiClient
) -> MetricsServer:
    from noctaya.k8s.operator.access_review import AccessReview
    from noctaya.k8s.operator.metrics_server import MetricsServer
    from noctaya.k8s.runtime.resources import client_without_retries

    if not flags.metrics_secure:
        return MetricsServer(flags.metrics_bind_address, metrics.registry)
    if flags.enable_http2:
        log.info("the metrics server speaks HTTP/1.1 only; --enable-http2 changes nothing")
    return MetricsServer(
        flags.metrics_bind_address,
        metrics.registry,
        tls=_metrics_tls(flags),
        reviewer=AccessReview(client_without_retries(api_client)),
    )


def _metrics_tls(flags: OperatorFlags) -> TlsContexts:
    """The given certificate, followed as it rotates; else one generated now."""
    from noctaya.k8s.operator.serving_certificate import CertificateFiles, self_signed_context

    if flags.metrics_cert_path:
        return CertificateFiles(
            flags.metrics_cert_path, flags.metrics_cert_name, flags.metrics_cert_key
        )
    hostname = socket.gethostname()
    context = self_signed_context(hostname)
    log.info(
        "no --metrics-cert-path: serving metrics with a self-signed certificate generated at "
        "start-up; scrapers must skip verification or pass one with --metrics-cert-path",
        extra={"hostname": hostname},
    )
    return lambda: context


if __name__ == "__main__":
    sys.exit(main())
