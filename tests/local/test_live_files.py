"""The served folder is watched: a file added, changed or removed applies to its services only,
while the others' requests run on; an edit that does not validate is refused with its message
and nothing changes. Real gateways and engine stubs, real file edits."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from noctaya.local import log_lines
from support.ports import free_port

from .conftest import StartLocal
from .many import models, stream_chat, stub_file
from .support import LocalMode, pid_exists, wait_until

SLOW = {"STUB_TOKEN_DELAY": "100ms"}
LONG = "tokens=40"  # four seconds of stream


def gateway_of(local: LocalMode, service: str, after: int = 0) -> int:
    pattern = re.compile(rf"{service}: gateway started \(pid (?P<pid>\d+)\)")
    return int(local.wait_for(pattern, after=after)["pid"])


def serve(start_local: StartLocal, folder: Path, count: int) -> tuple[LocalMode, str]:
    local = start_local(folder)
    assert wait_until(lambda: local.count(log_lines.SERVING_RE) == count), local.log()
    return local, local.wait_for(log_lines.ENDPOINT_RE)["url"]


def test_a_file_added_and_one_removed_while_streams_run_leave_the_other_streams_whole(
    tmp_path: Path, start_local: StartLocal
) -> None:
    stub_file(tmp_path, "a", free_port(), env=SLOW)
    stub_file(tmp_path, "b", free_port(), env=SLOW)
    local, url = serve(start_local, tmp_path, 2)
    b_gateway = gateway_of(local, "b")
    with ThreadPoolExecutor(2) as pool:
        running_a = pool.submit(stream_chat, url, "a", query=LONG)
        running_b = pool.submit(stream_chat, url, "b", query=LONG)
        assert wait_until(lambda: local.count(log_lines.ENGINE_STARTED_RE) == 2)
        stub_file(tmp_path, "c", free_port())
        (tmp_path / "b.yaml").unlink()
        local.wait_for(log_lines.SERVICE_ADDED_RE)
        local.wait_for(log_lines.SERVICE_REMOVED_RE)
        assert not running_a.done(), "the edits came while a streamed"
        streamed_a, streamed_b = running_a.result(), running_b.result()

    assert streamed_a.contents == [f"tok{i} " for i in range(40)]
    assert streamed_b.contents == [f"tok{i} " for i in range(40)], "b drained before it stopped"
    assert wait_until(lambda: not pid_exists(b_gateway))
    local.wait_for(re.compile(r"b: engine stopped"))
    assert sorted(models(url)) == ["a", "c"]
    gone = httpx.post(f"{url}/chat/completions", json={"model": "b"}, timeout=10)
    assert gone.status_code == 404
    assert stream_chat(url, "c").done
    assert "a: changed" not in local.log()
    assert local.count(re.compile(r"a: gateway started")) == 1, "a was left alone"


def test_a_changed_file_restarts_its_service_and_a_bad_edit_changes_nothing(
    tmp_path: Path, start_local: StartLocal
) -> None:
    a = stub_file(tmp_path, "a", free_port())
    stub_file(tmp_path, "b", free_port())
    local, url = serve(start_local, tmp_path, 2)
    first = gateway_of(local, "a")
    good = a.read_text(encoding="utf-8")

    a.write_text("kind: LLMService\nspec: [unclosed\n", encoding="utf-8")
    refused = local.wait_for(log_lines.EDIT_REFUSED_RE)
    assert refused["file"] == str(a)
    assert "invalid YAML" in refused.string
    lines = len(local.lines)
    a.write_text(good.replace("heartbeatInterval: 200ms", "heartbeatInterval: 0s"), "utf-8")
    refused = local.wait_for(log_lines.EDIT_REFUSED_RE, after=lines)
    assert "spec.endpoint.coldStart.heartbeatInterval: heartbeatInterval must be greater" in (
        refused.string
    )
    duplicate = tmp_path / "copy.yaml"
    duplicate.write_text(good.replace("stub-a", "stub-copy"), encoding="utf-8")
    refused = local.wait_for(re.compile(r"copy\.yaml: refused, .*metadata\.name is also the name"))
    assert f'LLMService "a": metadata.name is also the name of one in {a}' in refused.string
    duplicate.unlink()
    assert stream_chat(url, "a").done, "a still serves its last good file"
    assert pid_exists(first)

    edited = good.replace("heartbeatInterval: 200ms", "heartbeatInterval: 300ms")
    assert edited != good
    lines = len(local.lines)
    a.write_text(edited, encoding="utf-8")
    local.wait_for(re.compile(r"a: changed \("), after=lines)
    second = gateway_of(local, "a", after=lines)
    assert second != first
    assert wait_until(lambda: not pid_exists(first))
    assert stream_chat(url, "a").done
    assert local.count(re.compile(r"b: gateway started")) == 1
