"""Two operator replicas: only the Lease holder reconciles, and the standby takes over
when the leader stops, whether it hands the Lease over or just goes away.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

import pytest
from kubernetes import client as k8s_client
from noctaya.k8s.runtime import LeaderElectionConfig
from support.custom_resources import CustomResources
from support.manifests import inference_runtime, llmservice

from .cluster import eventually, read, reconciled
from .conftest import RunningController

pytestmark = pytest.mark.integration

StartController = Callable[..., RunningController]


def holder(api_client: k8s_client.ApiClient, namespace: str, lease: str) -> str | None:
    found = read(api_client, "coordination.k8s.io/v1", "Lease", namespace, lease)
    return (found["spec"].get("holderIdentity") or None) if found else None


@pytest.mark.parametrize(
    "release_on_cancel",
    [pytest.param(True, id="lease-released"), pytest.param(False, id="lease-expires")],
)
def test_standby_takes_over_when_the_leader_stops(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    start_controller: StartController,
    release_on_cancel: bool,
) -> None:
    lease = f"noctaya-{secrets.token_hex(4)}"

    def replica(identity: str) -> RunningController:
        election = LeaderElectionConfig(
            namespace=namespace,
            name=lease,
            identity=identity,
            lease_duration=2.0,
            renew_deadline=1.0,
            retry_period=0.2,
            release_on_cancel=release_on_cancel,
        )
        return start_controller(leader_election=election)

    resources.create(inference_runtime(runtime_name))
    leader = replica("replica-a")
    leader.wait_reconciling()
    standby = replica("replica-b")
    resources.create(llmservice("first", {"runtime": {"name": runtime_name}}), namespace)
    eventually(lambda: reconciled(resources, namespace, "first"), "the leader to reconcile")
    assert holder(api_client, namespace, lease) == "replica-a"
    assert not standby.manager.reconciling.is_set(), "the standby reconciled while not leading"

    leader.stop()
    # Released: the Lease is free at once. Not released: it stays the old leader's until it
    # expires (2 s after its last renewal, long after stop() returned).
    assert holder(api_client, namespace, lease) in (
        (None, "replica-b") if release_on_cancel else ("replica-a",)
    )
    resources.create(llmservice("second", {"runtime": {"name": runtime_name}}), namespace)

    eventually(lambda: reconciled(resources, namespace, "second"), "the standby to take over")
    assert holder(api_client, namespace, lease) == "replica-b"
    assert standby.manager.reconciling.is_set()
    assert leader.failures == []
