"""Vendor plugins: the pluggy hook a vendor implements and the registry found through entry points.

A vendor distribution declares an entry point in the `noctaya.vendors` group that names a module
(or object) with a `@hookimpl`-marked `noctaya_vendor_adapter()` returning its `VendorAdapter`.
Installing the distribution is all it takes: discovery reads installed metadata and nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import pluggy
from noctaya.core.errors import NoctayaError
from noctaya.core.ports import VendorAdapter

ENTRY_POINT_GROUP = "noctaya.vendors"
_PROJECT = "noctaya"
_HOOK = "noctaya_vendor_adapter"

hookspec = pluggy.HookspecMarker(_PROJECT)
hookimpl = pluggy.HookimplMarker(_PROJECT)


class VendorHookSpecs:
    """The hooks of a `noctaya.vendors` plugin."""

    @hookspec
    def noctaya_vendor_adapter(self) -> VendorAdapter:  # type: ignore[empty-body]
        """Return this plugin's adapter; its `vendor` is the name runtimes select it by."""


class VendorRegistry:
    """The installed vendor adapters by vendor name."""

    def __init__(self, adapters: Iterable[VendorAdapter]) -> None:
        self._adapters: dict[str, VendorAdapter] = {}
        for adapter in adapters:
            taken = self._adapters.setdefault(adapter.vendor, adapter)
            if taken is not adapter:
                raise NoctayaError(
                    "VendorPlugin",
                    f"vendor {json.dumps(adapter.vendor)} is provided by more than one adapter: "
                    f"[{_qualified_name(taken)} {_qualified_name(adapter)}]",
                )

    @classmethod
    def discover(cls) -> VendorRegistry:
        """Load every plugin of the `noctaya.vendors` entry-point group, and only those."""
        manager = pluggy.PluginManager(_PROJECT)
        manager.add_hookspecs(VendorHookSpecs)
        try:
            manager.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
            manager.check_pending()
        except Exception as exc:
            raise NoctayaError(
                "VendorPlugin",
                f"cannot load the {ENTRY_POINT_GROUP} plugins: {type(exc).__name__}: {exc}",
            ) from exc
        return cls(_adapters_of(manager))

    @property
    def vendors(self) -> tuple[str, ...]:
        """Installed vendor names, sorted."""
        return tuple(sorted(self._adapters))

    def adapter(self, vendor: str) -> VendorAdapter:
        """The adapter for `vendor`; an unknown vendor is `UnsupportedVendor`.

        The message names the installed vendors as well as the missing one, so a missing plugin
        distribution is obvious from the status condition alone.
        """
        try:
            return self._adapters[vendor]
        except KeyError:
            raise NoctayaError(
                "UnsupportedVendor",
                f"no backend adapter registered for vendor {json.dumps(vendor)}; "
                f"installed vendors: [{' '.join(self.vendors)}]",
            ) from None


def _adapters_of(manager: pluggy.PluginManager) -> list[VendorAdapter]:
    """Call each plugin's hook on its own, so every complaint names the plugin at fault."""
    implementations = manager.hook.noctaya_vendor_adapter.get_hookimpls()
    silent = sorted(
        {name for name, _ in manager.list_name_plugin()}
        - {impl.plugin_name for impl in implementations}
    )
    if silent:
        raise NoctayaError(
            "VendorPlugin",
            f"{ENTRY_POINT_GROUP} plugin {json.dumps(silent[0])} has no @hookimpl {_HOOK}()",
        )
    adapters: list[VendorAdapter] = []
    for impl in implementations:
        adapter = impl.function()
        if not isinstance(adapter, VendorAdapter):
            raise NoctayaError(
                "VendorPlugin",
                f"{ENTRY_POINT_GROUP} plugin {json.dumps(impl.plugin_name)} returned "
                f"{adapter!r} from {_HOOK}(), which is not a VendorAdapter "
                "(it needs a vendor name and accelerator_plan())",
            )
        adapters.append(adapter)
    return adapters


def _qualified_name(adapter: VendorAdapter) -> str:
    kind = type(adapter)
    return f"{kind.__module__}.{kind.__qualname__}"
