"""A backend scaled away while it serves a stream: the runtime drains its backends
(`lifecycle.preStopDrain`), so the pod stays Terminating for the service's
`scaling.drainTimeout` and the stream in flight on it finishes whole, while the service counts
only the replica that still serves. Cache `None`.

What a user relies on: a scale-down (here `scaling.max` lowered) does not cut the answers the
replicas it removes are still giving.
"""

from __future__ import annotations

import pytest
from kubernetes import client as k8s_client
from support.custom_resources import CustomResources

from .pods import SERVICE_NAME, one_ready_backend, rolled_out, settled_gateways
from .serving import diagnosed, example, start_chat, status
from .test_drain import draining_runtime  # noqa: F401  (the example's runtime, draining)
from .workloads import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
STREAM_TOKENS = 600
"""At the stub's 100 ms a token, a stream of 60 s: still running after a second backend has
started and the scale-down has picked the first one."""
DRAIN_SECONDS = 90  # longer than the whole stream: the drain, not luck, lets it finish
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


def test_a_stream_in_flight_finishes_whole_while_its_backend_drains_at_scale_down(
    api_client: k8s_client.ApiClient,
    namespace: str,
    installed: None,
    gpus: None,
    draining_runtime: str,  # noqa: F811
) -> None:
    core = k8s_client.CoreV1Api(api_client)
    _, service = example(
        runtime={"name": draining_runtime},
        scaling={"min": 1, "max": 1, "drainTimeout": f"{DRAIN_SECONDS}s"},
    )
    with diagnosed(api_client, namespace):
        CustomResources(api_client).create(service, namespace)
        settled_gateways(api_client, namespace, 1)
        streaming = str(one_ready_backend(api_client, namespace).metadata.name)
        stream = start_chat(api_client, namespace, SERVICE_NAME, tokens=STREAM_TOKENS)
        wait_for("the stream under way on the one backend", lambda: stream.tokens > 0)
        # The ReplicaSet removes the pod of lowest deletion cost first: the one serving the
        # stream, rather than the newer one it would pick otherwise.
        core.patch_namespaced_pod(
            streaming, namespace, {"metadata": {"annotations": {DELETION_COST: "-1"}}}
        )
        _scale(api_client, namespace, 2)
        wait_for(
            "a second backend Ready beside the streaming one",
            lambda: rolled_out(api_client, namespace, SERVICE_NAME, 2),
            timeout=180,
        )
        _scale(api_client, namespace, 1)

        wait_for(
            f"{streaming} Terminating",
            lambda: _terminating(core, namespace, streaming),
            timeout=120,
        )
        tokens_before = stream.tokens
        assert not stream.over.is_set(), f"over once its pod went: {stream.describe()}"
        wait_for(
            "the service Ready on the one replica left",
            lambda: (
                (s := status(api_client, namespace, SERVICE_NAME)).get("phase") == "Ready"
                and s.get("replicas") == 1
                and s
            ),
        )
        assert not stream.over.is_set(), f"over before the status said it: {stream.describe()}"

        wait_for("the stream answered", stream.over.is_set, timeout=STREAM_TOKENS / 10 + 60)
        assert stream.completed, stream.describe()
        assert stream.tokens == STREAM_TOKENS, stream.describe()
        assert stream.tokens > tokens_before, "no token came while its pod was Terminating"
        assert _terminating(core, namespace, streaming), "its pod gone before the stream ended"


def _scale(api_client: k8s_client.ApiClient, namespace: str, replicas: int) -> None:
    """The service's backends pinned to `replicas` (its `scaling.min` and `scaling.max`)."""
    k8s_client.CustomObjectsApi(api_client).patch_namespaced_custom_object(
        "serving.noctaya.io", "v1alpha1", namespace, "llmservices", SERVICE_NAME,
        {"spec": {"scaling": {"min": replicas, "max": replicas}}},
    )  # fmt: skip


def _terminating(core: k8s_client.CoreV1Api, namespace: str, name: str) -> bool:
    """Whether the pod is being deleted; fails if it is already gone."""
    pod = core.read_namespaced_pod(name, namespace)
    return pod.metadata.deletion_timestamp is not None
