"""Vendor discovery: only `noctaya.vendors` entry points count, and every mistake is named.

Faulty plugins are real distributions (a module plus its `.dist-info` metadata) placed on
`sys.path`, which is exactly what an installer leaves behind.
"""

from __future__ import annotations

import itertools
import sys
import textwrap
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from noctaya.core.errors import NoctayaError
from noctaya.core.plugins import ENTRY_POINT_GROUP, VendorRegistry
from noctaya.core.vendors import AcceleratorPlan, AcceleratorRequest
from noctaya.vendor_ascend import AscendAdapter
from noctaya.vendor_nvidia import NvidiaAdapter

_serial = itertools.count()

Installer = Callable[..., str]

GOOD_PLUGIN = """
from noctaya.core.plugins import hookimpl
from noctaya.core.vendors import AcceleratorPlan

class Adapter:
    vendor = "{vendor}"

    def accelerator_plan(self, request):
        return AcceleratorPlan(vendor=self.vendor, limits=request.whole_device_limits())

@hookimpl
def noctaya_vendor_adapter():
    return Adapter()
"""


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Installer]:
    """Install a one-module distribution whose entry point names that module; return its name."""
    modules: list[str] = []

    def _install(
        source: str, *, vendor: str = "probe", entry: str = "", group: str = ENTRY_POINT_GROUP
    ) -> str:
        module = f"noctaya_test_plugin_{next(_serial)}"
        site = tmp_path / module
        site.mkdir()
        (site / f"{module}.py").write_text(textwrap.dedent(source).format(vendor=vendor))
        metadata = site / f"{module}-0.1.dist-info"
        metadata.mkdir()
        (metadata / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
        (metadata / "entry_points.txt").write_text(f"[{group}]\n{entry or vendor} = {module}\n")
        monkeypatch.syspath_prepend(str(site))
        modules.append(module)
        return module

    yield _install
    for module in modules:
        sys.modules.pop(module, None)


def _discovery_error() -> NoctayaError:
    with pytest.raises(NoctayaError) as caught:
        VendorRegistry.discover()
    return caught.value


def test_discovery_finds_nvidia_and_ascend_through_the_workspace_entry_points() -> None:
    registry = VendorRegistry.discover()

    assert registry.vendors == ("ascend", "cpu", "nvidia")
    assert isinstance(registry.adapter("nvidia"), NvidiaAdapter)
    assert isinstance(registry.adapter("ascend"), AscendAdapter)
    declared = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    assert declared == {
        "nvidia": "noctaya.vendor_nvidia",
        "ascend": "noctaya.vendor_ascend",
        "cpu": "noctaya.vendor_cpu",
    }


def test_unknown_vendor_is_unsupported_and_lists_the_installed_vendors() -> None:
    with pytest.raises(NoctayaError) as caught:
        VendorRegistry.discover().adapter("amd")

    assert caught.value.reason == "UnsupportedVendor"
    assert caught.value.message == (
        'no backend adapter registered for vendor "amd"; installed vendors: [ascend cpu nvidia]'
    )


def test_unknown_vendor_with_nothing_installed_says_so() -> None:
    with pytest.raises(NoctayaError) as caught:
        VendorRegistry([]).adapter("nvidia")

    assert caught.value.message == (
        'no backend adapter registered for vendor "nvidia"; installed vendors: []'
    )


def test_installed_distribution_adds_its_vendor(install: Installer) -> None:
    install(GOOD_PLUGIN, vendor="probe")

    registry = VendorRegistry.discover()

    assert registry.vendors == ("ascend", "cpu", "nvidia", "probe")
    plan = registry.adapter("probe").accelerator_plan(AcceleratorRequest("rt", "probe.io/x", 3))
    assert plan == AcceleratorPlan(vendor="probe", limits={"probe.io/x": 3})


def test_plugin_outside_the_vendor_entry_point_group_is_ignored(install: Installer) -> None:
    module = install(GOOD_PLUGIN, vendor="stray", group="noctaya.elsewhere")
    __import__(module)  # imported and hook-marked, yet not declared as a vendor

    assert VendorRegistry.discover().vendors == ("ascend", "cpu", "nvidia")


def test_two_adapters_claiming_one_vendor_are_rejected(install: Installer) -> None:
    module = install(GOOD_PLUGIN, vendor="nvidia", entry="nvidia-twin")

    error = _discovery_error()

    assert error.reason == "VendorPlugin"
    assert error.message.startswith('vendor "nvidia" is provided by more than one adapter: [')
    assert "noctaya.vendor_nvidia.adapter.NvidiaAdapter" in error.message
    assert f"{module}.Adapter" in error.message


def test_plugin_without_a_marked_hook_is_named(install: Installer) -> None:
    install("def noctaya_vendor_adapter():\n    return None\n")

    error = _discovery_error()

    assert error.reason == "VendorPlugin"
    assert error.message == (
        'noctaya.vendors plugin "probe" has no @hookimpl noctaya_vendor_adapter()'
    )


def test_plugin_returning_something_else_is_named(install: Installer) -> None:
    install(
        """
        from noctaya.core.plugins import hookimpl

        @hookimpl
        def noctaya_vendor_adapter():
            return 42
        """
    )

    error = _discovery_error()

    assert error.reason == "VendorPlugin"
    assert error.message == (
        'noctaya.vendors plugin "probe" returned 42 from noctaya_vendor_adapter(), which is not a '
        "VendorAdapter (it needs a vendor name and accelerator_plan())"
    )


def test_misspelled_hook_is_rejected(install: Installer) -> None:
    install(
        """
        from noctaya.core.plugins import hookimpl

        @hookimpl
        def noctaya_vendor_adaptor():
            return None
        """
    )

    error = _discovery_error()

    assert error.reason == "VendorPlugin"
    assert error.message.startswith(
        "cannot load the noctaya.vendors plugins: PluginValidationError"
    )
    assert "noctaya_vendor_adaptor" in error.message


def test_plugin_that_fails_to_import_is_a_clear_error(install: Installer) -> None:
    install("import noctaya_missing_dependency\n")

    error = _discovery_error()

    assert error.reason == "VendorPlugin"
    assert error.message == (
        "cannot load the noctaya.vendors plugins: ModuleNotFoundError: "
        "No module named 'noctaya_missing_dependency'"
    )
