"""`down` leaves nothing behind: no process, mount, network namespace, link, iptables rule,
cgroup or changed kernel setting, and no state folder."""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.cluster import Cluster, host
from support.cluster.traces import HostTraces, host_traces

from .conftest import LAST
from .workloads import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900), getattr(pytest.mark, LAST)]
_UP_THEN_SIGKILL = """
import os, signal
from support.cluster import Cluster
Cluster().up()
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_down_leaves_the_host_as_it_was(cluster: Cluster, host_before_box: HostTraces) -> None:
    during = host_traces(cluster.folders)
    assert during.network_namespaces > host_before_box.network_namespaces  # the box is there

    cluster.down()

    after = host_traces(cluster.folders)
    for field in dataclasses.fields(HostTraces):
        before_value = getattr(host_before_box, field.name)
        assert getattr(after, field.name) == before_value, field.name


def test_what_a_killed_run_left_is_gone_after_the_next_down(
    cluster: Cluster, host_before_box: HostTraces
) -> None:
    """The processes die with the test process that started them (SIGKILL, no teardown); the
    namespace, cgroups, kernel settings and state it left go with the next `down`, which is
    how every `up` begins."""
    killed = subprocess.run(
        [sys.executable, "-c", _UP_THEN_SIGKILL],
        cwd=Path(__file__).parents[1],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = host_traces(cluster.folders)
    assert left.network_namespaces > host_before_box.network_namespaces  # it did come up
    wait_for("the box's processes to die with their starter", lambda: not host.box_pids(), 30)

    Cluster().down()

    assert host_traces(cluster.folders) == host_before_box
