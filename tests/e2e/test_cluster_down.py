"""`down` leaves nothing behind: no process, mount, network namespace, link, iptables rule,
cgroup or changed kernel setting, and no state folder."""

from __future__ import annotations

import dataclasses

import pytest
from support.cluster import Cluster
from support.cluster.traces import HostTraces, host_traces

from .conftest import LAST

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900), getattr(pytest.mark, LAST)]


def test_down_leaves_the_host_as_it_was(cluster: Cluster, host_before_box: HostTraces) -> None:
    during = host_traces(cluster.folders)
    assert during.network_namespaces > host_before_box.network_namespaces  # the box is there

    cluster.down()

    after = host_traces(cluster.folders)
    for field in dataclasses.fields(HostTraces):
        before_value = getattr(host_before_box, field.name)
        assert getattr(after, field.name) == before_value, field.name
