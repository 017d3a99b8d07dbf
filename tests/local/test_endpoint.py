"""One endpoint for every service of a folder, over real sockets with real gateways and engine
stubs: requests routed by `model` (the service's name or the engine's), the answers the endpoint
gives itself (model list with states, unknown model, missing model), a service's own endpoint,
the metrics of every service, and a clean stop of everything."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import httpx
import openai
import pytest
from noctaya.local import log_lines
from support.ports import free_port

from .conftest import StartLocal
from .many import models, status, stream_chat, stub_file
from .support import LocalMode, pid_exists, wait_until

CHAT = {"messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Three services: `alpha` (its engine answers to `org/alpha-7b` as well), `beta`, and `gamma`,
    which has an endpoint of its own."""
    served = tmp_path / "models"
    served.mkdir()
    stub_file(
        served,
        "alpha",
        free_port(),
        args=["--served-model-name=org/alpha-7b"],
    )
    stub_file(served, "beta", free_port(), env={"STUB_TOKEN_COUNT": "4"})
    own = f"127.0.0.1:{free_port()}"
    stub_file(served, "gamma", free_port(), annotations={"serving.noctaya.io/local-listen": own})
    (served / "notes.txt").write_text("not a manifest", encoding="utf-8")
    return served


def serving_all(local: LocalMode, count: int) -> str:
    """The endpoint, once `count` services serve."""
    assert wait_until(lambda: local.count(log_lines.SERVING_RE) == count), local.log()
    return local.wait_for(log_lines.ENDPOINT_RE)["url"]


def test_requests_go_to_the_service_their_model_names_and_the_rest_is_answered_cold(
    folder: Path, start_local: StartLocal
) -> None:
    local = start_local(folder)
    url = serving_all(local, 3)

    listed = models(url)
    assert sorted(listed) == ["beta", "gamma", "org/alpha-7b"]
    assert {model["noctaya"]["service"] for model in listed.values()} == {"alpha", "beta", "gamma"}
    assert {model["noctaya"]["state"] for model in listed.values()} == {"cold"}
    assert (listed["beta"]["object"], listed["beta"]["owned_by"]) == ("model", "noctaya")
    one = httpx.get(f"{url}/models/org/alpha-7b", timeout=10)
    assert one.json()["id"] == "org/alpha-7b"
    assert local.count(log_lines.ENGINE_STARTED_RE) == 0, "listing models starts nothing"

    unknown = httpx.post(f"{url}/chat/completions", json={**CHAT, "model": "delta"}, timeout=10)
    assert unknown.status_code == 404
    assert unknown.json() == {
        "error": {
            "message": 'The model "delta" does not exist; this endpoint serves "alpha", "beta", '
            '"gamma", "org/alpha-7b"',
            "type": "invalid_request_error",
            "code": "model_not_found",
        }
    }
    missing = httpx.post(f"{url}/chat/completions", json=CHAT, timeout=10)
    assert (missing.status_code, missing.json()["error"]["code"]) == (400, "model_required")
    assert httpx.get(f"{url}/models/delta", timeout=10).status_code == 404

    by_name = stream_chat(url, "alpha")
    by_engine_name = stream_chat(url, "org/alpha-7b")
    beta = stream_chat(url, "beta")
    assert by_name.contents == by_engine_name.contents == ["tok0 ", "tok1 ", "tok2 "]
    assert beta.contents == ["tok0 ", "tok1 ", "tok2 ", "tok3 "]  # beta's own engine
    started = {
        m["service"] for line in local.lines if (m := log_lines.ENGINE_STARTED_RE.search(line))
    }
    assert started == {"alpha", "beta"}
    assert status(url)["gamma"]["state"] == "cold"
    assert (local.logs / "beta.log").read_text().count("[engine]") >= 1
    assert "[engine]" not in (local.logs / "gamma.log").read_text()

    with openai.OpenAI(base_url=url, api_key="unused", timeout=60, max_retries=0) as client:
        assert sorted(model.id for model in client.models.list().data) == sorted(listed)
        with pytest.raises(openai.NotFoundError, match="does not exist"):
            client.chat.completions.create(model="delta", messages=[])
        reply = client.chat.completions.create(model="beta", messages=[])
    assert reply.choices[0].message.content == "tok0 tok1 tok2 tok3 "


def test_a_service_s_own_endpoint_serves_it_whatever_the_model_says(
    folder: Path, start_local: StartLocal
) -> None:
    own = re.search(r"local-listen: (\S+)", (folder / "gamma.yaml").read_text())
    assert own is not None
    local = start_local(folder)
    serving_all(local, 3)
    gamma = local.wait_for(re.compile(r'serving LLMService "gamma" at (?P<url>\S+) '))["url"]
    assert gamma == f"http://{own[1]}/v1"
    assert sorted(models(gamma)) == ["gamma"]
    assert stream_chat(gamma, "anything").contents == ["tok0 ", "tok1 ", "tok2 "]
    started = [
        m["service"] for line in local.lines if (m := log_lines.ENGINE_STARTED_RE.search(line))
    ]
    assert started == ["gamma"]


def test_metrics_show_every_service_and_sigterm_stops_every_process(
    folder: Path, start_local: StartLocal
) -> None:
    local = start_local(folder)
    url = serving_all(local, 3)
    assert stream_chat(url, "beta").done
    local.wait_for(log_lines.ENGINE_STARTED_RE)
    metrics = httpx.get(url.removesuffix("/v1") + "/metrics", timeout=10).text
    assert 'noctaya_gateway_requests_total{service="beta",code="200"} 1.0' in metrics
    assert 'noctaya_local_engine_state{service="beta",state="ready"} 1.0' in metrics
    assert 'noctaya_local_engine_state{service="alpha",state="cold"} 1.0' in metrics
    assert 'noctaya_local_engine_starts_total{service="beta"} 1.0' in metrics
    assert 'noctaya_local_gateway_up{service="gamma"} 1.0' in metrics
    assert metrics.count("# TYPE noctaya_gateway_pending gauge") == 1
    children = local.child_pids()
    assert len(children) == 4  # three gateways, one engine
    assert local.stop(signal.SIGTERM) == 0
    assert not [pid for pid in children if pid_exists(pid)]
    assert local.lines[-1].endswith(f" {log_lines.STOPPED}")
