"""The manager against the real API server: watches to keys, retries, probes, shutdown."""

from __future__ import annotations

import itertools
import threading
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest
from kubernetes import client as k8s_client
from noctaya.k8s.runtime import (
    Manager,
    ManagerOptions,
    ObjectKey,
    controller_owner,
    generation_changed,
)

from .runtime_harness import FAST, Reconciles, config_map, wait_until

pytestmark = pytest.mark.integration

OPTIONS = ManagerOptions(workers=1, health_probe_address="0", informer_timing=FAST)


def test_each_created_or_changed_object_is_reconciled_under_its_own_key(
    api_client: k8s_client.ApiClient, core: k8s_client.CoreV1Api, namespace: str, running: Any
) -> None:
    manager = Manager(api_client, OPTIONS)
    manager.watch("v1", "ConfigMap", namespace=namespace)
    reconciles = Reconciles()
    running(manager, reconciles.reconciler("solo"))

    core.create_namespaced_config_map(namespace, config_map("app", {"v": "1"}))
    reconciles.wait_for_key((namespace, "app"))
    core.patch_namespaced_config_map("app", namespace, {"data": {"v": "2"}})
    reconciles.wait_for_key((namespace, "app"), times=2)
    core.delete_namespaced_config_map("app", namespace)
    reconciles.wait_for_key((namespace, "app"), times=3)
    assert set(reconciles.keys()) == {(namespace, "app")}


def test_owned_objects_wake_their_controller_owner_and_nothing_else(
    api_client: k8s_client.ApiClient, core: k8s_client.CoreV1Api, namespace: str, running: Any
) -> None:
    manager = Manager(api_client, OPTIONS)
    manager.watch("v1", "Secret", namespace=namespace, to_keys=controller_owner("", "ConfigMap"))
    reconciles = Reconciles()
    running(manager, reconciles.reconciler("solo"))

    def owned_secret(name: str, owner: str, controller: bool) -> k8s_client.V1Secret:
        reference = k8s_client.V1OwnerReference(
            api_version="v1",
            kind="ConfigMap",
            name=owner,
            uid=str(uuid.uuid4()),
            controller=controller,
        )
        return k8s_client.V1Secret(
            metadata=k8s_client.V1ObjectMeta(name=name, owner_references=[reference])
        )

    core.create_namespaced_secret(namespace, owned_secret("merely-referenced", "bystander", False))
    core.create_namespaced_secret(namespace, owned_secret("plain", "nobody", False))
    core.create_namespaced_secret(namespace, owned_secret("controlled", "owner", True))
    # One informer delivers in order and one worker reconciles in order: had the first two
    # Secrets enqueued anything, it would have been reconciled before the owner.
    reconciles.wait_for_key((namespace, "owner"))
    assert reconciles.keys() == [(namespace, "owner")]


def test_updates_that_keep_the_generation_are_filtered_out_by_the_predicate(
    api_client: k8s_client.ApiClient, namespace: str, running: Any
) -> None:
    apps = k8s_client.AppsV1Api(api_client)
    for name in ("relabelled", "respecified"):
        apps.create_namespaced_deployment(
            namespace, k8s_client.V1Deployment.model_validate(_deployment(name))
        )
    manager = Manager(api_client, OPTIONS)
    manager.watch("apps/v1", "Deployment", namespace=namespace, update_predicate=generation_changed)
    reconciles = Reconciles()
    running(manager, reconciles.reconciler("solo"))
    for name in ("relabelled", "respecified"):
        reconciles.wait_for_key((namespace, name))  # the initial list adds both

    apps.patch_namespaced_deployment("relabelled", namespace, {"metadata": {"labels": {"x": "y"}}})
    apps.patch_namespaced_deployment("respecified", namespace, {"spec": {"replicas": 2}})

    reconciles.wait_for_key((namespace, "respecified"), times=2)
    assert reconciles.keys().count((namespace, "relabelled")) == 1


def test_a_failing_reconcile_is_retried_with_doubling_delays_until_it_succeeds(
    api_client: k8s_client.ApiClient, core: k8s_client.CoreV1Api, namespace: str, running: Any
) -> None:
    options = ManagerOptions(
        workers=1, health_probe_address="0", informer_timing=FAST, retry_base_delay=0.1
    )
    manager = Manager(api_client, options)
    manager.watch("v1", "ConfigMap", namespace=namespace)
    reconciles = Reconciles()
    attempts: list[ObjectKey] = []

    def fail_three_times(key: ObjectKey) -> None:
        attempts.append(key)
        if len(attempts) <= 3:
            raise RuntimeError(f"attempt {len(attempts)} fails")

    running(manager, reconciles.reconciler("solo", also=fail_three_times))
    core.create_namespaced_config_map(namespace, config_map("flaky", {}))

    calls = reconciles.wait_for(lambda calls: len(calls) >= 4)
    gaps = [later.started - earlier.ended for earlier, later in itertools.pairwise(calls[:4])]
    doubling = (0.1, 0.2, 0.4)
    assert all(gap >= delay * 0.95 for gap, delay in zip(gaps, doubling, strict=True)), gaps
    assert manager.queue.failures((namespace, "flaky")) == 0  # forgotten after the success


def test_one_key_is_never_reconciled_by_two_workers_at_once_and_the_last_change_wins(
    api_client: k8s_client.ApiClient, core: k8s_client.CoreV1Api, namespace: str, running: Any
) -> None:
    options = ManagerOptions(workers=4, health_probe_address="0", informer_timing=FAST)
    manager = Manager(api_client, options)
    store = manager.watch("v1", "ConfigMap", namespace=namespace)
    reconciles = Reconciles(hold=0.05)
    seen: list[str] = []

    def read_version(key: ObjectKey) -> None:
        cached = store.get(key)
        seen.append("deleted" if cached is None else cached["data"]["v"])

    running(manager, reconciles.reconciler("solo", also=read_version))
    core.create_namespaced_config_map(namespace, config_map("busy", {"v": "0"}))
    for version in range(1, 11):
        core.patch_namespaced_config_map("busy", namespace, {"data": {"v": str(version)}})

    reconciles.wait_for(lambda _: seen[-1:] == ["10"])
    calls = sorted(reconciles.calls, key=lambda call: call.started)
    assert all(a.ended <= b.started for a, b in itertools.pairwise(calls))
    assert len(calls) < 11  # changes made during a reconcile were merged into one more pass


def test_probe_endpoints_answer_ok_while_running(
    api_client: k8s_client.ApiClient, namespace: str, running: Any
) -> None:
    options = ManagerOptions(workers=1, health_probe_address="127.0.0.1:0", informer_timing=FAST)
    manager = Manager(api_client, options)
    manager.watch("v1", "ConfigMap", namespace=namespace)
    runner = running(manager, Reconciles().reconciler("solo"))
    assert manager.reconciling.wait(30)
    base = f"http://127.0.0.1:{manager.probe_port}"
    for path in ("/healthz", "/readyz"):
        with urllib.request.urlopen(base + path, timeout=5) as response:
            assert (response.status, response.read()) == (200, b"ok")
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(base + "/metrics", timeout=5)
    assert missing.value.code == 404
    runner.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(base + "/healthz", timeout=5)


def test_a_kind_without_its_crd_does_not_hold_up_the_others_and_is_watched_once_installed(
    api_client: k8s_client.ApiClient, core: k8s_client.CoreV1Api, namespace: str, running: Any
) -> None:
    group = f"late-{uuid.uuid4().hex[:8]}.noctaya.io"
    manager = Manager(api_client, OPTIONS)
    manager.watch("v1", "ConfigMap", namespace=namespace)
    manager.watch(f"{group}/v1", "Widget", namespace=namespace)
    reconciles = Reconciles()
    running(manager, reconciles.reconciler("solo"))
    core.create_namespaced_config_map(namespace, config_map("early", {}))
    reconciles.wait_for_key((namespace, "early"))

    extensions = k8s_client.ApiextensionsV1Api(api_client)
    extensions.create_custom_resource_definition(
        k8s_client.V1CustomResourceDefinition.model_validate(_widget_crd(group))
    )
    try:
        custom = k8s_client.CustomObjectsApi(api_client)
        wait_until(lambda: _served(custom, group, namespace))
        custom.create_namespaced_custom_object(
            group,
            "v1",
            namespace,
            "widgets",
            {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "late"}},
        )
        reconciles.wait_for_key((namespace, "late"))
    finally:
        extensions.delete_custom_resource_definition(f"widgets.{group}")


def test_stop_lets_the_reconcile_in_hand_finish_and_starts_no_other(
    api_client: k8s_client.ApiClient, core: k8s_client.CoreV1Api, namespace: str, running: Any
) -> None:
    manager = Manager(api_client, OPTIONS)
    manager.watch("v1", "ConfigMap", namespace=namespace)
    entered, release = threading.Event(), threading.Event()

    def block_on_first(key: ObjectKey) -> None:
        if key[1] == "first":
            entered.set()
            release.wait(30)

    reconciles = Reconciles()
    runner = running(manager, reconciles.reconciler("solo", also=block_on_first))
    core.create_namespaced_config_map(namespace, config_map("first", {}))
    assert entered.wait(30)
    core.create_namespaced_config_map(namespace, config_map("second", {}))
    wait_until(lambda: len(manager.queue) == 1)  # "second" waits behind the busy worker

    manager.stop()
    assert not runner.finished.wait(0.3)  # still draining the reconcile in hand
    release.set()
    assert runner.join() is None
    assert reconciles.keys() == [(namespace, "first")]


def _served(custom: k8s_client.CustomObjectsApi, group: str, namespace: str) -> bool:
    try:
        custom.list_namespaced_custom_object(group, "v1", namespace, "widgets")
    except k8s_client.ApiException:
        return False
    return True


def _deployment(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": "example.invalid/app:1"}]},
            },
        },
    }


def _widget_crd(group: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object"}},
                }
            ],
        },
    }
