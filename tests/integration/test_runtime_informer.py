"""Informers against the real API server: delivery, selectors, lost connections, restarts."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from noctaya.k8s.runtime import (
    Informer,
    InformerTiming,
    KindNotServed,
    ResourceKind,
    ResourceResolver,
)
from noctaya.k8s.runtime.informer import WatchTarget
from support.envtest import ControlPlane
from support.fake_clock import FakeClock
from support.operator_process import grant, service_account_token, token_kubeconfig

from .runtime_harness import FAST, WAIT, config_map, wait_until

pytestmark = pytest.mark.integration

CONFIG_MAPS = ResourceKind("v1", "ConfigMap")

Event = tuple[str, str, Any]  # (kind of change, object name, its data after the change)


class Recorder:
    """An informer event handler that remembers what it was told, for assertions."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._changed = threading.Condition()

    def on_add(self, obj: dict[str, Any]) -> None:
        self._record(("add", obj["metadata"]["name"], obj.get("data")))

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self._record(("update", new["metadata"]["name"], new.get("data")))

    def on_delete(self, obj: dict[str, Any]) -> None:
        self._record(("delete", obj["metadata"]["name"], obj.get("data")))

    def wait_for(self, *expected: Event) -> list[Event]:
        """Block until every expected event arrived; return everything recorded so far."""
        with self._changed:
            arrived = self._changed.wait_for(
                lambda: all(e in self.events for e in expected), timeout=WAIT
            )
            assert arrived, f"waited {WAIT}s for {expected}; got {self.events}"
            return list(self.events)

    def _record(self, event: Event) -> None:
        with self._changed:
            self.events.append(event)
            self._changed.notify_all()


class TcpProxy:
    """A loopback TCP forwarder that can be cut (refusing connections) and restored."""

    def __init__(self, upstream_port: int) -> None:
        self._upstream = ("127.0.0.1", upstream_port)
        self._listener: socket.socket | None = None
        self._connections: list[socket.socket] = []
        self._lock = threading.Lock()
        self.port = 0

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Close every connection and stop listening: clients see resets, then refusals."""
        with self._lock:
            listener, self._listener = self._listener, None
            connections, self._connections = self._connections, []
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
            listener.close()
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                downstream, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._upstream)
            with self._lock:
                self._connections += [downstream, upstream]
            for source, sink in ((downstream, upstream), (upstream, downstream)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


@pytest.fixture
def start_informer() -> Iterator[Callable[..., tuple[Informer, Recorder]]]:
    started: list[Informer] = []

    def start(
        client: k8s_client.ApiClient, target: WatchTarget, timing: InformerTiming = FAST
    ) -> tuple[Informer, Recorder]:
        informer = Informer(ResourceResolver(client), target, timing)
        recorder = Recorder()
        informer.add_handler(recorder)
        informer.start()
        started.append(informer)
        assert informer.wait_synced(WAIT), f"{target} never synced"
        return informer, recorder

    yield start
    for informer in started:
        informer.stop()


@pytest.fixture
def proxied_informer(
    control_plane: ControlPlane,
    api_client: k8s_client.ApiClient,
    core: k8s_client.CoreV1Api,
    namespace: str,
    start_informer: Any,
) -> Iterator[tuple[Informer, Recorder, TcpProxy]]:
    """An informer on ConfigMaps kept, changed and removed, reaching the server via a proxy."""
    for name in ("kept", "changed", "removed"):
        core.create_namespaced_config_map(namespace, config_map(name, {"v": "1"}))
    proxy = TcpProxy(control_plane.secure_port)
    proxy.start()
    informer, recorder = start_informer(
        _client_via(api_client, proxy.port), WatchTarget(CONFIG_MAPS, namespace)
    )
    recorder.wait_for(*(("add", name, {"v": "1"}) for name in ("kept", "changed", "removed")))
    yield informer, recorder, proxy
    proxy.cut()


def test_informer_lists_existing_objects_then_delivers_create_update_and_delete(
    api_client: k8s_client.ApiClient,
    core: k8s_client.CoreV1Api,
    namespace: str,
    start_informer: Any,
) -> None:
    core.create_namespaced_config_map(namespace, config_map("before", {"v": "0"}))
    informer, recorder = start_informer(api_client, WatchTarget(CONFIG_MAPS, namespace))
    assert recorder.wait_for(("add", "before", {"v": "0"}))

    core.create_namespaced_config_map(namespace, config_map("app", {"v": "1"}))
    core.patch_namespaced_config_map("app", namespace, {"data": {"v": "2"}})
    core.delete_namespaced_config_map("app", namespace)

    events = recorder.wait_for(
        ("add", "app", {"v": "1"}), ("update", "app", {"v": "2"}), ("delete", "app", {"v": "2"})
    )
    assert [e for e in events if e[1] == "app"] == [
        ("add", "app", {"v": "1"}),
        ("update", "app", {"v": "2"}),
        ("delete", "app", {"v": "2"}),
    ]
    assert [obj["metadata"]["name"] for obj in informer.store.list()] == ["before"]
    cached = informer.store.get((namespace, "before"))
    assert cached is not None
    assert cached["kind"] == "ConfigMap"


def test_cached_objects_leave_out_managed_fields_listed_or_watched(
    api_client: k8s_client.ApiClient,
    core: k8s_client.CoreV1Api,
    namespace: str,
    start_informer: Any,
) -> None:
    """The cache of 1,000 services' objects stays bounded by what they say, not by the
    server-side apply bookkeeping the API server keeps beside it."""
    core.create_namespaced_config_map(namespace, config_map("listed", {"v": "1"}))
    informer, recorder = start_informer(api_client, WatchTarget(CONFIG_MAPS, namespace))
    core.create_namespaced_config_map(namespace, config_map("watched", {"v": "1"}))
    recorder.wait_for(("add", "listed", {"v": "1"}), ("add", "watched", {"v": "1"}))
    server = core.read_namespaced_config_map("watched", namespace)
    assert server.metadata.managed_fields, "the API server keeps managedFields for this object"

    cached = {obj["metadata"]["name"]: obj["metadata"] for obj in informer.store.list()}

    assert set(cached) == {"listed", "watched"}
    assert [name for name, meta in cached.items() if "managedFields" in meta] == []
    assert cached["watched"]["resourceVersion"] == server.metadata.resource_version


def test_informer_sees_only_its_namespace_and_label_selector(
    api_client: k8s_client.ApiClient,
    core: k8s_client.CoreV1Api,
    namespace: str,
    start_informer: Any,
) -> None:
    target = WatchTarget(CONFIG_MAPS, namespace, "app.kubernetes.io/managed-by=noctaya")
    informer, recorder = start_informer(api_client, target)
    managed = {"app.kubernetes.io/managed-by": "noctaya"}
    core.create_namespaced_config_map(namespace, config_map("foreign", {"v": "x"}))
    core.create_namespaced_config_map("default", config_map(f"{namespace}-elsewhere", {}, managed))
    core.create_namespaced_config_map(namespace, config_map("ours", {"v": "1"}, managed))
    recorder.wait_for(("add", "ours", {"v": "1"}))
    # Dropping the label takes the object out of the selection: a delete for this informer.
    core.patch_namespaced_config_map("ours", namespace, {"metadata": {"labels": None}})
    events = recorder.wait_for(("delete", "ours", {"v": "1"}))
    core.delete_namespaced_config_map(f"{namespace}-elsewhere", "default")
    assert {name for _, name, _ in events} == {"ours"}
    assert len(informer.store) == 0


def change_then_reconnect(
    core: k8s_client.CoreV1Api, namespace: str, proxy: TcpProxy, recorder: Recorder
) -> list[Event]:
    """Update `changed`, delete `removed` and create `created` while the informer is cut off,
    reconnect it, and return what it delivered once all three changes have arrived."""
    core.patch_namespaced_config_map("changed", namespace, {"data": {"v": "2"}})
    core.delete_namespaced_config_map("removed", namespace)
    core.create_namespaced_config_map(namespace, config_map("created", {"v": "1"}))
    proxy.start()
    return recorder.wait_for(
        ("update", "changed", {"v": "2"}),
        ("delete", "removed", {"v": "1"}),
        ("add", "created", {"v": "1"}),
    )


def test_changes_made_while_the_connection_was_cut_are_delivered_when_it_returns(
    proxied_informer: tuple[Informer, Recorder, TcpProxy],
    core: k8s_client.CoreV1Api,
    namespace: str,
) -> None:
    informer, recorder, proxy = proxied_informer

    proxy.cut()
    wait_until(lambda: informer.failures > 0)  # the watch is down, retrying against a refusal
    events = change_then_reconnect(core, namespace, proxy, recorder)

    assert ("update", "kept", {"v": "1"}) not in events
    assert sorted(obj["metadata"]["name"] for obj in informer.store.list()) == [
        "changed",
        "created",
        "kept",
    ]


def test_after_an_api_server_restart_the_expired_watch_relists_and_delivers_what_changed(
    proxied_informer: tuple[Informer, Recorder, TcpProxy],
    control_plane: ControlPlane,
    core: k8s_client.CoreV1Api,
    namespace: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The restarted server's watch cache starts afresh: resuming from the old resourceVersion
    gets 410 Gone, and only the relist can tell what happened while the watch was down."""
    informer, recorder, proxy = proxied_informer
    caplog.set_level(logging.INFO, logger="noctaya.k8s.runtime.informer")
    lists_before = informer.relists

    proxy.cut()
    control_plane.restart_apiserver()
    events = change_then_reconnect(core, namespace, proxy, recorder)

    assert informer.relists > lists_before
    assert any("410 Gone" in record.getMessage() for record in caplog.records)
    assert ("update", "kept", {"v": "1"}) not in events  # the relist skips unchanged objects

    core.patch_namespaced_config_map("kept", namespace, {"data": {"v": "3"}})
    recorder.wait_for(("update", "kept", {"v": "3"}))  # and the new watch runs


def test_a_resync_redelivers_every_cached_object_as_an_update_without_asking_the_server(
    api_client: k8s_client.ApiClient,
    core: k8s_client.CoreV1Api,
    namespace: str,
    start_informer: Any,
) -> None:
    core.create_namespaced_config_map(namespace, config_map("steady", {"v": "1"}))
    timing = InformerTiming(retry_initial=0.05, retry_max=0.5, resync_period=1.0)
    informer, recorder = start_informer(api_client, WatchTarget(CONFIG_MAPS, namespace), timing)
    recorder.wait_for(("update", "steady", {"v": "1"}))
    assert informer.relists == 1


def test_a_kind_the_server_does_not_serve_counts_as_synced_and_empty(
    api_client: k8s_client.ApiClient, start_informer: Any
) -> None:
    informer, _ = start_informer(
        api_client, WatchTarget(ResourceKind("absent.noctaya.io/v1", "Nothing"))
    )
    assert informer.synced
    assert len(informer.store) == 0


def test_a_kind_it_may_be_refused_counts_as_empty_until_it_may_list_it(
    api_client: k8s_client.ApiClient,
    kubeconfig: Path,
    core: k8s_client.CoreV1Api,
    namespace: str,
    tmp_path: Path,
    start_informer: Any,
) -> None:
    """As the operator watches its gateways' endpoint readers where a platform may withhold
    the RBAC: the start is not held up, and the objects arrive once the RBAC is granted."""
    core.create_namespaced_service_account(
        namespace, k8s_client.V1ServiceAccount(metadata=k8s_client.V1ObjectMeta(name="reader"))
    )
    core.create_namespaced_config_map(namespace, config_map("kept", {"v": "1"}))
    token = service_account_token(api_client, namespace, "reader")
    config = token_kubeconfig(kubeconfig, token, tmp_path / "reader.kubeconfig")
    reader = k8s_config.new_client_from_config(config_file=str(config))  # type: ignore[no-untyped-call]
    try:
        refused = Informer(ResourceResolver(reader), WatchTarget(CONFIG_MAPS, namespace), FAST)
        refused.start()
        informer, recorder = start_informer(
            reader, WatchTarget(CONFIG_MAPS, namespace, forbidden_is_empty=True)
        )
        assert len(informer.store) == 0
        assert not refused.wait_synced(1.0)  # a watch that may not be refused waits for it
        refused.stop()

        rule = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "watch"]}
        grant(api_client, [role(namespace, rule), role_binding(namespace, "reader")])
        recorder.wait_for(("add", "kept", {"v": "1"}))
    finally:
        reader.close()


def role(namespace: str, rule: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "reader", "namespace": namespace},
        "rules": [rule],
    }


def role_binding(namespace: str, account: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "reader", "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }


def _client_via(api_client: k8s_client.ApiClient, port: int) -> k8s_client.ApiClient:
    """The same credentials, connecting through a loopback port of our own."""
    configuration = k8s_client.Configuration()
    for field in (
        "ssl_ca_cert",
        "cert_file",
        "key_file",
        "verify_ssl",
        "api_key",
        "api_key_prefix",
    ):
        setattr(configuration, field, getattr(api_client.configuration, field))
    configuration.host = f"https://127.0.0.1:{port}"
    return k8s_client.ApiClient(configuration)


def test_a_kind_found_missing_is_not_looked_up_again_until_its_ttl_passes(
    kubeconfig: Path,
) -> None:
    """Each miss costs a full rediscovery of every API group, so misses are remembered."""
    clock = FakeClock(start=0.0)
    client = k8s_config.new_client_from_config(config_file=str(kubeconfig))
    resolver = ResourceResolver(client, not_served_ttl=10.0, clock=clock)
    absent = ResourceKind("absent.noctaya.io/v1", "Nothing")
    with pytest.raises(KindNotServed):
        resolver.resolve(absent)
    client.configuration.host = "https://127.0.0.1:1"  # from here on, any request fails
    clock.now = 9.9
    with pytest.raises(KindNotServed):
        resolver.resolve(absent)  # answered from memory
    clock.now = 10.0
    with pytest.raises(Exception, match=r"127\.0\.0\.1") as asked:
        resolver.resolve(absent)
    assert not isinstance(asked.value, KindNotServed)
