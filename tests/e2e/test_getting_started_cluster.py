"""The cluster part of Getting started, command for command, on the box.

The commands are read from docs/getting-started.md (its ```sh and ```python blocks after
"## On a cluster", snippets included), not restated here, and run as a user types them, with
the box's kubectl and the pinned helm first on PATH, KUBECONFIG on the box and `ctr` run on
every node's containerd. `SUBSTITUTED` names the few commands the box does otherwise, and why; the
two that never end (the watch and the port forward) run in the background, as in a second
terminal, and the test waits for what the page tells the reader to wait for.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helm.chart import Helm, locate_helm
from images.conftest import built_images  # noqa: F401  (the session's image archives)
from kubernetes import client as k8s_client
from noctaya.core.api import Phase
from support.cluster import Cluster, locate_programs

from .serving import REPO, diagnosed, install_serving, status
from .workloads import wait_for

PAGE = REPO / "docs" / "getting-started.md"
_BLOCK = re.compile(r"^```(sh|python)\n(.*?)^```$", re.DOTALL | re.MULTILINE)
_SNIPPET = re.compile(r'--8<-- "([^"]+)"')
_SECTION = re.compile(r"^### (.+)$", re.MULTILINE)

_NO_NETWORK = "the box has no network: it comes up with KEDA built from its Go module (addons.py)"
_NO_A10 = "the box has no A10 node and no Hugging Face Hub: step 5 is checked, not served"
SUBSTITUTED = {
    "helm repo add kedacore https://kedacore.github.io/charts": _NO_NETWORK,
    "helm install keda kedacore/keda --namespace keda --create-namespace": _NO_NETWORK,
    "sudo make images": "the session's `built_images` runs images/build.sh, the script it runs",
    "kubectl apply -n ai -f examples/nvidia/a10/llmservice.yaml": _NO_A10,
    "kubectl -n ai port-forward service/qwen3-8b-a10 8080:80": _NO_A10,
}
WATCH = "kubectl get llms -n ai -w"
FORWARD = "kubectl -n ai port-forward service/demo 8080:80"
REMOVAL = "6. Removing it"
NAMESPACE, SERVICE = "ai", "demo"
FORWARDED = ("127.0.0.1", 8080)
_HELM_HOMES = ("CONFIG", "CACHE", "DATA")
_PHASES = {phase.value for phase in Phase}

pytestmark = pytest.mark.timeout(600)


@dataclass(frozen=True)
class Step:
    section: str  # the `###` heading it is under
    language: str  # "sh": one command (continuation lines kept), "python": one script
    text: str


def cluster_steps() -> list[Step]:
    """The cluster part's commands and scripts in page order."""
    part = PAGE.read_text(encoding="utf-8").split("## On a cluster", 1)[1]
    headings = list(_SECTION.finditer(part))
    steps = []
    for block in _BLOCK.finditer(part):
        section = next(h[1] for h in reversed(headings) if h.start() < block.start())
        language, body = block[1], block[2]
        if included := _SNIPPET.fullmatch(body.strip()):
            body = (REPO / included[1]).read_text(encoding="utf-8")
        if language == "python":
            steps.append(Step(section, language, body))
        else:
            steps += [Step(section, language, command) for command in _commands(body)]
    return steps


def _commands(block: str) -> list[str]:
    """One command a line; a line ending in a backslash goes on with the next."""
    commands, current = [], ""
    for line in block.strip().splitlines():
        current += line
        if line.endswith("\\"):
            current += "\n"
        elif current.strip():
            commands.append(current)
            current = ""
    return commands


class Background:
    """A command that runs until stopped, its output in a file read while it runs."""

    def __init__(self, command: str, env: dict[str, str], log: Path) -> None:
        self.command, self.log = command, log
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                ["bash", "-c", command],
                cwd=REPO,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def running(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"`{self.command}` exited early:\n{self.output()}")
        return True

    def stop(self) -> None:
        """Ctrl-C, as the page says."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


class Terminal:
    """Runs the page's commands as a user's shell would, from the repository root."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env, self.logs = env, logs
        self.background: list[Background] = []

    def run(self, command: str, timeout: float = 300) -> str:
        done = self._run(command, timeout)
        assert done.returncode == 0, f"`{command}` failed:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def succeeds(self, command: str, timeout: float = 300) -> bool:
        return self._run(command, timeout).returncode == 0

    def start(self, command: str) -> Background:
        started = Background(command, self.env, self.logs / f"background-{len(self.background)}")
        self.background.append(started)
        return started

    def python(self, script: str) -> str:
        done = self._run([sys.executable, "-c", script], timeout=120)
        assert done.returncode == 0, f"the Python script failed:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def stop_all(self) -> None:
        for started in self.background:
            started.stop()

    def _run(self, command: str | list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        """`command` is a shell line, or an argument vector run as it is."""
        return subprocess.run(
            ["bash", "-c", command] if isinstance(command, str) else command,
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


@pytest.fixture
def terminal(
    cluster: Cluster,
    built_images: dict[str, Path],  # noqa: F811  (the archives `make images` writes)
    gpus: None,
    tmp_path: Path,
) -> Iterator[Terminal]:
    """A shell on the box with GPUs advertised. The guide starts from a cluster without
    Noctaya and ends by removing it: a session whose other modules installed it already gets
    its install back afterwards, as their `installed` fixture made it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    helm = locate_helm()
    (bin_dir / "kubectl").symlink_to(locate_programs().path("kubectl"))
    (bin_dir / "helm").symlink_to(helm)
    _ctr_on_every_node(bin_dir / "ctr", cluster)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "KUBECONFIG": str(cluster.kubeconfig),
        **{f"HELM_{kind}_HOME": str(tmp_path / "helm" / kind.lower()) for kind in _HELM_HOMES},
    }
    shell = Terminal(env, tmp_path)
    removal = [s.text for s in cluster_steps() if s.section == REMOVAL]
    installed_before = shell.succeeds("helm status noctaya --namespace noctaya-system")
    if installed_before:
        for command in removal:
            shell.succeeds(command)
    try:
        yield shell
    finally:
        shell.stop_all()
        if shell.succeeds("helm status noctaya --namespace noctaya-system"):
            for command in removal:  # the test stopped before step 6
                shell.succeeds(command)
        if installed_before:
            install_serving(cluster, list(built_images.values()), Helm(helm, tmp_path / "helm"))


def test_every_substitution_names_a_command_of_the_page() -> None:
    commands = [step.text for step in cluster_steps() if step.language == "sh"]
    assert set(SUBSTITUTED) <= set(commands)
    assert {WATCH, FORWARD} <= set(commands)
    assert any(step.section == REMOVAL for step in cluster_steps())


@pytest.mark.e2e
def test_the_cluster_part_of_getting_started_runs_as_written(
    terminal: Terminal, api_client: k8s_client.ApiClient
) -> None:
    core = k8s_client.CoreV1Api(api_client)
    watch: Background | None = None
    before_request = 0
    with diagnosed(api_client, NAMESPACE):
        for step in cluster_steps():
            if step.language == "python":  # the second request, warm
                assert terminal.python(step.text).startswith("tok0 tok1")
                assert watch is not None
                _back_to_zero(watch, before_request)
                found = status(api_client, NAMESPACE, SERVICE)
                assert found["endpointURL"] == "http://demo.ai.svc/v1", found
                terminal.stop_all()
            elif step.text in SUBSTITUTED:
                continue
            elif step.text == WATCH:
                watch = terminal.start(step.text)
                _settled(watch, core)
            elif step.text == FORWARD:
                _forwarding(terminal.start(step.text))
            elif step.text.startswith("curl "):  # the first request, cold
                assert watch is not None
                before_request = len(_phases(watch))
                _check_stream(terminal.run(step.text, timeout=180))
            else:
                terminal.run(step.text)


def _settled(watch: Background, core: k8s_client.CoreV1Api) -> None:
    """What the page has the reader wait for: ScaledToZero, the first backend pod gone."""
    wait_for(
        "the watch to show the service settled in ScaledToZero, no backend pod left",
        lambda: (
            watch.running()
            and _phases(watch)[-1:] == [Phase.SCALED_TO_ZERO]
            and not _backend_pods(core)
        ),
        timeout=180,
    )


def _forwarding(forward: Background) -> None:
    wait_for(
        "the port forward to listen",
        lambda: (
            forward.running()
            and "Forwarding from 127.0.0.1:8080" in forward.output()
            and _listening(FORWARDED)
        ),
        timeout=60,
    )


def _check_stream(streamed: str) -> None:
    """Heartbeats while the backend starts, then the tokens, then `[DONE]`."""
    lines = [line for line in streamed.splitlines() if line]
    heartbeats = [i for i, line in enumerate(lines) if line.startswith(": heartbeat")]
    chunks = [i for i, line in enumerate(lines) if line.startswith("data: {")]
    assert heartbeats, lines
    assert chunks, lines
    assert heartbeats[0] < chunks[0], lines
    text = "".join(
        choice["delta"].get("content") or ""
        for i in chunks
        for choice in json.loads(lines[i].removeprefix("data: "))["choices"]
    )
    assert text.startswith("tok0 tok1"), lines
    assert lines[-1] == "data: [DONE]", lines


def _back_to_zero(watch: Background, before_request: int) -> None:
    """The phases the watch printed since the first request: `ScaledToZero → Loading → Ready`,
    and back to `ScaledToZero` after the cooldown."""
    wait_for(
        "the watch to show the service back in ScaledToZero",
        lambda: (
            watch.running()
            and Phase.READY in _phases(watch)[before_request:]
            and _phases(watch)[-1] == Phase.SCALED_TO_ZERO
        ),
        timeout=180,
    )
    seen = _phases(watch)[before_request - 1 :]
    wanted = iter(seen)
    expected = [Phase.SCALED_TO_ZERO, Phase.LOADING, Phase.READY, Phase.SCALED_TO_ZERO]
    assert all(phase in wanted for phase in expected), seen


def _phases(watch: Background) -> list[str]:
    """The phase of each row the watch printed (a row before the first status has none)."""
    rows = [line.split() for line in watch.output().splitlines()]
    return [word for row in rows for word in row[1:2] if word in _PHASES]


def _backend_pods(core: k8s_client.CoreV1Api) -> int:
    pods = core.list_namespaced_pod(NAMESPACE, label_selector=f"app.kubernetes.io/name={SERVICE}")
    return len(pods.items)


def _listening(address: tuple[str, int]) -> bool:
    try:
        with socket.create_connection(address, timeout=1):
            return True
    except OSError:
        return False


def _ctr_on_every_node(path: Path, cluster: Cluster) -> None:
    """The guide's `ctr` command, run on every node of the box as an operator runs it on each
    node of a cluster whose nodes pull from no registry."""
    sockets = [cluster.folders.node(node).containerd_socket for node in cluster.nodes]
    addresses = " ".join(str(socket) for socket in sockets)
    path.write_text(
        "#!/bin/sh\n"
        f"for address in {addresses}; do\n"
        f'  CONTAINERD_ADDRESS="$address" {shutil.which("ctr")} "$@" || exit\n'
        "done\n"
    )
    path.chmod(0o755)
