"""The chart under test, driven through the real helm binary built by hack/build-helm.sh.

`Helm.render` returns the objects `helm template` prints, `Helm.failure` the message of a render
that must fail. Values are passed as a values file (typed YAML, as users write them) and/or
`--set` arguments (which reach templates as int64 instead of float64, a separate code path).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "noctaya"
BUILD_SCRIPT = REPO / "hack" / "build-helm.sh"
RELEASE = "noctaya"
DEFAULT_NAMESPACE = "noctaya-system"
TIMEOUT = 60

Manifest = dict[str, Any]


class HelmMissing(Exception):
    """The pinned helm binary has not been built; the message says how to build it."""


def locate_helm() -> Path:
    """The pinned binary's path, by the build script's own rule (`--print-path`)."""
    path = Path(
        subprocess.run(
            ["bash", str(BUILD_SCRIPT), "--print-path"],
            check=True,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        ).stdout.strip()
    )
    if not os.access(path, os.X_OK):
        raise HelmMissing(f"helm is not built at {path}: run `bash hack/build-helm.sh`")
    return path


@dataclass(frozen=True)
class Helm:
    binary: Path
    home: Path  # config, cache and data homes, so that tests never touch the user's helm setup

    def run(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "HELM_CONFIG_HOME": str(self.home / "config"),
            "HELM_CACHE_HOME": str(self.home / "cache"),
            "HELM_DATA_HOME": str(self.home / "data"),
        }
        return subprocess.run(
            [str(self.binary), *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            env=env,
            timeout=TIMEOUT,
            check=False,
        )

    def _template(
        self,
        values: Manifest | None,
        set_args: tuple[str, ...],
        namespace: str,
        include_crds: bool,
    ) -> subprocess.CompletedProcess[str]:
        args = ["template", RELEASE, str(CHART), "--namespace", namespace]
        if values is not None:
            handle, values_file = tempfile.mkstemp(suffix=".yaml", dir=self.home)
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                yaml.safe_dump(values, file)
            args += ["--values", values_file]
        for assignment in set_args:
            args += ["--set", assignment]
        if include_crds:
            args.append("--include-crds")
        return self.run(*args)

    def render(
        self,
        values: Manifest | None = None,
        *set_args: str,
        namespace: str = DEFAULT_NAMESPACE,
        include_crds: bool = False,
    ) -> list[Manifest]:
        result = self._template(values, set_args, namespace, include_crds)
        assert result.returncode == 0, f"helm template failed:\n{result.stderr}"
        return [doc for doc in yaml.safe_load_all(result.stdout) if doc]

    def failure(self, values: Manifest | None = None, *set_args: str) -> str:
        """stderr of a render that must fail (and must not print a half-rendered chart)."""
        result = self._template(values, set_args, DEFAULT_NAMESPACE, include_crds=False)
        assert result.returncode != 0, f"helm template succeeded:\n{result.stdout}"
        assert result.stdout == ""
        return result.stderr


def find(objects: list[Manifest], kind: str, name: str) -> Manifest:
    matches = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind} {name}, got {len(matches)}"
    return matches[0]


def kinds(objects: list[Manifest]) -> set[tuple[str, str]]:
    return {(o["kind"], o["metadata"]["name"]) for o in objects}


def manager_container(objects: list[Manifest]) -> Manifest:
    deployment = find(objects, "Deployment", "noctaya-controller-manager")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert isinstance(container, dict)
    return container
