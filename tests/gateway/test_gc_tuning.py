"""The gateway process freezes what start-up left: checked in a gateway process of its own, since
freezing is for the whole interpreter."""

from __future__ import annotations

import json
import subprocess
import sys

SERVE_AND_REPORT = """
import asyncio, gc, json, os, signal, sys
from noctaya.gateway.process import gateway_main

async def main():
    async def report():
        for _ in range(1000):  # at most 10 s for the gateway to start
            if gc.get_freeze_count():
                break
            await asyncio.sleep(0.01)
        print(json.dumps({"frozen": gc.get_freeze_count()}))
        os.kill(os.getpid(), signal.SIGTERM)

    reporting = asyncio.ensure_future(report())
    code = await gateway_main.serve_until_signalled(gateway_main.load_config(os.environ), {})
    await reporting
    return code

sys.exit(asyncio.run(main()))
"""


def test_the_gateway_process_freezes_its_start_up_heap() -> None:
    env = {
        "NOCTAYA_BACKEND_URL": "http://127.0.0.1:9",
        "NOCTAYA_LISTEN_ADDR": "127.0.0.1:0",
        "NOCTAYA_SCALER_LISTEN_ADDR": "127.0.0.1:0",
    }
    result = subprocess.run(
        [sys.executable, "-c", SERVE_AND_REPORT],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["frozen"] > 10_000, "modules, server and app frozen"
