"""A user edits the service while the operator writes its status: the write, sent on the object
the reconcile read, conflicts, is retried on the newest object, and the edit survives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes.dynamic import DynamicClient
from noctaya.core.api import LLMServiceStatus
from noctaya.k8s.reconciler import LLMServiceReconciler
from noctaya.k8s.status_writer import DesiredStatus, StatusWriter
from support.custom_resources import CustomResources, Manifest
from support.manifests import inference_runtime, llmservice

from .cluster import patch

pytestmark = pytest.mark.integration


def test_spec_edit_racing_the_status_write_is_kept_and_status_reports_the_generation_it_saw(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
    monkeypatch: pytest.MonkeyPatch,
    status_of: Callable[[str, str], Manifest],
) -> None:
    resources.create(inference_runtime(runtime_name))
    created = resources.create(llmservice("racy", {"runtime": {"name": runtime_name}}), namespace)
    seen = created["metadata"]["generation"]
    computed: list[LLMServiceStatus] = []
    sent: list[tuple[str, str]] = []  # the status writer's requests: (method, last path segment)
    user_editing = False
    write, request = StatusWriter.write, DynamicClient.request

    def write_while_the_user_edits(
        writer: StatusWriter, seen_object: Manifest, desired: DesiredStatus
    ) -> object:
        ns, name = seen_object["metadata"]["namespace"], seen_object["metadata"]["name"]

        def racing(previous: LLMServiceStatus) -> LLMServiceStatus:
            nonlocal user_editing
            # Call 1 computes on the object the reconcile read, right before the writer sends
            # it: the user's edit lands in between, so that write conflicts.
            if not computed:
                edit = {"metadata": {"labels": {"team": "search"}}, "spec": {"scaling": {"max": 4}}}
                user_editing = True
                patch(api_client, "serving.noctaya.io/v1alpha1", "LLMService", ns, name, edit)
                user_editing = False
            computed.append(desired(previous))
            return computed[-1]

        def recording(client: DynamicClient, method: str, path: str, *a: Any, **kw: Any) -> Any:
            if not user_editing:
                sent.append((method.upper(), path.rsplit("/", 1)[-1]))
            return request(client, method, path, *a, **kw)

        with monkeypatch.context() as writing:
            writing.setattr(DynamicClient, "request", recording)
            return write(writer, seen_object, racing)

    monkeypatch.setattr(StatusWriter, "write", write_while_the_user_edits)

    reconciler.reconcile((namespace, "racy"))

    assert len(computed) == 2, "the conflicting write was retried once on the newest object"
    assert sent == [("PUT", "status"), ("GET", "racy"), ("PUT", "status")], (
        "written first on the object the reconcile read; read again only after the conflict"
    )
    live = resources.get("LLMService", "racy", namespace)
    assert live["spec"]["scaling"]["max"] == 4
    assert live["metadata"]["labels"] == {"team": "search"}
    assert live["metadata"]["generation"] == seen + 1
    status = live["status"]
    assert status["phase"] == "ScaledToZero"
    assert {c["observedGeneration"] for c in status["conditions"]} == {seen}

    monkeypatch.undo()
    reconciler.reconcile((namespace, "racy"))

    conditions = status_of("racy", namespace)["conditions"]
    assert {c["observedGeneration"] for c in conditions} == {seen + 1}
    assert resources.get("ScaledObject", "racy", namespace)["spec"]["maxReplicaCount"] == 4
