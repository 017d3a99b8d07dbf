"""Local mode's prewarm Job: `noctaya-fetch` fills a cache folder before the engine starts.

The same command the cluster's prewarm and staging Jobs run, started as a program rather than
imported, so the hub clients stay out of the gateway's imports. Whether a fetch is needed is the
plan's answer, the operator's (`ServingPlan.prewarm`: an `oci://` artifact always, a hub model
when `spec.cache.prewarm` asks for it), and the fetch gets the env the Job would get; the engine
is then planned with the fetched folder as `.Model.Path`. A second start finds
the fetcher's completion marker and makes no network request; two local modes fetching one model
into one cache download it once (the fetcher lets one of them own the download).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from noctaya.core.cache_planning import FETCH_COMMAND, fetch_uri
from noctaya.core.plan.serving import ServingPlan
from noctaya.core.values.go_text import go_quote
from noctaya.local.command import find_executable
from noctaya.local.errors import LocalConfigError, LocalRunError

log = logging.getLogger("noctaya.local")
STOP_GRACE = 10.0
"""How long an interrupted fetch may take to exit after SIGTERM; its `.partial` is resumed."""


@dataclass(frozen=True, slots=True)
class ModelFetch:
    """A fetch local mode runs before serving."""

    uri: str
    registry_config: str | None
    env: Mapping[str, str]
    """The runtime's hub-steering env (mirrors, proxies), set on top of local mode's own."""

    def argv(self, executable: str, cache: Path) -> list[str]:
        argv = [executable, self.uri, "--cache", str(cache)]
        if self.registry_config is not None:
            argv += ["--registry-config", self.registry_config]
        return argv


def default_cache(environ: Mapping[str, str]) -> Path:
    """`$XDG_CACHE_HOME/noctaya/models`, else `~/.cache/noctaya/models`."""
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "noctaya" / "models"


def plan_fetch(
    plan: ServingPlan, registry_config: str | None, environ: Mapping[str, str]
) -> ModelFetch | None:
    """The fetch the operator runs as a Job for this service, or None if it runs none.

    A hub token the model's `secretRef` names must be in the environment, whoever downloads:
    local mode reads no Secret, and the engine downloads a model that is not prewarmed.
    """
    model = plan.model
    token = model.token_env
    if token is not None and not (environ.get(token.name) or environ.get(f"{token.name}_FILE")):
        raise LocalConfigError(
            "LLMService spec.model.source.secretRef: local mode cannot read Secret "
            f"{go_quote(token.secret_name)}; set {token.name} (or {token.name}_FILE, a file "
            "holding it) to the hub token"
        )
    job = plan.prewarm
    if job is None:
        return None
    if model.oci_secret_name and registry_config is None:
        raise LocalConfigError(
            "LLMService spec.model.source.secretRef: local mode cannot read Secret "
            f"{go_quote(model.oci_secret_name)}; pass --registry-config with its "
            "dockerconfigjson file"
        )
    return ModelFetch(
        fetch_uri(model),
        registry_config if model.oci_secret_name else None,
        {entry.name: entry.value or "" for entry in job.runtime_env if entry.source is None},
    )


async def fetch_model(
    fetch: ModelFetch, cache: Path, environ: Mapping[str, str], stop: asyncio.Event
) -> str | None:
    """The fetched model's folder; None when `stop` (local mode's SIGINT/SIGTERM) is set first.

    The fetcher's progress goes straight to local mode's stderr (a live bar on a terminal); it
    runs in its own process group, so a terminal's Ctrl-C reaches local mode, which stops it.
    """
    executable = find_executable(FETCH_COMMAND)
    if executable is None:
        raise LocalRunError(
            f"{FETCH_COMMAND} not found; install the noctaya-fetch package to fetch {fetch.uri}"
        )
    log.info("fetching %s into %s", fetch.uri, cache)
    process = await asyncio.create_subprocess_exec(
        *fetch.argv(executable, cache),
        env={**environ, **fetch.env},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        process_group=0,
    )
    finished = asyncio.ensure_future(process.communicate())
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({finished, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not finished.done():
            await _stop(process)
            await finished
    if stop.is_set() and process.returncode != 0:
        log.info("fetch of %s interrupted", fetch.uri)
        return None
    stdout, _ = finished.result()
    lines = stdout.decode("utf-8", errors="replace").splitlines()
    if process.returncode != 0 or not lines:
        raise LocalRunError(
            f"{FETCH_COMMAND} could not fetch {fetch.uri} (exit code {process.returncode}); "
            "its message is above"
        )
    return lines[-1]


async def _stop(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        async with asyncio.timeout(STOP_GRACE):
            await process.wait()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
