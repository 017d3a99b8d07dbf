"""Every port a service takes is its own: checked at start-up against the other ports of its
local mode and the ports of every other running noctaya-local, even while their engines are
scaled to zero."""

from __future__ import annotations

import re
import signal
from pathlib import Path

from noctaya.local import log_lines
from support.ports import free_port

from .conftest import StartLocal
from .support import LocalMode, runtime_doc, service_doc, write_manifest


def manifest_for(tmp_path: Path, service: str, engine_port: int) -> Path:
    document = service_doc()
    document["metadata"]["name"] = service
    return write_manifest(tmp_path / f"{service}.yaml", runtime_doc(engine_port), document)


def refused(local: LocalMode, code: int = 1) -> str:
    assert local.exit_code() == code, local.log()
    assert local.count(log_lines.GATEWAY_STARTED_RE) == 0
    assert "Traceback" not in local.log()
    return local.log()


def test_a_second_service_on_the_same_engine_port_is_refused_naming_both(
    tmp_path: Path, start_local: StartLocal
) -> None:
    port = free_port()
    first = start_local(manifest_for(tmp_path, "first", port))
    first.url()
    second = start_local(manifest_for(tmp_path, "second", port))
    log = refused(second)
    assert (
        f'port {port}: LLMService "second" as its engine port (InferenceRuntime "stub" '
        "spec.container.port.containerPort) cannot have it: it is already used by "
        f'LLMService "first" as its engine port (InferenceRuntime "stub" '
        f"spec.container.port.containerPort) (noctaya-local pid {first.process.pid}, "
        f"{tmp_path / 'first.yaml'})"
    ) in log
    assert first.process.poll() is None, "the first service keeps serving"


def test_a_gateway_port_and_another_service_s_engine_port_collide_either_way(
    tmp_path: Path, start_local: StartLocal
) -> None:
    engine_port, gateway_port = free_port(), free_port()
    first = start_local(
        manifest_for(tmp_path, "first", engine_port), "--listen", f"127.0.0.1:{gateway_port}"
    )
    first.url()
    on_engine = start_local(
        manifest_for(tmp_path, "second", free_port()), "--listen", f"127.0.0.1:{engine_port}"
    )
    assert re.search(
        rf"port {engine_port}: local mode's endpoint \(--listen "
        rf"127\.0\.0\.1:{engine_port}\) cannot have it: it is already used by LLMService "
        r'"first" as its engine port',
        refused(on_engine),
    )
    on_gateway = start_local(manifest_for(tmp_path, "third", gateway_port))
    assert re.search(
        rf'port {gateway_port}: LLMService "third" as its engine port .* already used by '
        rf"local mode's endpoint \(--listen 127\.0\.0\.1:{gateway_port}\)",
        refused(on_gateway),
    )


def test_a_port_is_free_again_once_its_service_is_gone_even_by_sigkill(
    tmp_path: Path, start_local: StartLocal
) -> None:
    port = free_port()
    first = start_local(manifest_for(tmp_path, "first", port))
    first.url()
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    second = start_local(manifest_for(tmp_path, "second", port))
    assert 'serving LLMService "second"' in second.wait_for(log_lines.SERVING_RE).string


def test_the_endpoint_cannot_listen_on_an_engine_port(
    tmp_path: Path, start_local: StartLocal
) -> None:
    port = free_port()
    local = start_local(manifest_for(tmp_path, "svc", port), "--listen", f"127.0.0.1:{port}")
    log = refused(local, code=2)
    assert log == (
        f'noctaya-local: {tmp_path / "svc.yaml"}: LLMService "svc": port {port}, its engine port '
        '(InferenceRuntime "stub" spec.container.port.containerPort), is already local '
        f"mode's endpoint (--listen 127.0.0.1:{port}); each needs a port of its own"
    )


def test_two_services_of_one_local_mode_on_one_engine_port_are_refused_naming_both(
    tmp_path: Path, start_local: StartLocal
) -> None:
    """Their gateways would both reach whichever engine runs there."""
    port = free_port()
    first, second = service_doc(), service_doc()
    first["metadata"]["name"], second["metadata"]["name"] = "first", "second"
    write_manifest(tmp_path / "first.yaml", runtime_doc(port), first)
    write_manifest(tmp_path / "second.yaml", second)
    log = refused(start_local(tmp_path), code=2)
    assert log == (
        f'noctaya-local: {tmp_path / "second.yaml"}: LLMService "second": port {port}, its '
        'engine port (InferenceRuntime "stub" spec.container.port.containerPort), is already '
        'the engine port (InferenceRuntime "stub" spec.container.port.containerPort) of '
        'LLMService "first"; each needs a port of its own'
    )
