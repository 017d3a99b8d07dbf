"""noctaya-local end to end: real gateway, real engine processes, real signals, on 127.0.0.1."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import stat
from pathlib import Path

import httpx
from noctaya.local import log_lines
from noctaya.local.command import find_executable
from support.ports import free_port

from .conftest import StartLocal
from .support import (
    DEADLINE,
    assert_scales_back_to_zero,
    engine_refuses_connections,
    kill_pid_in,
    output_holder,
    pid_exists,
    port_is_free,
    runtime_doc,
    service_doc,
    wait_until,
    wait_until_gone,
    write_manifest,
)

CHAT = {"model": "svc", "messages": [{"role": "user", "content": "hi"}]}
HELD = re.compile(r": noctaya: (starting|loading \d+s|ready)")
"""The gateway's heartbeats while the engine starts, as local mode's endpoint words them."""
STUB_LISTENING = re.compile(r"\[svc engine\] .*engine stub .* listening on")


def test_cold_stream_starts_the_engine_streams_tokens_and_scales_back_to_zero(
    tmp_path: Path, start_local: StartLocal
) -> None:
    port = free_port()
    local = start_local(write_manifest(tmp_path / "svc.yaml", runtime_doc(port), service_doc()))
    url = local.url()
    assert local.count(log_lines.ENGINE_STARTED_RE) == 0
    assert engine_refuses_connections(port)

    with httpx.stream(
        "POST", f"{url}/chat/completions", json={**CHAT, "stream": True}, timeout=30
    ) as response:
        assert response.status_code == 200
        lines = [line for line in response.iter_lines() if line]

    data = [line.removeprefix("data: ") for line in lines if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    tokens = [json.loads(chunk)["choices"][0]["delta"]["content"] for chunk in data[:-1]]
    assert tokens == ["tok0 ", "tok1 ", "tok2 "]
    held = lines[: lines.index(f"data: {data[0]}")]
    assert held, "the stream was held while the engine started"
    assert all(HELD.fullmatch(line) for line in held), held

    pid = int(local.wait_for(log_lines.ENGINE_STARTED_RE)["pid"])
    assert_scales_back_to_zero(local, pid, port)
    assert local.stop() == 0


def test_min_one_starts_the_engine_at_once_and_serves_without_a_cold_start(
    tmp_path: Path, start_local: StartLocal
) -> None:
    port = free_port()
    service = service_doc()
    service["spec"]["scaling"]["min"] = 1
    local = start_local(write_manifest(tmp_path / "svc.yaml", runtime_doc(port), service))
    url = local.url()
    pid = int(local.wait_for(log_lines.ENGINE_STARTED_RE)["pid"])
    assert "kept at 1" in local.log()
    with httpx.Client(timeout=30) as client:
        reply = client.post(f"{url}/chat/completions", json=CHAT)
    assert reply.status_code == 200
    assert reply.json()["choices"][0]["message"]["content"] == "tok0 tok1 tok2 "
    assert pid_exists(pid)
    assert local.stop() == 0
    assert local.count(log_lines.ENGINE_STOPPED_RE) == 1
    assert wait_until_gone(pid, within=5)


def test_sigint_on_an_idle_service_stops_the_gateway_and_exits_zero(
    tmp_path: Path, start_local: StartLocal
) -> None:
    manifest = write_manifest(tmp_path / "svc.yaml", runtime_doc(free_port()), service_doc())
    local = start_local(manifest)
    local.url()
    gateway = int(local.wait_for(log_lines.GATEWAY_STARTED_RE)["pid"])
    assert local.stop(signal.SIGINT) == 0
    assert wait_until_gone(gateway, within=5)
    assert local.lines[-1].endswith(f" {log_lines.STOPPED}")


def engine_script(tmp_path: Path, body: str) -> Path:
    """An executable shell script as the engine command; `{stub}` in `body` names the stub."""
    stub = find_executable("noctaya-engine-stub")
    assert stub is not None
    script = tmp_path / "engine.sh"
    script.write_text("#!/bin/sh\n" + body.replace("{stub}", stub), encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def stubborn_wrapper(tmp_path: Path) -> Path:
    """An engine command that ignores SIGTERM and runs the stub as its own child."""
    return engine_script(
        tmp_path,
        "trap '' TERM\n"
        '"{stub}" "$@" &\n'
        'echo $! > "$STUB_PID_FILE"\n'
        "while :; do sleep 0.1; done\n",
    )


def test_sigterm_stops_gateway_engine_and_its_children_even_when_the_engine_ignores_sigterm(
    tmp_path: Path, start_local: StartLocal
) -> None:
    port, pid_file = free_port(), tmp_path / "stub.pid"
    runtime = runtime_doc(
        port,
        command=str(stubborn_wrapper(tmp_path)),
        env={"STUB_PID_FILE": str(pid_file)},
        grace=1,
    )
    service = service_doc(endpoint={"coldStart": {"mode": "reject"}})
    local = start_local(write_manifest(tmp_path / "svc.yaml", runtime, service))
    url = local.url()
    gateway = int(local.wait_for(log_lines.GATEWAY_STARTED_RE)["pid"])

    with httpx.Client(timeout=30) as client:
        cold = client.post(f"{url}/chat/completions", json=CHAT)
    assert cold.status_code == 503  # reject mode; the activation lease still starts the engine
    engine = int(local.wait_for(log_lines.ENGINE_STARTED_RE)["pid"])
    local.wait_for(STUB_LISTENING)
    stub = int(pid_file.read_text(encoding="utf-8"))
    assert pid_exists(stub)

    assert local.stop(signal.SIGTERM) == 0
    assert "still up after 1s: killing it" in local.log()
    for pid in (gateway, engine, stub):
        assert not pid_exists(pid), local.log()
    assert not processes_in_group(engine)


def processes_in_group(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(entry.name))
    return members


def test_a_busy_engine_port_is_reported_before_anything_starts(
    tmp_path: Path, start_local: StartLocal
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as squatter:
        port = squatter.getsockname()[1]
        manifest = write_manifest(tmp_path / "svc.yaml", runtime_doc(port), service_doc())
        local = start_local(manifest)
        assert local.exit_code() == 1
    assert (
        f"engine port {port} (InferenceRuntime spec.container.port.containerPort) on "
        "127.0.0.1 is already in use"
    ) in local.log()
    assert local.count(log_lines.GATEWAY_STARTED_RE) == 0
    assert "Traceback" not in local.log()


def test_a_gateway_that_dies_is_started_again_and_its_engine_stopped_meanwhile(
    tmp_path: Path, start_local: StartLocal
) -> None:
    service = service_doc(endpoint={"coldStart": {"mode": "reject"}})
    local = start_local(write_manifest(tmp_path / "svc.yaml", runtime_doc(free_port()), service))
    url = local.url()
    gateway = int(local.wait_for(log_lines.GATEWAY_STARTED_RE)["pid"])
    with httpx.Client(timeout=30) as client:
        assert client.post(f"{url}/chat/completions", json=CHAT).status_code == 503
    engine = int(local.wait_for(log_lines.ENGINE_STARTED_RE)["pid"])
    started = len(local.lines)

    os.kill(gateway, signal.SIGKILL)

    local.wait_for(re.compile("the gateway exited unexpectedly \\(killed by SIGKILL\\)"))
    assert wait_until_gone(engine)
    again = int(local.wait_for(log_lines.GATEWAY_STARTED_RE, after=started)["pid"])
    assert again != gateway
    local.wait_for(log_lines.SERVING_RE, after=started)
    with httpx.Client(timeout=30) as client:  # the endpoint reaches the new gateway
        assert client.post(f"{url}/chat/completions", json=CHAT).status_code == 503
    assert local.process.poll() is None
    assert local.stop() == 0


def test_sigterm_ends_local_mode_even_when_an_engine_child_holds_its_output(
    tmp_path: Path, start_local: StartLocal
) -> None:
    port, holder = free_port(), tmp_path / "holder.pid"
    script = engine_script(tmp_path, f'{output_holder(holder)} &\nexec "{{stub}}" "$@"\n')
    service = service_doc()
    service["spec"]["scaling"]["min"] = 1
    runtime = runtime_doc(port, command=str(script), grace=1)
    local = start_local(write_manifest(tmp_path / "svc.yaml", runtime, service))
    try:
        local.url()
        engine = int(local.wait_for(log_lines.ENGINE_STARTED_RE)["pid"])
        local.wait_for(STUB_LISTENING)
        assert wait_until(holder.exists)

        assert local.stop(signal.SIGTERM) == 0
        assert not pid_exists(engine)
        assert port_is_free(port)
    finally:
        kill_pid_in(holder)


def test_sigkill_of_local_mode_takes_the_gateway_the_engine_and_its_children_along(
    tmp_path: Path, start_local: StartLocal
) -> None:
    port, pid_file = free_port(), tmp_path / "stub.pid"
    runtime = runtime_doc(
        port, command=str(stubborn_wrapper(tmp_path)), env={"STUB_PID_FILE": str(pid_file)}
    )
    service = service_doc()
    service["spec"]["scaling"]["min"] = 1
    local = start_local(write_manifest(tmp_path / "svc.yaml", runtime, service))
    gateway_port = int(local.url().rsplit(":", 1)[1].split("/")[0])
    gateway = int(local.wait_for(log_lines.GATEWAY_STARTED_RE)["pid"])
    engine = int(local.wait_for(log_lines.ENGINE_STARTED_RE)["pid"])
    local.wait_for(STUB_LISTENING)
    children = [gateway, engine, int(pid_file.read_text(encoding="utf-8"))]
    try:
        local.process.kill()
        local.process.wait(timeout=DEADLINE)
        assert wait_until(lambda: not any(pid_exists(pid) for pid in children)), [
            pid for pid in children if pid_exists(pid)
        ]
        assert wait_until(lambda: port_is_free(port) and port_is_free(gateway_port))
    finally:
        for pid in children:
            if pid_exists(pid):
                os.kill(pid, signal.SIGKILL)
