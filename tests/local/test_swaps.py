"""Engines taking turns on a device budget, with real gateways, engine stubs and clients: who is
stopped for whom, what held clients are told meanwhile, and who never is stopped. Who holds a
device is read from the processes themselves (`DeviceWatch`: their CUDA_VISIBLE_DEVICES in
/proc), not from local mode's log."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from noctaya.local import log_lines
from support.ports import free_port

from .conftest import StartLocal
from .many import DeviceWatch, slow_to_stop, status, stream_chat, stub_file
from .support import LocalMode, wait_until

SLOW = {"STUB_TOKEN_DELAY": "100ms"}


def started(local: LocalMode, service: str) -> list[int]:
    """The pids of the engines started for `service`, in order."""
    return [
        int(match["pid"])
        for line in local.lines
        if (match := log_lines.ENGINE_STARTED_RE.search(line)) and match["service"] == service
    ]


def line_index(local: LocalMode, text: str) -> int:
    return next(index for index, line in enumerate(local.lines) if text in line)


def serve(
    start_local: StartLocal, folder: Path, watch: DeviceWatch, *flags: str
) -> tuple[LocalMode, str]:
    """Local mode on `folder` with `flags`, once every service serves; and its endpoint."""
    local = start_local(folder, *flags, env=watch.env)
    names = sorted(path.stem for path in folder.glob("*.yaml"))
    assert wait_until(lambda: local.count(log_lines.SERVING_RE) == len(names)), local.log()
    return local, local.wait_for(log_lines.ENDPOINT_RE)["url"]


def test_a_cold_model_takes_the_device_of_the_idle_one_and_its_stream_hears_the_swap(
    tmp_path: Path, start_local: StartLocal
) -> None:
    stub_file(tmp_path, "a", free_port(), command=slow_to_stop(tmp_path), grace=1)
    stub_file(tmp_path, "b", free_port())
    with DeviceWatch() as watch:
        local, url = serve(start_local, tmp_path, watch, "--devices", "0", "--min-residency", "0s")
        first = stream_chat(url, "a")
        assert first.done
        assert watch.holders()[0].devices == ("0",)

        second = stream_chat(url, "b")

    assert watch.most_at_once == {"0": 1}, "never two engines on the device"
    assert second.contents == ["tok0 ", "tok1 ", "tok2 "]
    comments = second.comments
    assert ": noctaya: stopping a" in comments, comments
    loading = next(i for i, line in enumerate(comments) if line.startswith(": noctaya: loading"))
    assert comments.index(": noctaya: stopping a") < loading
    assert line_index(local, "a: swapping out: its engine stops to hand its devices to b") < (
        line_index(local, "a: engine stopped")
    )
    assert line_index(local, "a: engine stopped") < line_index(local, "b: engine started")
    groups = watch.groups_seen()
    assert groups == {*started(local, "a"), *started(local, "b")}, "each engine held the device"
    now = status(url)
    assert (now["a"]["state"], now["a"]["devices"]) == ("swapped out", [])
    assert now["b"]["devices"] == ["0"]
    assert wait_until(lambda: status(url)["b"]["state"] == "ready")
    swap_in = status(url)["b"]["last_start"]
    assert swap_in["stopped"] == ["a"]
    assert swap_in["stop_seconds"] >= 1.0, "a ignores SIGTERM: stopped by SIGKILL after 1 s"
    assert 0 <= swap_in["start_seconds"] < swap_in["stop_seconds"]
    assert swap_in["load_seconds"] > 0


def test_a_busy_engine_is_never_stopped_and_a_cold_model_s_queue_is_served_together(
    tmp_path: Path, start_local: StartLocal
) -> None:
    """a streams; three requests for b queue meanwhile and wait for a's stream to end; b then
    serves all three with one start before a, asked for again while b loaded, gets the device
    back."""
    stub_file(tmp_path, "a", free_port(), env=SLOW)
    stub_file(tmp_path, "b", free_port(), env={**SLOW, "STUB_STARTUP_DELAY": "1s"})
    with DeviceWatch() as watch, ThreadPoolExecutor(5) as pool:
        local, url = serve(start_local, tmp_path, watch, "--devices", "0", "--min-residency", "0s")
        long_a = pool.submit(stream_chat, url, "a", query="tokens=30")
        assert wait_until(lambda: status(url)["a"]["state"] == "ready")
        queued_b = [pool.submit(stream_chat, url, "b", query="tokens=10") for _ in range(3)]
        assert wait_until(lambda: status(url)["b"]["in_flight"] == 3)
        assert wait_until(lambda: local.count(log_lines.ENGINE_STARTED_RE) == 2, within=60)
        again_a = pool.submit(stream_chat, url, "a")  # while b loads
        a1, bs, a2 = long_a.result(), [each.result() for each in queued_b], again_a.result()

    assert a1.contents == [f"tok{i} " for i in range(30)], "never cut short"
    for b in bs:
        assert b.contents == [f"tok{i} " for i in range(10)]
        assert ": noctaya: waiting for a" in b.comments
        assert b.first("data: {") > a1.ended, "not before a's stream ended"
    assert len(started(local, "b")) == 1, "one start served the whole queue"
    assert a2.first("data: {") > max(b.ended for b in bs), "b's queue first"
    assert {": noctaya: waiting for b", ": noctaya: stopping b"} & set(a2.comments)
    assert len(started(local, "a")) == 2
    assert watch.most_at_once == {"0": 1}


def test_a_client_that_leaves_does_not_abort_the_load_another_waits_for(
    tmp_path: Path, start_local: StartLocal
) -> None:
    stub_file(tmp_path, "a", free_port())
    stub_file(tmp_path, "b", free_port(), env={"STUB_STARTUP_DELAY": "2s"})
    with DeviceWatch() as watch:
        local, url = serve(start_local, tmp_path, watch, "--devices", "0", "--min-residency", "0s")
        assert stream_chat(url, "a").done
        with ThreadPoolExecutor(1) as pool:
            staying = pool.submit(stream_chat, url, "b")
            body = {"model": "b", "messages": [], "stream": True}
            with httpx.stream("POST", f"{url}/chat/completions", json=body, timeout=30) as left:
                next(line for line in left.iter_lines() if line.startswith(": noctaya:"))
            # the first client is gone; the other still waits for the load
            stayed = staying.result()
    assert stayed.contents == ["tok0 ", "tok1 ", "tok2 "]
    assert len(started(local, "b")) == 1
    assert "b: engine stopped" not in local.log()


def test_the_least_recently_used_idle_engine_goes_first_and_a_pinned_one_never(
    tmp_path: Path, start_local: StartLocal
) -> None:
    for name in ("a", "b", "c"):
        stub_file(tmp_path, name, free_port())
    stub_file(tmp_path, "p", free_port(), annotations={"serving.noctaya.io/local-pinned": "true"})
    with DeviceWatch() as watch:
        flags = ("--devices", "0,1", "--min-residency", "0s")
        local, url = serve(start_local, tmp_path, watch, *flags)

        def swapped(model: str) -> list[str]:
            """Request `model`; the services swapped out for it."""
            before = len(local.lines)
            assert stream_chat(url, model).done
            return [
                match["service"]
                for line in local.lines[before:]
                if (match := log_lines.SWAP_OUT_RE.search(line))
            ]

        assert [swapped(model) for model in ("a", "b", "a")] == [[], [], []]
        assert swapped("c") == ["b"], "b was used less recently than a"
        assert swapped("p") == ["a"], "a was used less recently than c"
        assert swapped("b") == ["c"], "p, pinned, was used least recently of all"
        devices = {name: each["devices"] for name, each in status(url).items()}

    assert len(started(local, "p")) == 1
    assert "p: engine stopped" not in local.log()
    assert (devices["a"], devices["c"]) == ([], [])
    assert sorted(devices["p"] + devices["b"]) == ["0", "1"]
    assert watch.most_at_once == {"0": 1, "1": 1}


def test_without_devices_named_the_vendor_plugin_s_list_is_the_budget(
    tmp_path: Path, start_local: StartLocal
) -> None:
    """nvidia-smi (a script printing what the real one prints) lists two GPUs; a service needing
    both gets both, in CUDA_VISIBLE_DEVICES; one needing three is refused before anything runs."""
    tools = tmp_path / "bin"
    tools.mkdir()
    smi = tools / "nvidia-smi"
    listing = "GPU 0: NVIDIA L4 (UUID: GPU-0)\nGPU 1: NVIDIA L4 (UUID: GPU-1)"
    smi.write_text(f"#!/bin/sh\necho '{listing}'\n", encoding="utf-8")
    smi.chmod(0o755)
    path = {"PATH": f"{tools}:{os.environ['PATH']}"}
    folder = tmp_path / "models"
    folder.mkdir()
    stub_file(folder, "a", free_port(), resources={"accelerators": 2})
    with DeviceWatch() as watch:
        local = start_local(folder, env={**watch.env, **path})
        url = local.url()
        assert (
            "nvidia devices 0,1 (found by the nvidia vendor plugin), handed to engines in "
            "CUDA_VISIBLE_DEVICES" in local.log()
        )
        assert stream_chat(url, "a").done
        assert [holder.devices for holder in watch.holders()] == [("0", "1")]

    stub_file(folder, "a", free_port(), resources={"accelerators": 3})
    refused = start_local(folder, env=path)
    assert refused.exit_code() == 2
    assert refused.log() == (
        f'noctaya-local: {folder / "a.yaml"}: LLMService "a" spec.resources.accelerators: '
        "Invalid value: 3: more than the 2 nvidia device(s) local mode may use (found by the "
        "nvidia vendor plugin)"
    )
