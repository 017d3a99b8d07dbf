"""One run of `noctaya-local`: its services applied to the local workloads, served until
SIGINT/SIGTERM or a failure, then everything stopped (`noctaya.gateway.local.workloads` says
in which order).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Mapping

from noctaya.core.plan.serving import ServingPlan
from noctaya.gateway.local import log_lines
from noctaya.gateway.local.workloads import LocalWorkloads, Translate

log = logging.getLogger("noctaya.local")


async def run_local(plan: ServingPlan, translate: Translate, environ: Mapping[str, str]) -> int:
    """Serve until SIGINT/SIGTERM (exit code 0) or a failure (exit code 1, logged)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    workloads = LocalWorkloads(translate, environ)
    try:
        workloads.apply(plan)
        ended = workloads.processes(plan.service).ended
        stopped = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({ended, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
        if stop.is_set():
            log.info("shutting down")
            return 0
        return 1
    finally:
        await workloads.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        log.info(log_lines.STOPPED)
