"""Which cluster the operator talks to, and which namespace it lives in.

Configuration is looked up in this order: `--kubeconfig`, then `$KUBECONFIG`, then the
in-cluster service account, then `~/.kube/config` (controller-runtime's order, on purpose: a
setup that finds the cluster for a Go operator finds it for this one). The namespace (home of
the leader election Lease) is `$POD_NAMESPACE`, else the service account's namespace file, else
the packaging default `noctaya-system`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.incluster_config import SERVICE_HOST_ENV_NAME

DEFAULT_NAMESPACE = "noctaya-system"
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
HOME_KUBECONFIG = Path("~/.kube/config")


class ClusterConfigError(Exception):
    """No usable cluster configuration; the message says where the operator looked."""


def load_api_client(
    kubeconfig: str | None, environ: Mapping[str, str] = os.environ
) -> k8s.ApiClient:
    try:
        if kubeconfig:
            return _from_file(kubeconfig)
        if environ.get("KUBECONFIG"):
            return _from_file(environ["KUBECONFIG"])
        if environ.get(SERVICE_HOST_ENV_NAME):
            configuration = k8s.Configuration()
            k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            return k8s.ApiClient(configuration)
        home = HOME_KUBECONFIG.expanduser()
        if home.is_file():
            return _from_file(str(home))
    except (ConfigException, OSError, ValueError) as error:
        raise ClusterConfigError(f"invalid Kubernetes client configuration: {error}") from error
    raise ClusterConfigError(
        "no Kubernetes client configuration: pass --kubeconfig, set KUBECONFIG, "
        f"run in a cluster, or create {HOME_KUBECONFIG}"
    )


def _from_file(path: str) -> k8s.ApiClient:
    client: k8s.ApiClient = k8s_config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=path, persist_config=False
    )
    return client


def manager_namespace(
    environ: Mapping[str, str] = os.environ, namespace_file: Path = SERVICE_ACCOUNT_NAMESPACE
) -> str:
    if environ.get("POD_NAMESPACE"):
        return environ["POD_NAMESPACE"]
    try:
        namespace = namespace_file.read_text(encoding="utf-8").strip()
    except OSError:
        namespace = ""
    return namespace or DEFAULT_NAMESPACE
