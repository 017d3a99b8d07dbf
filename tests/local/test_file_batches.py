"""What changed in a served folder between two looks is judged as one set: files renamed over
each other, moved, swapped, or in conflict until another file goes, end as the files on disk
declare them, whatever order the changes came in, and later edits still apply. Real local mode,
real gateways, real renames."""

from __future__ import annotations

import os
import re
from pathlib import Path

import httpx
from noctaya.local import log_lines
from support.ports import free_port

from .conftest import StartLocal
from .many import models, stream_chat, stub_file
from .support import LocalMode, wait_until


def serving(start_local: StartLocal, folder: Path, names: list[str]) -> tuple[LocalMode, str]:
    local = start_local(folder)
    assert wait_until(lambda: local.count(log_lines.SERVING_RE) == len(names)), local.log()
    return local, local.wait_for(log_lines.ENDPOINT_RE)["url"]


def serves(url: str, names: list[str]) -> bool:
    return sorted(models(url)) == sorted(names)


def unknown(url: str, name: str) -> bool:
    answer = httpx.post(f"{url}/chat/completions", json={"model": name}, timeout=10)
    return answer.status_code == 404


def edited(path: Path) -> None:
    """A change of the service's settings that restarts it."""
    text = path.read_text(encoding="utf-8")
    assert "heartbeatInterval: 200ms" in text
    staged = path.with_name(f".{path.name}")
    staged.write_text(text.replace("heartbeatInterval: 200ms", "heartbeatInterval: 300ms"), "utf-8")
    os.rename(staged, path)


def test_a_file_renamed_over_another_services_file_serves_what_the_files_declare(
    tmp_path: Path, start_local: StartLocal
) -> None:
    stub_file(tmp_path, "a", free_port())
    stub_file(tmp_path, "b", free_port())
    local, url = serving(start_local, tmp_path, ["a", "b"])

    os.rename(tmp_path / "b.yaml", tmp_path / "a.yaml")  # mv b.yaml a.yaml
    local.wait_for(re.compile(r"a: removed \("))
    assert wait_until(lambda: serves(url, ["b"]))
    assert unknown(url, "a")
    assert stream_chat(url, "b").done
    assert local.count(re.compile(r"b: gateway started")) == 1, "b's file was renamed, no more"
    assert not local.count(log_lines.EDIT_REFUSED_RE)

    lines = len(local.lines)
    os.utime(tmp_path / "a.yaml")  # touch
    stub_file(tmp_path, "c", free_port())
    local.wait_for(re.compile(r"c: added \("), after=lines)
    edited(tmp_path / "a.yaml")
    local.wait_for(re.compile(r"b: changed \("), after=lines)
    assert wait_until(lambda: serves(url, ["b", "c"]))
    assert stream_chat(url, "b").done
    assert not local.count(log_lines.EDIT_REFUSED_RE)


def test_files_moved_renamed_in_a_chain_and_swapped_keep_every_service(
    tmp_path: Path, start_local: StartLocal
) -> None:
    """New names sort before the old ones, so judged one file at a time a service would be added
    while its old file still declared it (refused), then removed with its old file. Each step
    is a rename; a look may come between two of them, and what is served in the end is what the
    files declare."""
    for name in ("a", "b", "c"):
        stub_file(tmp_path, name, free_port())
    local, url = serving(start_local, tmp_path, ["a", "b", "c"])

    os.rename(tmp_path / "a.yaml", tmp_path / "0-a.yaml")  # moved
    os.rename(tmp_path / "c.yaml", tmp_path / "1-c.yaml")  # c.yaml -> 1-c.yaml, then
    os.rename(tmp_path / "b.yaml", tmp_path / "c.yaml")  # b.yaml -> c.yaml
    lines = len(local.lines)
    assert wait_until(lambda: serves(url, ["a", "b", "c"]))
    os.rename(tmp_path / "c.yaml", tmp_path / ".swap")  # swap c.yaml (b) and 1-c.yaml (c)
    os.rename(tmp_path / "1-c.yaml", tmp_path / "c.yaml")
    os.rename(tmp_path / ".swap", tmp_path / "1-c.yaml")

    edited(tmp_path / "0-a.yaml")
    local.wait_for(re.compile(r"a: changed \("), after=lines)
    edited(tmp_path / "1-c.yaml")
    local.wait_for(re.compile(r"b: changed \("), after=lines)
    assert serves(url, ["a", "b", "c"])
    for name in ("a", "b", "c"):
        assert stream_chat(url, name).done


def test_a_refused_set_is_judged_again_when_another_file_changes(
    tmp_path: Path, start_local: StartLocal
) -> None:
    a = stub_file(tmp_path, "a", free_port())
    local, url = serving(start_local, tmp_path, ["a"])

    (tmp_path / "copy.yaml").write_bytes(a.read_bytes())  # cp a.yaml copy.yaml
    refused = local.wait_for(re.compile(r"copy\.yaml: refused, .*metadata\.name is also the name"))
    assert str(a) in refused.string
    a.unlink()  # the copy is a's file now
    edited(tmp_path / "copy.yaml")
    local.wait_for(re.compile(r"a: changed \("))
    assert serves(url, ["a"])
    assert stream_chat(url, "a").done
    assert not local.count(log_lines.SERVICE_REMOVED_RE)


def test_a_batch_applies_its_valid_files_while_its_invalid_ones_keep_their_last_good_version(
    tmp_path: Path, start_local: StartLocal
) -> None:
    folder, staged = tmp_path / "served", tmp_path / "staged"
    folder.mkdir()
    staged.mkdir()
    for name in ("a", "b", "c"):
        stub_file(folder, name, free_port())
    local, url = serving(start_local, folder, ["a", "b", "c"])

    (staged / "a.yaml").write_text("kind: LLMService\nspec: [unclosed\n", encoding="utf-8")
    (staged / "bad.yaml").write_text("kind: Deployment\n", encoding="utf-8")
    stub_file(staged, "d", free_port())
    stub_file(staged, "e", free_port())
    os.rename(folder / "c.yaml", staged / "c-moved.yaml")
    os.rename(folder / "b.yaml", staged / "b-moved.yaml")
    for name in ("a", "bad", "d", "e"):
        os.rename(staged / f"{name}.yaml", folder / f"{name}.yaml")
    os.rename(staged / "b-moved.yaml", folder / "0-b.yaml")  # b moved to a file sorting first
    os.rename(staged / "c-moved.yaml", folder / "0-c.yaml")  # c too

    for name in ("d", "e"):
        local.wait_for(re.compile(rf"{name}: added \("))
    refused = {
        Path(match["file"]).name
        for line in local.lines
        if (match := log_lines.EDIT_REFUSED_RE.search(line))
    }
    assert wait_until(lambda: serves(url, ["a", "b", "c", "d", "e"]))
    assert refused <= {"a.yaml", "bad.yaml"}
    assert "a.yaml" in refused
    assert stream_chat(url, "a").done, "a serves its last good version"
    lines = len(local.lines)
    edited(folder / "0-b.yaml")
    local.wait_for(re.compile(r"b: changed \("), after=lines)
