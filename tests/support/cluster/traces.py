"""What the box can leave on the host, observed from outside: the `down` test compares a
snapshot taken before `up` with one taken after `down`."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from . import host, layout

# Links that live inside the nodes, which the host must never see.
_NODE_LINKS = frozenset({"cni0", "services"})


@dataclass(frozen=True)
class HostTraces:
    processes: frozenset[str]
    mounts: frozenset[str]
    network_namespaces: frozenset[str]
    links: frozenset[str]
    iptables_rules: tuple[str, ...]
    cgroups: frozenset[str]
    kernel_settings: tuple[tuple[str, str], ...]
    box_run_folder: bool
    netns_folder: bool


def host_traces(folders: layout.Folders) -> HostTraces:
    """Processes and mounts of the box, its namespaces and links, the host's iptables rules
    (counters dropped), the box's cgroup root and the kernel settings the kubelet changes."""
    markers = (str(folders.root), layout.NAME)
    return HostTraces(
        processes=frozenset(_box_processes(markers)),
        mounts=frozenset(
            line
            for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if any(marker in line for marker in markers)
        ),
        network_namespaces=frozenset(host.box_namespaces())
        | frozenset(
            name  # containerd's default names
            for name in (os.listdir(host.NETNS_DIR) if host.NETNS_DIR.exists() else ())
            if name.startswith("cni-")
        ),
        links=frozenset(host.box_links()) | (_NODE_LINKS & frozenset(os.listdir("/sys/class/net"))),
        iptables_rules=tuple(
            line
            for line in _output("iptables-save").splitlines()
            if not line.startswith(("#", ":"))
        ),
        cgroups=frozenset(str(path) for path in host.CGROUP_FS.glob(f"*/{layout.NAME}")),
        kernel_settings=tuple(
            (name, (Path("/proc/sys") / name).read_text().strip()) for name in host.KERNEL_SETTINGS
        ),
        box_run_folder=folders.run.exists(),
        netns_folder=host.NETNS_DIR.exists(),
    )


def _box_processes(markers: tuple[str, ...]) -> list[str]:
    """Processes in the box (its namespace or cgroups) or naming it on their command line;
    other programs of the same name (another suite's runc, say) are not the box's."""
    in_box = set(host.box_pids())
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            name = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if int(entry.name) in in_box or any(marker in command for marker in markers):
            found.append(f"{entry.name} {name}: {command.strip()}")
    return found


def _output(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30).stdout
