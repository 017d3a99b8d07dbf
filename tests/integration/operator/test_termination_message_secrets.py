"""A failed prewarm Job's termination message reaches the service's status redacted, whatever
the fetcher in the pod wrote: an older fetcher, or another image, may have quoted a client's
error with a URL's password or an Authorization header in it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes import client as k8s_client
from noctaya.k8s.reconciler import LLMServiceReconciler
from support.custom_resources import CustomResources, Manifest
from support.manifests import inference_runtime, llmservice

from .cluster import condition_values
from .failures import fail_prewarm_job, reconcile_failure

pytestmark = pytest.mark.integration

PASSWORD = "mirror-password-not-for-status"
TOKEN = "hf_rotated_old_token_not_for_status"
NEXT_TOKEN = "hf_rotated_new_token_not_for_status"
SAID = (
    "noctaya-fetch: hf://acme/tiny: connection failed: LocalProtocolError: Illegal header value "
    f"b'Bearer {TOKEN}\n{NEXT_TOKEN}' requesting http://mirror:{PASSWORD}@hub.example/api\x1b[2J"
)


def test_a_termination_message_reaches_the_status_without_credentials_on_one_line(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
) -> None:
    resources.create(inference_runtime(runtime_name))
    changes = {"runtime": {"name": runtime_name}, "cache": {"prewarm": True}}
    resources.create(llmservice("leaky", changes), namespace)
    reconciler.reconcile((namespace, "leaky"))
    limit = "Job has reached the specified backoff limit"
    ended = {"exitCode": 75, "message": SAID, "finishedAt": "2025-01-01T00:01:00Z"}
    fail_prewarm_job(
        api_client,
        namespace,
        "leaky-prewarm",
        {"leaky-prewarm-a": ended},
        failed=5,
        reason="BackoffLimitExceeded",
        message=limit,
    )

    error = reconcile_failure(reconciler, namespace, "leaky")

    assert error.reason == "PrewarmFailed"
    assert error.message == (
        f"prewarm Job leaky-prewarm failed: {limit}; noctaya-fetch: hf://acme/tiny: connection "
        "failed: LocalProtocolError: Illegal header value b'Bearer [redacted]' requesting "
        "http://[redacted]@hub.example/api\\x1b[2J"
    )
    stored = condition_values(status_of("leaky", namespace))["Degraded"][2]
    assert stored == error.message
    for secret in (PASSWORD, TOKEN, NEXT_TOKEN):
        assert secret not in stored
