"""The vendor-neutral accelerator request every adapter starts from."""

from __future__ import annotations

import pytest
from noctaya.core.errors import NoctayaError
from noctaya.core.vendors import AcceleratorRequest


def test_whole_device_limit_is_the_runtime_resource_with_the_service_count() -> None:
    request = AcceleratorRequest("a10", "nvidia.com/gpu", 2)

    assert request.whole_device_limits() == {"nvidia.com/gpu": 2}


@pytest.mark.parametrize("devices", [0, -3])
def test_fewer_than_one_device_still_asks_for_one(devices: int) -> None:
    request = AcceleratorRequest("a10", "nvidia.com/gpu", devices)

    assert request.whole_device_limits() == {"nvidia.com/gpu": 1}


def test_runtime_without_resource_name_fails_render_naming_the_runtime() -> None:
    with pytest.raises(NoctayaError) as caught:
        AcceleratorRequest("ascend-910b3", "", 1)

    assert caught.value.reason == "Render"
    assert caught.value.message == 'runtime "ascend-910b3" has no accelerator.resourceName'
