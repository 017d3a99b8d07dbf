"""An API-server restart breaks every watch (the operator watches again, relisting when the
server no longer knows its resourceVersion); the running operator goes on reconciling new
services afterwards.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from support.custom_resources import CustomResources
from support.envtest import ControlPlane
from support.manifests import inference_runtime, llmservice

from .cluster import condition_values, eventually, reconciled
from .conftest import RunningController

pytestmark = pytest.mark.integration


def test_new_service_is_reconciled_after_the_api_server_restarts(
    control_plane: ControlPlane,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    start_controller: Callable[..., RunningController],
) -> None:
    resources.create(inference_runtime(runtime_name))
    resources.create(llmservice("before", {"runtime": {"name": runtime_name}}), namespace)
    controller = start_controller()
    controller.wait_reconciling()
    eventually(lambda: reconciled(resources, namespace, "before"), "the first service")

    control_plane.restart_apiserver()
    resources.create(llmservice("after", {"runtime": {"name": runtime_name}}), namespace)

    status = eventually(
        lambda: reconciled(resources, namespace, "after"), "a service created after the restart"
    )
    assert condition_values(status)["AutoscalingReady"][:2] == ("True", "ScaledObjectApplied")
    assert status["phase"] == "ScaledToZero"
    assert controller.thread.is_alive()
    assert controller.failures == []
