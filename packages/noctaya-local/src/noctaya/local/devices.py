"""The machine's devices local mode may hand to engines, vendor by vendor.

`--devices [VENDOR=]IDS` names them (ids as the vendor's variable takes them, for example
`--devices 0` for one GPU, `--devices nvidia=0,1`); a value without a vendor serves every
vendor that has no value of its own. Otherwise the vendor plugin lists them
(`noctaya.core.ports.LocalDevices`, for example `nvidia-smi -L`). A vendor whose devices are
neither named nor listed is not budgeted: its engines start as they would without local mode
in between, with no visible-devices variable set.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

from noctaya.core.errors import NoctayaError
from noctaya.core.plugins import VendorRegistry
from noctaya.core.ports import LocalDevices
from noctaya.core.values.go_text import go_quote
from noctaya.local.errors import LocalConfigError

log = logging.getLogger("noctaya.local")
FLAG = "--devices"
_VENDOR = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DEVICE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")


@dataclass(frozen=True, slots=True)
class DeviceFlag:
    vendor: str | None
    """None: every vendor without a value of its own."""
    ids: tuple[str, ...]
    text: str


def parse_device_flag(text: str) -> DeviceFlag:
    """One `--devices` value; ValueError says what is wrong with it."""
    vendor, equals, listed = text.rpartition("=")
    if equals and not _VENDOR.fullmatch(vendor):
        raise ValueError(f"{go_quote(vendor)} is not a vendor name")
    ids = tuple(listed.split(","))
    for device in ids:
        if not _DEVICE_ID.fullmatch(device):
            raise ValueError(
                f"{go_quote(device)} is not a device id; give the ids the vendor's variable "
                "takes, comma-separated (0,1 or GPU-<uuid>)"
            )
    if len(set(ids)) != len(ids):
        raise ValueError(f"{go_quote(listed)} names a device twice")
    return DeviceFlag(vendor or None, ids, text)


@dataclass(frozen=True, slots=True)
class DevicePool:
    vendor: str
    ids: tuple[str, ...]
    visible_env: str | None
    """The variable an engine reads its devices from; None if the vendor plugin names none."""
    origin: str
    """Where the ids came from, for messages."""


class MachineDevices:
    """Each vendor's pool, found the first time a service of that vendor asks (the vendor's
    tool runs once), and logged once local mode serves such a service (`announce`)."""

    def __init__(self, flags: Sequence[DeviceFlag], vendors: VendorRegistry) -> None:
        for flag in flags:
            if flag.vendor is not None and flag.vendor not in vendors.vendors:
                # A misspelt vendor would leave the real one's engines unbudgeted, all at once
                # on its devices.
                raise LocalConfigError(
                    f"{FLAG} {flag.text}: no vendor plugin {go_quote(flag.vendor)} is installed; "
                    f"installed vendors: [{' '.join(vendors.vendors)}]"
                )
        self._flags = {flag.vendor: flag for flag in flags}  # the last value of a vendor wins
        self._vendors = vendors
        self._pools: dict[str, DevicePool | None] = {}
        self._why_not: dict[str, str] = {}
        self._announced: set[str] = set()

    def pool(self, vendor: str) -> DevicePool | None:
        """None: the vendor's devices are not budgeted."""
        if vendor not in self._pools:
            self._pools[vendor] = self._find(vendor)
        return self._pools[vendor]

    def check(self, service: str, vendor: str, count: int) -> None:
        """Refuse a service that needs more devices than the pool has: it could never start."""
        pool = self.pool(vendor)
        if pool is not None and count > len(pool.ids):
            raise LocalConfigError(
                f"LLMService {go_quote(service)} spec.resources.accelerators: Invalid value: "
                f"{count}: more than the {len(pool.ids)} {vendor} device(s) local mode may use "
                f"({pool.origin})"
            )

    def announce(self, vendor: str) -> None:
        """Log, once, which of the vendor's devices engines take turns on, or why none."""
        if vendor in self._announced:
            return
        self._announced.add(vendor)
        pool = self.pool(vendor)
        if pool is None:
            log.info("%s devices: not budgeted (%s)", vendor, self._why_not[vendor])
        elif pool.visible_env is None:
            log.info(
                "%s devices %s (%s): budgeted, but no engine is told which to use (the vendor "
                "plugin names no visible-devices variable)",
                vendor,
                ",".join(pool.ids),
                pool.origin,
            )
        else:
            log.info(
                "%s devices %s (%s), handed to engines in %s",
                vendor,
                ",".join(pool.ids),
                pool.origin,
                pool.visible_env,
            )

    def _find(self, vendor: str) -> DevicePool | None:
        try:
            adapter = self._vendors.adapter(vendor)
        except NoctayaError:
            adapter = None
        devices = adapter if isinstance(adapter, LocalDevices) else None
        env = devices.visible_devices_env if devices is not None else None
        flag = self._flags.get(vendor) or self._flags.get(None)
        if flag is not None:
            return DevicePool(vendor, flag.ids, env, f"{FLAG} {flag.text}")
        if devices is None:
            self._why_not[vendor] = f"its vendor plugin cannot list them; name them with {FLAG}"
            return None
        listed = devices.local_devices()
        if not listed:
            self._why_not[vendor] = f"its vendor plugin found none; name them with {FLAG}"
            return None
        return DevicePool(vendor, listed, env, f"found by the {vendor} vendor plugin")
