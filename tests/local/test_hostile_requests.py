"""Requests local mode's endpoint must answer without waking anything: the model list asked for
with HEAD or a trailing slash. Real local mode, real gateways and engine stubs."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from noctaya.local import log_lines
from support.ports import free_port

from .conftest import StartLocal
from .many import status, stub_file

QUIET = 2.0
"""Far longer than a request's demand takes to start an engine (the stub's start is logged)."""


def test_head_and_a_trailing_slash_on_the_model_list_start_no_engine(
    tmp_path: Path, start_local: StartLocal
) -> None:
    """One service, so a request the endpoint does not take for the model list goes to its
    gateway as demand, and starts its engine."""
    stub_file(tmp_path, "a", free_port())
    local = start_local(tmp_path)
    url = local.url().removesuffix("/v1")
    with httpx.Client(timeout=10) as client:
        listed = client.get(f"{url}/v1/models").content
        one = client.get(f"{url}/v1/models/a").content
        for path, expected in (
            ("/v1/models/", listed),
            ("/v1/models", listed),
            ("/v1/models/a/", one),
            ("/v1/models/a", one),
        ):
            for method in ("GET", "HEAD"):
                answer = client.request(method, f"{url}{path}")
                assert answer.status_code == 200, (method, path)
                assert answer.content == (expected if method == "GET" else b"")
                assert answer.headers["content-length"] == str(len(expected))
    time.sleep(QUIET)
    assert local.count(log_lines.ENGINE_STARTED_RE) == 0, local.log()
    assert status(local.url())["a"]["state"] == "cold"
