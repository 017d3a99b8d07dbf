"""`python -m noctaya.local.demo FILE.yaml` (what `make demo` runs): one cold request,
narrated.

It starts `noctaya-local FILE.yaml` on a free port, sends one streaming chat completion while
the engine is at zero (heartbeats arrive while the engine starts, then tokens, then `[DONE]`),
waits for the scale-down back to zero, shuts local mode down and exits 0 — or prints local
mode's log and exits 1 if any step misses its deadline. Plain `http.client`, so the SSE comment
lines the OpenAI SDK would hide are shown.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

from noctaya.gateway.process.config import GatewayConfig
from noctaya.local import log_lines

START_DEADLINE = 30.0
READ_TIMEOUT = 30.0
SCALE_DOWN_DEADLINE = 60.0
EXIT_DEADLINE = 30.0
READY_GRACE = GatewayConfig.ready_grace
"""How long the gateway keeps demand after the engine became ready (its activation grace)."""
_EVENTS = {
    "serving": log_lines.SERVING_RE,
    "started": log_lines.ENGINE_STARTED_RE,
    "cooldown": log_lines.SCALE_DOWN_PENDING_RE,
    "stopped": log_lines.ENGINE_STOPPED_RE,
}


class DemoFailed(RuntimeError):
    pass


class Transcript:
    """Timestamped lines from two threads (the request and local mode's log), in order."""

    def __init__(self) -> None:
        self._start = time.monotonic()
        self._lock = threading.Lock()

    def say(self, phase: str, text: str) -> None:
        with self._lock:
            print(f"[{time.monotonic() - self._start:5.1f}s] {phase:<15} {text}", flush=True)


class LocalLog:
    """Reads `noctaya-local`'s output; narrates engine events and hands them to the driver."""

    def __init__(self, stream: IO[str], transcript: Transcript, *, echo: bool) -> None:
        self.lines: list[str] = []
        self.events: queue.Queue[tuple[str, re.Match[str]]] = queue.Queue()
        self._transcript = transcript
        self._echo = echo
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))
            if self._echo:
                print(f"    {line.rstrip()}", flush=True)
            for name, pattern in _EVENTS.items():
                match = pattern.search(line)
                if match:
                    self._narrate(name, match)
                    self.events.put((name, match))

    def _narrate(self, name: str, match: re.Match[str]) -> None:
        say = self._transcript.say
        if name == "started":
            say("activating", f"noctaya-local started the engine (pid {match['pid']})")
        elif name == "cooldown":
            say("idle", f"demand ended: the engine stops in {match['s']}s unless demand returns")
        elif name == "stopped":
            say("scaled to zero", f"engine stopped (pid {match['pid']})")

    def wait_for(self, name: str, deadline: float) -> re.Match[str]:
        while True:
            try:
                event, match = self.events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if event == name:
                return match
        raise DemoFailed(f"no {name!r} event from noctaya-local in time")

    def join(self) -> None:
        self._thread.join(timeout=5)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="noctaya-local-demo", description=__doc__)
    parser.add_argument("file", type=Path, help="LLMService + InferenceRuntime YAML")
    parser.add_argument("--verbose", action="store_true", help="also show noctaya-local's log")
    args = parser.parse_args(argv)
    transcript = Transcript()
    print(f"Noctaya local mode demo: {args.file}", flush=True)
    local = subprocess.Popen(
        [sys.executable, "-m", "noctaya.local", str(args.file), "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
    )
    assert local.stdout is not None
    log = LocalLog(local.stdout, transcript, echo=args.verbose)
    try:
        run_demo(log, transcript)
        local.send_signal(signal.SIGTERM)
        code = local.wait(timeout=EXIT_DEADLINE)
        if code != 0:
            raise DemoFailed(f"noctaya-local exited with code {code}")
        transcript.say("shut down", "noctaya-local exited 0 (gateway and engine stopped)")
        return 0
    except (DemoFailed, OSError, subprocess.TimeoutExpired) as error:
        transcript.say("FAILED", str(error))
        print("noctaya-local log:", *log.lines[-60:], sep="\n    ", file=sys.stderr)
        return 1
    finally:
        if local.poll() is None:
            local.kill()
            local.wait()
        log.join()


def run_demo(log: LocalLog, transcript: Transcript) -> None:
    serving = log.wait_for("serving", time.monotonic() + START_DEADLINE)
    url, name = serving["url"], serving["name"]
    transcript.say("scaled to zero", f"gateway at {url}, no engine process running")
    transcript.say("request", "POST /v1/chat/completions with stream=true, engine at zero")
    tokens = stream_chat(url, name, transcript)
    transcript.say(
        "idle",
        f"{tokens} tokens; the gateway holds demand {READY_GRACE:g}s past readiness, "
        "then the cooldown runs",
    )
    started = log.wait_for("started", time.monotonic())
    stopped = log.wait_for("stopped", time.monotonic() + SCALE_DOWN_DEADLINE)
    if stopped["pid"] != started["pid"]:
        raise DemoFailed(f"engine {started['pid']} started but {stopped['pid']} stopped")
    if _running(int(stopped["pid"])):
        raise DemoFailed(f"engine pid {stopped['pid']} still exists after its stop")
    transcript.say("scaled to zero", f"engine process {stopped['pid']} is gone")


def stream_chat(base_url: str, model: str, transcript: Transcript) -> int:
    """Send one streaming chat completion and narrate each SSE line; return the token count."""
    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=READ_TIMEOUT)
    body = {"model": model, "messages": [{"role": "user", "content": "Hi"}], "stream": True}
    try:
        connection.request(
            "POST",
            f"{parts.path}/chat/completions",
            body=json.dumps(body),
            headers={"Content-Type": "application/json"},
        )
        response = connection.getresponse()
        transcript.say("activating", f"HTTP {response.status} {response.getheader('Content-Type')}")
        tokens = 0
        while raw := response.readline():
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if line.startswith(":"):
                transcript.say("activating", f"{line!r}  (keepalive while the engine starts)")
            elif line == "data: [DONE]":
                transcript.say("streaming", "data: [DONE]")
                return tokens
            elif line.startswith("data: "):
                tokens += 1
                transcript.say("streaming", f"token {_content(line[6:])!r}")
            elif line:
                transcript.say("streaming", line)
    finally:
        connection.close()
    raise DemoFailed("the stream ended without data: [DONE]")


def _content(data: str) -> str:
    try:
        return str(json.loads(data)["choices"][0]["delta"]["content"])
    except (ValueError, KeyError, IndexError, TypeError):
        return data


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


if __name__ == "__main__":
    raise SystemExit(main())
