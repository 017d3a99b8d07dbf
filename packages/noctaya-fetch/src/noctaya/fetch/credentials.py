"""Where secrets come from: the environment or a mounted file, and never into a log line.

A hub token is `HF_TOKEN` / `MODELSCOPE_API_TOKEN`, or the file its `<NAME>_FILE` variable
names (a Secret mounted read-only). Registry credentials are a dockerconfigjson file, passed to
the registry client by path, so they never travel in arguments, logs or status.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from noctaya.core.model_source import HF_TOKEN, MODELSCOPE_TOKEN
from noctaya.fetch.errors import PermanentFetchError

__all__ = [
    "HF_TOKEN",
    "MODELSCOPE_TOKEN",
    "check_registry_config",
    "hub_refusal",
    "hub_token",
    "token_advice",
]


def hub_token(variable: str, source: str) -> str | None:
    """The token from `variable`, else from the file `<variable>_FILE` names; None if neither."""
    value = os.environ.get(variable, "").strip()
    if value:
        return value
    file_variable = f"{variable}_FILE"
    file_name = os.environ.get(file_variable, "").strip()
    if not file_name:
        return None
    try:
        value = Path(file_name).read_text(encoding="utf-8").strip()
    except OSError as error:
        raise PermanentFetchError(
            source, f"{file_variable}: cannot read {file_name}: {error.strerror}"
        ) from None
    if not value:
        raise PermanentFetchError(source, f"{file_variable}: {file_name} is empty")
    return value


def token_advice(variable: str, *, sent: bool) -> str:
    """What to do after a hub refused access: where the token goes, and for an LLMService
    which field gives it."""
    field = 'spec.model.source.secretRef names a Secret whose key "token" holds it'
    if sent:
        return f"the token in {variable} does not grant access (for an LLMService, {field})"
    return f"set {variable} to a token that grants access (for an LLMService, {field})"


def hub_refusal(source: str, status: int, variable: str, *, sent: bool) -> PermanentFetchError:
    """A 401 or 403 from a hub: what it answered, and where a token that grants access goes."""
    words = "unauthorized" if status == 401 else "forbidden"
    advice = token_advice(variable, sent=sent)
    return PermanentFetchError(source, f"the hub answered HTTP {status} ({words}): {advice}")


def check_registry_config(path: Path, source: str) -> Path:
    """A readable dockerconfigjson with an `auths` object; errors name the file, not its content."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise PermanentFetchError(
            source, f"registry config {path}: cannot read: {error.strerror}"
        ) from None
    except ValueError:
        raise PermanentFetchError(source, f"registry config {path}: not valid JSON") from None
    if not isinstance(document, dict) or not isinstance(document.get("auths", {}), dict):
        raise PermanentFetchError(
            source, f"registry config {path}: expected a dockerconfigjson with an auths object"
        )
    return path
