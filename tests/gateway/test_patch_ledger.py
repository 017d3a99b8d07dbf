"""The ledger (`server/patches/ledger.md`, beside the patches) has an entry for every change the
gateway makes to hypercorn, h2, h11 and asyncio, and nothing it no longer makes: the changes are
found by comparing those libraries' modules and classes before and after
`install_server_patches()`, in a fresh interpreter, and, for the names hypercorn was given at its
import (`server.lean_import`), by finding its names bound to stand-ins."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import noctaya.gateway.server.patches

LEDGER = Path(noctaya.gateway.server.patches.__file__).parent / "ledger.md"
CHANGED = """
import json, sys
from noctaya.gateway.server.lean_import import is_forwarder
from noctaya.gateway.server import lean_import
lean_import.import_hypercorn()
import noctaya.gateway.aggregator.server
import noctaya.gateway.process.gateway_server
import noctaya.gateway.scaler.server
from noctaya.gateway.server.patches import install_server_patches

LIBRARIES = {"hypercorn", "h2", "h11", "hpack", "hyperframe", "priority", "wsproto", "asyncio"}


def snapshot():
    seen = {}
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in LIBRARIES:
            continue
        for attribute, value in list(vars(module).items()):
            seen[f"{name}.{attribute}"] = value
            if isinstance(value, type) and value.__module__ == name:
                for inner, member in list(vars(value).items()):
                    seen[f"{name}.{attribute}.{inner}"] = member
    return seen


before = snapshot()
install_server_patches()
after = snapshot()
changed = [key for key, value in after.items() if before.get(key, object()) is not value]
given = [key for key, value in before.items() if is_forwarder(value)]
print(json.dumps(sorted(changed + given)))
"""


def installed_changes() -> set[str]:
    result = subprocess.run(
        [sys.executable, "-c", CHANGED], capture_output=True, text=True, check=True, timeout=120
    )
    return set(json.loads(result.stdout))


def ledger_entries() -> set[str]:
    """The targets the ledger's entries name on their `Replaces:` lines."""
    text = LEDGER.read_text(encoding="utf-8")
    lines = re.findall(r"^- Replaces: (.+)$", text, re.MULTILINE)
    return {target for line in lines for target in re.findall(r"`([\w.]+)`", line)}


def test_every_installed_change_has_a_ledger_entry_and_every_entry_is_installed() -> None:
    installed = installed_changes()
    assert installed, "the comparison found the patches"
    entries = ledger_entries()
    assert sorted(installed - entries) == [], "installed without a ledger entry"
    assert sorted(entries - installed) == [], "in the ledger but not installed"


def test_each_entry_says_what_it_addresses_its_upstream_and_its_measure() -> None:
    sections = re.split(r"^## ", LEDGER.read_text(encoding="utf-8"), flags=re.MULTILINE)[1:]
    assert sections
    for section in sections:
        title = section.splitlines()[0]
        for field in ("- Replaces:", "- Changes:", "- Addresses:", "- Upstream:", "- Measured:"):
            assert field in section, f"{title}: no {field!r}"
