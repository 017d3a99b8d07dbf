"""The local part of Getting started, command for command, as a new user runs it.

The commands are read from the page (and the snippet files it includes), not restated here:
`make demo` (its own recipe; the `sync` prerequisite it shares with `make test` is this
suite's own environment), then `noctaya-local` on the demo manifest with the `curl` request
and the `openai` SDK script, pointed at the port local mode actually took.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from local.support import LocalMode

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "getting-started.md"
DOCUMENTED_ADDRESS = "127.0.0.1:8080"
_SH_BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.DOTALL | re.MULTILINE)
_SNIPPET = re.compile(r'--8<-- "([^"]+)"')


def local_part() -> str:
    return PAGE.read_text(encoding="utf-8").split("## On a cluster")[0]


def shell_blocks() -> list[str]:
    return [block.strip() for block in _SH_BLOCK.findall(local_part())]


def snippet(language: str) -> Path:
    """The file the page includes in its `language` block of the local part."""
    blocks = re.findall(rf"^```{language}\n(.*?)^```$", local_part(), re.DOTALL | re.MULTILINE)
    included = [found for block in blocks if (found := _SNIPPET.fullmatch(block.strip()))]
    assert len(included) == 1, f"one {language} snippet expected in the local part"
    return REPO / included[0][1]


def recipe(target: str) -> list[str]:
    dry = subprocess.run(
        ["make", "-n", target], cwd=REPO, capture_output=True, text=True, check=True
    )
    return dry.stdout.splitlines()


def test_make_demo_serves_a_cold_request_and_scales_back_to_zero() -> None:
    assert shell_blocks()[0] == "make demo"
    prerequisite = recipe("sync")
    commands = [line for line in recipe("demo") if line not in prerequisite]
    assert commands, "make demo runs nothing of its own"
    for command in commands:
        done = subprocess.run(
            ["bash", "-c", command], cwd=REPO, capture_output=True, text=True, timeout=180
        )
        assert done.returncode == 0, done.stdout + done.stderr


def test_local_mode_answers_curl_and_the_openai_sdk() -> None:
    start = next(block for block in shell_blocks() if "noctaya-local" in block)
    program, manifest = shlex.split(start)
    assert program == ".venv/bin/noctaya-local"
    local = LocalMode(REPO / manifest)
    try:
        address = urlsplit(local.url()).netloc
        curl = snippet("sh").read_text(encoding="utf-8").replace(DOCUMENTED_ADDRESS, address)
        streamed = subprocess.run(
            ["bash", "-c", curl], capture_output=True, text=True, timeout=60, check=True
        )
        assert "tok0" in streamed.stdout
        assert streamed.stdout.rstrip().endswith("data: [DONE]")

        script = snippet("python").read_text(encoding="utf-8")
        assert DOCUMENTED_ADDRESS in script
        answered = subprocess.run(
            [sys.executable, "-c", script.replace(DOCUMENTED_ADDRESS, address)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert answered.stdout.startswith("tok0 tok1")
    finally:
        local.teardown()
