"""The manual's NetworkPolicy profile (docs/snippets/networkpolicies.yaml and the metrics rules of
networkpolicy-metrics.yaml), applied as written to a service with two gateways and enforced by
kube-router on every node. Cache `None`.

What a user relies on: with the profile in place a client in a namespace labelled
`noctaya.io/client=true` is answered from cold (client → gateway, KEDA → aggregator, gateways →
aggregator, gateway → backend all still work, on whichever nodes the pods landed), Prometheus in
its namespace scrapes the gateways and the aggregator, and a pod anywhere else reaches none of
the backend, the aggregator or a gateway directly. Each connection refused under the profile is
made again once the profile is deleted: it was the policy that refused it, not a wrong address.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client
from support.custom_resources import CustomResources

from .pods import BACKEND_PODS, SERVICE_NAME, is_ready, live_pods, rolled_out, settled_gateways
from .serving import REPO, chat_body, condition, diagnosed, example, status
from .test_availability import two_gateways  # noqa: F401  (the module's two gateways)
from .workloads import create, pod_phase, shell_pod, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
PROFILE = REPO / "docs" / "snippets" / "networkpolicies.yaml"
METRICS_RULES = REPO / "docs" / "snippets" / "networkpolicy-metrics.yaml"
SCALER_PODS = f"serving.noctaya.io/scaler={SERVICE_NAME}"
CONNECT_SECONDS = 3
"""How long a probe waits for a TCP connection: a policy drops the SYN, so refusal is a timeout."""


def manual_policies(path: Path, namespace: str, monitoring: str) -> list[dict[str, Any]]:
    """The page's policies for the example service `qwen3-8b-a10` in `ai`, for this test's
    service and namespace, and its Prometheus namespace `monitoring` for this test's."""
    text = path.read_text(encoding="utf-8").replace("qwen3-8b-a10", SERVICE_NAME)
    policies = list(yaml.safe_load_all(text))
    for policy in policies:
        assert policy["metadata"]["namespace"] == "ai"
        policy["metadata"]["namespace"] = namespace
        for rule in policy["spec"]["ingress"]:
            for peer in rule["from"]:
                labels = peer.get("namespaceSelector", {}).get("matchLabels", {})
                if labels.get("kubernetes.io/metadata.name") == "monitoring":
                    labels["kubernetes.io/metadata.name"] = monitoring
    return policies


@pytest.fixture
def other_namespaces(api_client: k8s_client.ApiClient) -> Iterator[dict[str, str]]:
    """A client namespace (`noctaya.io/client=true`), Prometheus's, and one with no label, by
    role."""
    core = k8s_client.CoreV1Api(api_client)
    suffix = secrets.token_hex(3)
    labels = {"client": {"noctaya.io/client": "true"}, "monitoring": {}, "elsewhere": {}}
    names = {role: f"netpol-{role}-{suffix}" for role in labels}
    for role, name in names.items():
        core.create_namespace({"metadata": {"name": name, "labels": labels[role]}})
    yield names
    for name in names.values():
        core.delete_namespace(name)


def probe(api_client: k8s_client.ApiClient, namespace: str, script: str) -> str:
    """Runs `script` in a busybox pod of `namespace` to its end; its output. The pod's name is
    fresh each time, so a namespace can probe several times."""
    core = k8s_client.CoreV1Api(api_client)
    name = f"probe-{secrets.token_hex(3)}"
    create(api_client, shell_pod(name, script), namespace)
    phase = wait_for(
        f"probe pod {namespace}/{name} to finish",
        lambda: (p := pod_phase(core, namespace, name)) in {"Succeeded", "Failed"} and p,
        timeout=240,
    )
    log = str(core.read_namespaced_pod_log(name, namespace))
    assert phase == "Succeeded", log
    return log


def connections(
    api_client: k8s_client.ApiClient, namespace: str, targets: dict[str, tuple[str, int]]
) -> dict[str, bool]:
    """Which of `targets` (name → pod IP and port) a pod of `namespace` can open a TCP
    connection to. busybox nc exits 1 only when it could not connect; once connected it waits
    for the server, so `timeout` ends it, with another status."""
    lines = [
        f"timeout {CONNECT_SECONDS + 2} nc -w {CONNECT_SECONDS} {ip} {port} </dev/null >/dev/null"
        f' 2>&1; [ $? = 1 ] && echo "{name} closed" || echo "{name} open"'
        for name, (ip, port) in targets.items()
    ]
    log = probe(api_client, namespace, "\n".join(lines))
    found = dict(line.rsplit(" ", 1) for line in log.splitlines() if line.endswith(("n", "d")))
    assert found.keys() == targets.keys(), log
    return {name: state == "open" for name, state in found.items()}


def port_of(pod: k8s_client.V1Pod, name: str) -> tuple[str, int]:
    ports = {port.name: port.container_port for c in pod.spec.containers for port in c.ports or []}
    return str(pod.status.pod_ip), ports[name]


def test_the_manuals_profile_lets_clients_keda_and_prometheus_through_and_nothing_else(
    api_client: k8s_client.ApiClient,
    namespace: str,
    two_gateways: None,  # noqa: F811
    gpus: None,
    other_namespaces: dict[str, str],
) -> None:
    networking = k8s_client.NetworkingV1Api(api_client)
    client, monitoring, elsewhere = other_namespaces.values()
    with diagnosed(api_client, namespace):
        _, service = example()
        resources = CustomResources(api_client)
        resources.create(service, namespace)
        gateways = settled_gateways(api_client, namespace, 2)
        wait_for(
            "the aggregator rolled out",
            lambda: rolled_out(api_client, namespace, f"{SERVICE_NAME}-scaler", 1),
            timeout=180,
        )
        policies = [
            *manual_policies(PROFILE, namespace, monitoring),
            *manual_policies(METRICS_RULES, namespace, monitoring),
        ]
        for policy in policies:
            networking.create_namespaced_network_policy(namespace, policy)

        # Cold, from the client namespace: the gateway holds the request while KEDA, through the
        # aggregator, wakes the backend, then proxies it there.
        body = chat_body(SERVICE_NAME, stream=False).decode()
        url = f"http://{SERVICE_NAME}.{namespace}.svc/v1/chat/completions"
        answer = probe(
            api_client,
            client,
            # busybox's own `wget -T` crashes (Debian's static 1.35): `timeout` bounds it.
            f"timeout 170 wget -O - --header 'Content-Type: application/json' "
            f"--post-data '{body}' {url}",
        )
        # wget's own lines come beside the body, which ends without a line break.
        reply, _ = json.JSONDecoder().raw_decode(answer[answer.index("{") :])
        assert reply.get("choices"), answer
        # The backend stays from here on: a probe of a backend scaled away would be refused
        # whatever the policies say.
        resources.patch("LLMService", SERVICE_NAME, {"spec": {"scaling": {"min": 1}}}, namespace)
        # KEDA may have judged the ScaledObject before the aggregator was up (no metric specs)
        # and says so until its next look, which the change just made brings. Until KEDA has
        # the new minimum, the cooldown may still take the backend away: wait for the minimum
        # in the ScaledObject and a Ready backend pod that is not being deleted.
        objects = k8s_client.CustomObjectsApi(api_client)

        def settled() -> Any:
            found = status(api_client, namespace, SERVICE_NAME)
            if condition(found, "Ready")[0] != "True":
                return None
            if condition(found, "AutoscalingReady")[0] != "True":
                return None
            scaled = objects.get_namespaced_custom_object(
                "keda.sh", "v1alpha1", namespace, "scaledobjects", SERVICE_NAME
            )
            if scaled["spec"].get("minReplicaCount") != 1:
                return None
            ready = [p for p in live_pods(api_client, namespace, BACKEND_PODS) if is_ready(p)]
            return ready[0] if len(ready) == 1 else None

        backend = wait_for("the service Ready with one backend kept", settled, timeout=180)
        (aggregator,) = live_pods(api_client, namespace, SCALER_PODS)
        gateway = gateways[0]
        direct = {
            "backend": port_of(backend, "http"),
            "aggregator-grpc": port_of(aggregator, "grpc"),
            "aggregator-http": port_of(aggregator, "http"),
            "gateway-http": port_of(gateway, "http"),
        }
        assert connections(api_client, elsewhere, direct) == dict.fromkeys(direct, False)
        from_client = connections(api_client, client, direct)
        assert from_client == {**dict.fromkeys(direct, False), "gateway-http": True}

        scrape = " && ".join(
            f"timeout 10 wget -q -O - http://{ip}:{port}/metrics | grep -q '^noctaya_'"
            for ip, port in (direct["gateway-http"], direct["aggregator-http"])
        )
        probe(api_client, monitoring, f"{scrape} && echo scraped")
        from_monitoring = connections(api_client, monitoring, {"backend": direct["backend"]})
        assert from_monitoring == {"backend": False}

        for policy in policies:
            networking.delete_namespaced_network_policy(policy["metadata"]["name"], namespace)
        wait_for(
            "every connection open once the profile is deleted",
            lambda: all(connections(api_client, elsewhere, direct).values()),
            timeout=60,
        )
