"""`--api-key-file` on local mode's endpoint, over real sockets: everything but `/healthz` needs
the key (the status and the metrics name every model, and Prometheus sends the key as a Bearer
token), a request without it touches no service, and a key file replaced by a FIFO leaves local
mode answering and stopping on SIGTERM."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
from noctaya.gateway.requests.auth import KEY_MAX_AGE
from noctaya.local import log_lines
from support.ports import free_port

from .conftest import StartLocal
from .many import stub_file
from .support import LocalMode, wait_until

KEY = 'local "k3y" \\ with:odd/chars'
AUTH = {"Authorization": f"Bearer {KEY}"}
WRONG = {"Authorization": "Bearer not-the-key"}


def local_with_key(
    tmp_path: Path, start_local: StartLocal, *services: str
) -> tuple[LocalMode, str]:
    """Local mode serving `services` (engine stubs) with `<tmp_path>/api-key`: (it, endpoint)."""
    folder = tmp_path / "services"
    folder.mkdir()
    for name in services:
        stub_file(folder, name, free_port())
    key_file = tmp_path / "api-key"
    key_file.write_text(f"{KEY}\n", encoding="utf-8")
    local = start_local(folder, "--api-key-file", str(key_file))
    assert wait_until(lambda: local.count(log_lines.SERVING_RE) == len(services)), local.log()
    url = local.wait_for(log_lines.ENDPOINT_RE)["url"].removesuffix("/v1")
    return local, url


def status_of(client: httpx.Client, url: str) -> dict[str, Any]:
    services = client.get(f"{url}/noctaya/status", headers=AUTH).json()["services"]
    return {service["service"]: service for service in services}


def test_everything_but_healthz_needs_the_key(tmp_path: Path, start_local: StartLocal) -> None:
    local, url = local_with_key(tmp_path, start_local, "a", "b")
    with httpx.Client(timeout=10) as client:
        assert client.get(f"{url}/healthz").status_code == 200
        for path in ("/metrics", "/noctaya/status", "/v1/models", "/v1/models/a"):
            for method in ("GET", "HEAD"):
                for headers in ({}, WRONG):
                    refused = client.request(method, f"{url}{path}", headers=headers)
                    assert refused.status_code == 401, (method, path, headers)
                    assert refused.headers["www-authenticate"] == 'Bearer realm="noctaya"'
                answered = client.request(method, f"{url}{path}", headers=AUTH)
                assert answered.status_code == 200, (method, path)
        assert client.get(f"{url}/metrics").text == "unauthorized\n"
        assert client.get(f"{url}/v1/models").json()["error"]["code"] == "unauthorized"
        metrics = client.get(f"{url}/metrics", headers=AUTH).text
        assert 'noctaya_local_engine_state{service="a",state="cold"} 1' in metrics
        assert set(status_of(client, url)) == {"a", "b"}

        # Nothing about a service or its models without the key, and no traffic counted.
        for body in ({"model": "a"}, {"model": "nope"}, {}):
            refused = client.post(f"{url}/v1/chat/completions", json=body)
            assert refused.status_code == 401, body
            assert refused.json()["error"]["code"] == "unauthorized"
        seen = status_of(client, url)["a"]
        assert (seen["in_flight"], seen["last_request_seconds_ago"]) == (0, None)
    assert local.count(log_lines.ENGINE_STARTED_RE) == 0
    assert KEY not in local.log()


def _fifo(tmp_path: Path) -> Path:
    os.mkfifo(tmp_path / "fifo")
    return tmp_path / "fifo"


def _link_to_fifo(tmp_path: Path) -> Path:
    (tmp_path / "link").symlink_to(_fifo(tmp_path))
    return tmp_path / "link"


@pytest.mark.parametrize("replacement", [_fifo, _link_to_fifo], ids=["fifo", "link to a fifo"])
def test_a_key_file_replaced_by_a_fifo_leaves_local_mode_answering_and_sigterm_stops_it(
    tmp_path: Path, start_local: StartLocal, replacement: Any
) -> None:
    local, url = local_with_key(tmp_path, start_local, "a")
    key_file = tmp_path / "api-key"
    with httpx.Client(timeout=5) as client:
        assert client.get(f"{url}/v1/models", headers=AUTH).status_code == 200
        os.replace(replacement(tmp_path), key_file)

        def unavailable() -> bool:
            return client.get(f"{url}/v1/models", headers=AUTH).status_code == 503

        assert wait_until(unavailable, within=KEY_MAX_AGE + 2)
        answer = client.get(f"{url}/noctaya/status", headers=AUTH)
        assert (answer.status_code, answer.text) == (503, "gateway authentication unavailable\n")
        assert client.get(f"{url}/healthz").status_code == 200
    line = f"gateway authentication unavailable: read client API key: open {key_file}: a FIFO"
    local.wait_for(re.compile(re.escape(line)))
    assert local.stop(signal.SIGTERM) == 0
    assert KEY not in local.log()
