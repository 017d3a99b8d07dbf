"""Which local command stands in for a runtime's container image.

An image cannot run on one machine without a container runtime, so an InferenceRuntime that may
be served locally says which command plays its image, in the annotation
`serving.noctaya.io/local-command` (for example `vllm serve` for the vLLM images, or
`noctaya-engine-stub` for the test double). The value is split like a shell would split it; the
runtime's templated args follow it, exactly as a container's args follow its entrypoint.

The first word is looked up in the scripts directory of the Python environment that runs local
mode (where `noctaya-engine-stub` and a pip-installed `vllm` live), then on `PATH`.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sysconfig

from noctaya.core.api import InferenceRuntime
from noctaya.core.values.go_text import go_quote
from noctaya.local.errors import LocalConfigError

LOCAL_COMMAND_ANNOTATION = "serving.noctaya.io/local-command"


def local_command(runtime: InferenceRuntime) -> tuple[str, ...]:
    """The annotation's words with the first one resolved to an executable path."""
    name = go_quote(runtime.metadata.name or "")
    field = f"InferenceRuntime {name} metadata.annotations[{go_quote(LOCAL_COMMAND_ANNOTATION)}]"
    text = runtime.metadata.annotations.get(LOCAL_COMMAND_ANNOTATION)
    if text is None:
        raise LocalConfigError(
            f"{field}: Required value: local mode cannot run the container image "
            f"{go_quote(runtime.spec.container.image)}; name the command that serves it "
            f"instead (for example {go_quote('vllm serve')} or {go_quote('noctaya-engine-stub')})"
        )
    try:
        words = shlex.split(text)
    except ValueError as error:
        raise LocalConfigError(f"{field}: Invalid value {go_quote(text)}: {error}") from None
    if not words:
        raise LocalConfigError(f"{field}: must not be empty")
    executable = find_executable(words[0])
    if executable is None:
        raise LocalConfigError(
            f"{field}: command {go_quote(words[0])} not found in this Python environment's "
            "scripts directory or on PATH"
        )
    return (executable, *words[1:])


def find_executable(name: str) -> str | None:
    """`name` as the environment's own script if it has one, else from PATH (or as a path)."""
    if os.sep in name:
        return name if os.access(name, os.X_OK) and os.path.isfile(name) else None
    search = os.pathsep.join(filter(None, [sysconfig.get_path("scripts"), os.environ.get("PATH")]))
    return shutil.which(name, path=search)
