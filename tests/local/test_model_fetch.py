"""A model the operator would stage with a Job is fetched by `noctaya-fetch` before the engine
starts, from a real hub endpoint (the fake hub the fetcher's own tests use), and reused."""

from __future__ import annotations

import re
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest
from fetch.fake_hub import COMMIT, Hub, serve
from noctaya.local.cli import main
from support.ports import free_port

from .conftest import StartLocal
from .support import runtime_doc, service_doc, write_manifest

MODEL = "hf://acme/tiny-model"
FILES = {"config.json": b'{"architectures": ["TinyForCausalLM"]}', "weights.bin": b"w" * 4096}
SUMMARY = re.compile(rf"noctaya-fetch: {MODEL}: fetched 4\.\d KiB in .+; ready at (?P<path>\S+)$")
ENGINE_MODEL = re.compile(r"engine started \(pid \d+\): .* --model=(?P<path>\S+)")


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[Hub]:
    with serve(Hub(files=FILES)) as running:
        monkeypatch.setenv("HF_ENDPOINT", running.url)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        yield running


def prewarmed_service(tmp_path: Path) -> Path:
    service = service_doc(model={"source": {"uri": MODEL}}, cache={"prewarm": True})
    service["spec"]["scaling"]["min"] = 1  # the engine starts at once, with its args logged
    return write_manifest(tmp_path / "svc.yaml", runtime_doc(free_port()), service)


def test_a_prewarmed_model_is_fetched_once_and_the_engine_gets_its_folder(
    hub: Hub, start_local: StartLocal, tmp_path: Path
) -> None:
    manifest = prewarmed_service(tmp_path)
    cache = tmp_path / "models"
    snapshot = cache / "hf/hub/models--acme--tiny-model/snapshots" / COMMIT

    first = start_local(manifest, "--cache", str(cache))
    first.wait_for(re.compile(rf"\[local\] .*fetching {MODEL} into {re.escape(str(cache))}"))
    assert first.wait_for(SUMMARY)["path"] == str(snapshot)
    assert first.wait_for(ENGINE_MODEL)["path"] == str(snapshot)
    assert first.stop() == 0
    assert (snapshot / "weights.bin").read_bytes() == FILES["weights.bin"]
    requests = len(hub.requests)
    assert requests > 0

    second = start_local(manifest, "--cache", str(cache))
    second.wait_for(re.compile(rf"noctaya-fetch: {MODEL}: already complete at {snapshot}$"))
    assert second.wait_for(ENGINE_MODEL)["path"] == str(snapshot)
    second.url()
    assert second.stop() == 0
    assert len(hub.requests) == requests, "the second start made no request to the hub"


def test_a_model_without_prewarm_is_left_to_the_engine_as_before(
    hub: Hub, start_local: StartLocal, tmp_path: Path
) -> None:
    service = service_doc(model={"source": {"uri": MODEL}})
    service["spec"]["scaling"]["min"] = 1
    manifest = write_manifest(tmp_path / "svc.yaml", runtime_doc(free_port()), service)

    local = start_local(manifest, "--cache", str(tmp_path / "models"))

    assert local.wait_for(ENGINE_MODEL)["path"] == "acme/tiny-model"
    assert local.stop() == 0
    assert hub.requests == []
    assert not (tmp_path / "models").exists()


def test_a_missing_noctaya_fetch_is_one_clear_line(
    hub: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = str(Path(sys.executable).with_name("noctaya-engine-stub"))
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setattr(sysconfig, "get_path", lambda name: str(empty))
    monkeypatch.setenv("PATH", str(empty))
    service = service_doc(model={"source": {"uri": MODEL}}, cache={"prewarm": True})
    manifest = write_manifest(
        tmp_path / "svc.yaml", runtime_doc(free_port(), command=engine), service
    )

    listen = ("--listen", "127.0.0.1:0", "--logs", str(tmp_path / "logs"))
    assert main([str(manifest), "--cache", str(tmp_path / "models"), *listen]) == 1

    [line] = [line for line in capsys.readouterr().err.splitlines() if "noctaya-fetch" in line]
    assert line.endswith(
        f"noctaya-fetch not found; install the noctaya-fetch package to fetch {MODEL}"
    )
    assert hub.requests == []


def test_a_mirror_in_the_runtime_env_is_where_the_fetch_goes(
    hub: Hub, start_local: StartLocal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runtime's hub-steering env reaches the fetch as it reaches the engine."""
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    service = service_doc(model={"source": {"uri": MODEL}}, cache={"prewarm": True})
    service["spec"]["scaling"]["min"] = 1
    runtime = runtime_doc(free_port(), env={"HF_ENDPOINT": hub.url})
    manifest = write_manifest(tmp_path / "svc.yaml", runtime, service)

    local = start_local(manifest, "--cache", str(tmp_path / "models"))

    assert local.wait_for(SUMMARY)["path"].endswith(COMMIT)
    assert local.stop() == 0
    assert hub.downloads("weights.bin")


def test_a_hub_secret_ref_needs_its_token_in_the_environment(
    hub: Hub,
    start_local: StartLocal,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    hub.token = "hf_local_secret"
    source = {"uri": MODEL, "secretRef": {"name": "hub-token"}}
    service = service_doc(model={"source": source}, cache={"prewarm": True})
    service["spec"]["scaling"]["min"] = 1
    manifest = write_manifest(tmp_path / "svc.yaml", runtime_doc(free_port()), service)

    assert main([str(manifest), "--cache", str(tmp_path / "models")]) == 2
    assert capsys.readouterr().err.strip() == (
        "noctaya-local: LLMService spec.model.source.secretRef: local mode cannot read Secret "
        '"hub-token"; set HF_TOKEN (or HF_TOKEN_FILE, a file holding it) to the hub token'
    )
    assert hub.requests == []

    monkeypatch.setenv("HF_TOKEN", hub.token)
    local = start_local(manifest, "--cache", str(tmp_path / "models"))
    assert local.wait_for(SUMMARY)
    assert local.stop() == 0
    assert "hf_local_secret" not in local.log()


def test_two_local_modes_on_one_model_download_it_once(
    hub: Hub, start_local: StartLocal, tmp_path: Path
) -> None:
    """Both fetch into one cache at once: one downloads, the other waits for it and starts
    its engine on the same folder."""
    cache = tmp_path / "models"
    snapshot = cache / "hf/hub/models--acme--tiny-model/snapshots" / COMMIT
    service = service_doc(model={"source": {"uri": MODEL}}, cache={"prewarm": True})
    service["spec"]["scaling"]["min"] = 1
    manifests = [
        write_manifest(tmp_path / f"svc-{port}.yaml", runtime_doc(port), service)
        for port in (free_port(), free_port())
    ]

    locals_ = [start_local(manifest, "--cache", str(cache)) for manifest in manifests]

    for local in locals_:
        assert local.wait_for(ENGINE_MODEL)["path"] == str(snapshot)
    assert len(hub.downloads("weights.bin")) == 1
    assert sum(local.count(SUMMARY) for local in locals_) == 1, "one of them fetched it"
    for local in locals_:
        assert local.stop() == 0
