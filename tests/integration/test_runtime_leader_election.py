"""Leader election on a real Lease: one active reconciler, hand-over, release, loss, SIGTERM."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client
from noctaya.k8s.runtime import (
    LeaderElectionConfig,
    LeaderElector,
    LeadershipLost,
    Manager,
    ManagerOptions,
)
from support.control_plane import stalled_apiserver
from support.envtest import ControlPlane

from .conftest import StartManager
from .runtime_harness import FAST, WAIT, Reconciles, RunningManager, config_map, wait_until

pytestmark = pytest.mark.integration

LEASE = "6d7012cb.noctaya.io"
# Shortened timings; the order lease > renew deadline > 1.2 * retry is what matters.
LEASE_SECONDS, RENEW_DEADLINE, RETRY = 2.0, 1.5, 0.2
WAIT_AFTER_EXPIRY = 3.0  # how long a stalled server is kept stopped after the lease expired


def election(namespace: str, identity: str, **overrides: Any) -> LeaderElectionConfig:
    timings: dict[str, Any] = {
        "lease_duration": LEASE_SECONDS,
        "renew_deadline": RENEW_DEADLINE,
        "retry_period": RETRY,
    }
    return LeaderElectionConfig(namespace=namespace, identity=identity, **{**timings, **overrides})


@pytest.fixture
def coordination(api_client: k8s_client.ApiClient) -> k8s_client.CoordinationV1Api:
    return k8s_client.CoordinationV1Api(api_client)


@pytest.fixture
def reconciles() -> Reconciles:
    """Every candidate's reconciles, in one record."""
    return Reconciles(hold=0.02)


@pytest.fixture
def candidates(
    api_client: k8s_client.ApiClient, namespace: str, reconciles: Reconciles, running: StartManager
) -> Callable[[str], RunningManager]:
    """Managers electing on one Lease in the test namespace, each watching its ConfigMaps."""

    def start(identity: str) -> RunningManager:
        options = ManagerOptions(
            workers=2,
            health_probe_address="0",
            informer_timing=FAST,
            leader_election=election(namespace, identity),
        )
        manager = Manager(api_client, options)
        manager.watch("v1", "ConfigMap", namespace=namespace)
        return running(manager, reconciles.reconciler(identity))

    return start


def holder(coordination: k8s_client.CoordinationV1Api, namespace: str) -> Any:
    return coordination.read_namespaced_lease(LEASE, namespace).spec


def test_two_replicas_never_reconcile_at_once_and_the_standby_takes_over_when_the_leader_stops(
    candidates: Callable[[str], RunningManager],
    reconciles: Reconciles,
    core: k8s_client.CoreV1Api,
    coordination: k8s_client.CoordinationV1Api,
    namespace: str,
) -> None:
    first = candidates("replica-a")
    assert first.manager.reconciling.wait(WAIT)
    second = candidates("replica-b")
    for n in range(5):
        core.create_namespaced_config_map(namespace, config_map(f"cm-{n}", {}))
    reconciles.wait_for(lambda calls: len({c.key for c in calls}) == 5)
    assert not second.manager.reconciling.is_set()
    assert holder(coordination, namespace).holder_identity == "replica-a"

    stopped_at = time.monotonic()
    assert first.stop() is None
    assert second.manager.reconciling.wait(WAIT)
    takeover = time.monotonic() - stopped_at
    # The released Lease is taken at the standby's next retry, not after the lease expires.
    assert takeover < LEASE_SECONDS, f"takeover took {takeover:.2f}s"
    for n in range(5):  # the standby's queue, filled while waiting, is worked off
        reconciles.wait_for_key((namespace, f"cm-{n}"), by="replica-b")
    core.create_namespaced_config_map(namespace, config_map("after-handover", {}))
    reconciles.wait_for_key((namespace, "after-handover"), by="replica-b")

    calls = sorted(reconciles.calls, key=lambda call: call.started)
    assert [c.by for c in calls] == sorted(c.by for c in calls)  # all of a, then all of b
    handovers = [(a, b) for a, b in itertools.pairwise(calls) if a.by != b.by]
    assert [(a.by, b.by) for a, b in handovers] == [("replica-a", "replica-b")]
    assert all(a.ended <= b.started for a, b in handovers)
    lease = holder(coordination, namespace)
    assert (lease.holder_identity, lease.lease_transitions) == ("replica-b", 1)


def test_stopping_the_leader_releases_the_lease(
    candidates: Callable[[str], RunningManager],
    coordination: k8s_client.CoordinationV1Api,
    namespace: str,
) -> None:
    leader = candidates("only-replica")
    assert leader.manager.reconciling.wait(WAIT)
    assert holder(coordination, namespace).holder_identity == "only-replica"
    assert leader.stop() is None
    lease = holder(coordination, namespace)
    assert (lease.holder_identity, lease.lease_duration_seconds) in {("", 1), (None, 1)}


def test_a_leader_that_cannot_renew_stops_reconciling_within_the_renew_deadline(
    api_client: k8s_client.ApiClient,
    candidates: Callable[[str], RunningManager],
    reconciles: Reconciles,
    running: StartManager,
    core: k8s_client.CoreV1Api,
    coordination: k8s_client.CoordinationV1Api,
    namespace: str,
) -> None:
    # A control watching the same ConfigMaps without election: once it has reconciled a new
    # object, a replica still (wrongly) reconciling would have had its chance to do so too.
    control = Manager(
        api_client,
        ManagerOptions(workers=1, health_probe_address="0", informer_timing=FAST),
    )
    control.watch("v1", "ConfigMap", namespace=namespace)
    running(control, reconciles.reconciler("control"))
    leader = candidates("partitioned")
    assert leader.manager.reconciling.wait(WAIT)
    assert control.reconciling.wait(WAIT)
    # Another replica's write wins (as when this one was cut off and the lease expired there).
    lease = coordination.read_namespaced_lease(LEASE, namespace)
    assert lease.spec is not None
    lease.spec.holder_identity = "usurper"
    lease.spec.lease_duration_seconds = 60
    coordination.replace_namespaced_lease(LEASE, namespace, lease)
    taken_at = time.monotonic()

    assert leader.finished.wait(WAIT)
    lost_after = time.monotonic() - taken_at
    assert isinstance(leader.join(), LeadershipLost)
    assert lost_after < RENEW_DEADLINE + 2 * RETRY + 1.0, f"gave up after {lost_after:.2f}s"
    assert not leader.manager.reconciling.is_set()
    core.create_namespaced_config_map(namespace, config_map("unseen", {}))
    reconciles.wait_for_key((namespace, "unseen"), by="control")
    assert holder(coordination, namespace).holder_identity == "usurper"  # not released
    assert (namespace, "unseen") not in reconciles.keys(by="partitioned")


def test_without_release_a_standby_waits_for_the_lease_to_expire(
    api_client: k8s_client.ApiClient, namespace: str
) -> None:
    stop_first = threading.Event()
    first = LeaderElector(api_client, election(namespace, "crashed", release_on_cancel=False))
    first_thread = threading.Thread(target=first.run, args=(stop_first,))
    first_thread.start()
    wait_until(lambda: first.is_leader)
    stop_first.set()  # renewals stop, as if the process died
    first_thread.join(WAIT)
    assert first.release() is False
    stopped_at = time.monotonic()

    stop_second = threading.Event()
    second = LeaderElector(api_client, election(namespace, "standby"))
    second_thread = threading.Thread(target=second.run, args=(stop_second,))
    second_thread.start()
    try:
        wait_until(lambda: second.is_leader)
        waited = time.monotonic() - stopped_at
    finally:
        stop_second.set()
        second_thread.join(WAIT)
    assert second.release() is True
    assert LEASE_SECONDS <= waited < LEASE_SECONDS + RENEW_DEADLINE + 1.0, f"{waited:.2f}s"


def test_a_leader_whose_api_server_stalls_gives_up_before_its_lease_could_expire(
    api_client: k8s_client.ApiClient,
    control_plane: ControlPlane,
    coordination: k8s_client.CoordinationV1Api,
    namespace: str,
) -> None:
    """The renew deadline holds while requests hang: no second leader can start meanwhile."""
    config = election(
        namespace, "stalled", lease_duration=4.0, renew_deadline=2.0, retry_period=0.4
    )
    lost_at: list[float] = []
    lost = threading.Event()

    def on_lost() -> None:
        lost_at.append(time.monotonic())
        lost.set()

    stop = threading.Event()
    elector = LeaderElector(api_client, config, on_lost_leadership=on_lost)
    thread = threading.Thread(target=elector.run, args=(stop,))
    thread.start()
    try:
        wait_until(lambda: elector.is_leader)
        renewed = _renewed_at(coordination, namespace)
        # Any later renewal only moves the real expiry later: this bound is conservative.
        expires_at = time.monotonic() - (datetime.now(UTC) - renewed).total_seconds()
        expires_at += config.lease_duration_seconds
        with stalled_apiserver(control_plane):
            lost.wait(config.lease_duration + WAIT_AFTER_EXPIRY)
    finally:
        stop.set()
        thread.join(WAIT)
    assert lost_at, "the leader kept leading while the API server did not answer"
    assert lost_at[0] < expires_at, f"gave up {lost_at[0] - expires_at:.2f}s after expiry"
    assert not elector.is_leader


def _renewed_at(coordination: k8s_client.CoordinationV1Api, namespace: str) -> datetime:
    renew_time = holder(coordination, namespace).renew_time
    assert isinstance(renew_time, datetime)
    return renew_time


def test_sigterm_shuts_the_operator_down_gracefully_and_releases_the_lease(
    kubeconfig: Path, coordination: k8s_client.CoordinationV1Api, namespace: str
) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        from kubernetes import config
        from noctaya.k8s.runtime import (
            InformerTiming, LeaderElectionConfig, Manager, ManagerOptions,
        )

        options = ManagerOptions(
            health_probe_address="0",
            informer_timing=InformerTiming(retry_initial=0.05, retry_max=0.5),
            leader_election=LeaderElectionConfig(
                namespace={namespace!r}, identity="signalled",
                lease_duration={LEASE_SECONDS}, renew_deadline={RENEW_DEADLINE},
                retry_period={RETRY},
            ),
        )
        manager = Manager(config.new_client_from_config(config_file=sys.argv[1]), options)
        manager.watch("v1", "ConfigMap", namespace={namespace!r})
        manager.run(lambda key: print("reconciled", *key, flush=True))
        print("stopped", flush=True)
        """
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script, str(kubeconfig)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        wait_until(lambda: _holder_or_none(coordination, namespace) == "signalled")
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=WAIT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert out.strip().splitlines()[-1] == "stopped"
    lease = holder(coordination, namespace)
    assert (lease.holder_identity or "", lease.lease_duration_seconds) == ("", 1)


def _holder_or_none(coordination: k8s_client.CoordinationV1Api, namespace: str) -> str | None:
    try:
        return str(holder(coordination, namespace).holder_identity)
    except k8s_client.ApiException:
        return None
