"""`noctaya-fetch` as the prewarm Job runs it: a real process, its output and its exit code."""

from __future__ import annotations

import base64
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import PASSWORD, model_files, tree_files
from .fake_hub import Hub
from .fault_proxy import proxy_to
from .faults import Fault
from .registry import USER, RunningRegistry, push_files

COMMAND = str(Path(sys.executable).with_name("noctaya-fetch"))
HF_URI = "hf://acme/tiny-model"
PROGRESS_LINE = re.compile(
    rf"^{HF_URI}: [\d.]+ (B|KiB|MiB) of 256\.\d KiB \(\d+%\), [\d.]+ (B|KiB|MiB)/s, ETA .+$",
    re.MULTILINE,
)


def run(*arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [COMMAND, *arguments],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def hub_env(hub: Hub) -> dict[str, str]:
    return {"HF_ENDPOINT": hub.url, "MODELSCOPE_ENDPOINT": hub.url}


def test_progress_lines_summary_and_the_model_path_on_stdout(hub: Hub, tmp_path: Path) -> None:
    hub.fail(Fault("model.safetensors", "slow", slow_chunks=8, slow_delay=0.15))

    result = run(HF_URI, "--cache", str(tmp_path), "--progress-interval", "0.2", env=hub_env(hub))

    assert result.returncode == 0, result.stderr
    assert len(PROGRESS_LINE.findall(result.stderr)) >= 2, result.stderr
    summary = result.stderr.strip().splitlines()[-1]
    assert re.fullmatch(
        rf"noctaya-fetch: {HF_URI}: fetched 256\.\d KiB in [\d.]+ s \([\d.]+ \w+/s\); "
        rf"ready at {re.escape(result.stdout.strip())}",
        summary,
    ), summary
    assert tree_files(Path(result.stdout.strip())) == model_files()

    again = run(HF_URI, "--cache", str(tmp_path), env=hub_env(hub))
    assert again.returncode == 0
    assert again.stdout == result.stdout
    assert "already complete" in again.stderr


def test_oci_summary_counts_the_bytes_the_fetcher_wrote(
    registry: RunningRegistry, tmp_path: Path
) -> None:
    source = tmp_path / "weights.bin"
    source.write_bytes(bytes(range(256)) * 4096)
    digest = push_files(registry, "models/summary", "v1", [source])
    uri = f"oci://{registry.host}/models/summary@{digest}"
    config = registry.config_file(tmp_path)

    result = run(
        uri, "--cache", str(tmp_path / "cache"), "--plain-http", "--registry-config", str(config)
    )

    assert result.returncode == 0, result.stderr
    assert f"noctaya-fetch: {uri}: fetched 1.0 MiB in " in result.stderr


def test_ready_marker_is_written_after_the_model_and_only_on_success(
    hub: Hub, tmp_path: Path
) -> None:
    """A shared cache's pods wait for a cache-wide marker; the image has no shell to write it."""
    marker = tmp_path / "cache" / ".noctaya-ready"
    failed = run(
        "hf://acme/missing",
        "--cache",
        str(tmp_path / "cache"),
        "--ready-marker",
        str(marker),
        env=hub_env(hub),
    )
    assert failed.returncode == 2
    assert not marker.exists()

    result = run(
        HF_URI, "--cache", str(tmp_path / "cache"), "--ready-marker", str(marker), env=hub_env(hub)
    )

    assert result.returncode == 0, result.stderr
    assert marker.is_file()
    model_marker = tmp_path / "cache/hf/hub/models--acme--tiny-model/.noctaya-ready"
    assert model_marker.stat().st_mtime_ns <= marker.stat().st_mtime_ns


def test_a_terminal_gets_a_live_bar(hub: Hub, tmp_path: Path) -> None:
    hub.fail(Fault("model.safetensors", "slow", slow_chunks=6, slow_delay=0.2))
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [COMMAND, HF_URI, "--cache", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=terminal,
        env={**os.environ, **hub_env(hub)},
    )
    assert process.wait(timeout=120) == 0
    os.close(terminal)
    output = _read_all(controller)

    assert re.search(r"\r\x1b\[K\[#*\.*\] [\d.]+ \w+ of 256\.\d KiB \(\d+%\)", output), output


def test_permanent_failure_exits_2_naming_the_source_and_the_reason(
    hub: Hub, tmp_path: Path
) -> None:
    """The last line of stderr says it, and so does the termination message a kubelet reads
    (a file it creates for the container; none is created where it is absent)."""
    termination_log = tmp_path / "termination-log"
    termination_log.write_text("left by an earlier attempt, longer than the message")
    absent = tmp_path / "absent" / "termination-log"

    cache, env = str(tmp_path / "cache"), hub_env(hub)
    result = run(
        "hf://acme/missing", "--cache", cache, "--termination-log", str(termination_log), env=env
    )
    again = run("hf://acme/missing", "--cache", cache, "--termination-log", str(absent), env=env)

    assert result.returncode == again.returncode == 2
    expected = (
        "noctaya-fetch: hf://acme/missing: repository not found "
        "(or private and HF_TOKEN does not grant access)"
    )
    assert result.stderr.strip().splitlines()[-1] == expected
    assert termination_log.read_text() == expected
    assert not absent.parent.exists()
    assert result.stdout == ""


def test_transient_failure_exits_75_after_the_retries(tmp_path: Path) -> None:
    digest = "sha256:" + "a" * 64
    result = run(
        f"oci://127.0.0.1:9/models/tiny@{digest}",
        "--cache",
        str(tmp_path),
        "--plain-http",
        "--attempts",
        "2",
    )

    assert result.returncode == 75, result.stderr
    assert "(attempt 1 of 2); retrying in" in result.stderr
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith(f"noctaya-fetch: oci://127.0.0.1:9/models/tiny@{digest}: connection failed")
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["s3://bucket/model"], 'model uri scheme "s3" is not supported yet'),
        (["pvc://weights"], "pvc:// sources are mounted read-only"),
        (["oci://registry.example/model:latest"], "expected oci://"),
        (["hf://acme/tiny-model", "--size-cap", "lots"], "--size-cap: 'lots' is not a quantity"),
        (["hf://acme/tiny-model", "--attempts", "0"], "--attempts: '0' must be at least 1"),
    ],
)
def test_bad_input_exits_2_with_a_message_naming_it(
    tmp_path: Path, arguments: list[str], message: str
) -> None:
    result = run(*arguments, "--cache", str(tmp_path))

    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_hub_token_and_registry_credentials_never_appear_in_the_output(
    hub: Hub, registry: RunningRegistry, tmp_path: Path
) -> None:
    hub.token = "hf_do_not_print_me"
    secrets = [hub.token, PASSWORD, base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()]
    token_file = tmp_path / "hf-token"
    token_file.write_text(hub.token)
    outputs = []

    accepted = run(
        HF_URI,
        "--cache",
        str(tmp_path / "a"),
        env={**hub_env(hub), "HF_TOKEN_FILE": str(token_file)},
    )
    assert accepted.returncode == 0, accepted.stderr
    refused = run(
        HF_URI, "--cache", str(tmp_path / "b"), env={**hub_env(hub), "HF_TOKEN": "hf_wrong_token"}
    )
    assert refused.returncode == 2
    outputs += [accepted.stdout, accepted.stderr, refused.stdout, refused.stderr]

    config = registry.config_file(tmp_path)
    uri = f"oci://{registry.host}/models/missing@sha256:{'b' * 64}"
    pulled = run(
        uri, "--cache", str(tmp_path / "c"), "--plain-http", "--registry-config", str(config)
    )
    assert pulled.returncode == 2, pulled.stderr
    outputs += [pulled.stdout, pulled.stderr]

    for output in outputs:
        for secret in [*secrets, "hf_wrong_token"]:
            assert secret not in output


def _read_all(descriptor: int) -> str:
    chunks = []
    while True:
        try:
            chunk = os.read(descriptor, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(descriptor)
    return b"".join(chunks).decode(errors="replace")


def test_an_oci_fetch_imports_no_api_models() -> None:
    """The API models (pydantic) take a third of a second to import: a Job's start-up that
    every fetch pays, and none of them needs."""
    modules = "noctaya.fetch.cli, noctaya.fetch.sources, noctaya.fetch.oci"
    code = f"import sys, {modules}; print(sorted(m for m in sys.modules if 'pydantic' in m))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("uri", "endpoint"),
    [
        ("hf://acme/tiny-model", "HF_ENDPOINT"),
        ("modelscope://acme/tiny-model", "MODELSCOPE_ENDPOINT"),
    ],
)
def test_a_hub_behind_a_mirror_and_a_proxy_is_reached_through_them(
    hub: Hub, tmp_path: Path, uri: str, endpoint: str
) -> None:
    """The mirror's name does not resolve here: only the proxy in HTTP_PROXY can reach it."""
    with proxy_to(hub.url.removeprefix("http://")) as proxy:
        mirror = {endpoint: "http://hub-mirror.invalid", "HTTP_PROXY": proxy.url, "NO_PROXY": ""}
        result = run(uri, "--cache", str(tmp_path), env=mirror)

    assert result.returncode == 0, result.stderr
    assert tree_files(Path(result.stdout.strip())) == model_files()
    assert proxy.requests, "every request went through the proxy"
    assert len(proxy.requests) == len(hub.requests)


def test_a_registry_behind_a_proxy_is_reached_through_it(
    registry: RunningRegistry, tmp_path: Path
) -> None:
    source = tmp_path / "weights.bin"
    source.write_bytes(b"proxied" * 1000)
    digest = push_files(registry, "models/proxied", "v1", [source])
    with proxy_to(registry.host) as proxy:
        config = registry.config_file(tmp_path, host="registry.invalid:5000")
        result = run(
            f"oci://registry.invalid:5000/models/proxied@{digest}",
            "--cache",
            str(tmp_path / "cache"),
            "--plain-http",
            "--registry-config",
            str(config),
            env={"HTTP_PROXY": proxy.url, "NO_PROXY": ""},
        )

    assert result.returncode == 0, result.stderr
    assert tree_files(Path(result.stdout.strip())) == {"weights.bin": b"proxied" * 1000}
    assert any("/blobs/" in request.path for request in proxy.requests)
