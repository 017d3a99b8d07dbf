"""Where secrets come from: the environment or a mounted file, and never into a log line.

A hub token is `HF_TOKEN` / `MODELSCOPE_API_TOKEN`, or the file its `<NAME>_FILE` variable
names (a Secret mounted read-only). Registry credentials are a dockerconfigjson file, passed to
the registry client by path, so they never travel in arguments, logs or status.

Every secret the process reads is kept here so that `redact` can hide it in whatever is
printed: the failure line (which becomes the termination message the operator copies into the
service's status) and every log record, the hub and registry clients' included. A token is
checked before it is used: one the hub could never accept (a line break, a control character,
two tokens pasted during a rotation) would otherwise be echoed by the HTTP client that refuses
to send it, and retried as a network failure.
"""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path
from urllib.parse import quote

from noctaya.core.files import read_regular
from noctaya.core.model_source import (
    HF_TOKEN,
    MODELSCOPE_TOKEN,
    REDACTED,
    holds_credentials,
    redact_credentials,
)
from noctaya.fetch.errors import PermanentFetchError

__all__ = [
    "HF_TOKEN",
    "MODELSCOPE_TOKEN",
    "check_endpoint",
    "check_registry_config",
    "hide_uri_credentials",
    "hub_refusal",
    "hub_token",
    "redact",
    "token_advice",
]

TOKEN_MAX = 4096
"""Characters a hub token may have: tokens are tens of characters, and servers refuse headers
of 8 KiB, so a longer one is a file of something else."""
_TOKEN_FILE_MAX = 64 * 1024
"""Bytes read from a token file at most (the token, and blank lines around it)."""
_REGISTRY_CONFIG_MAX = 1024 * 1024
"""Bytes read from a registry config at most: what a Secret can hold."""
_TOKEN = re.compile(r"[\x21-\x7e]+")
"""What a token is made of: visible ASCII, which an HTTP header carries as it is."""
_SECRET_MIN = 4
"""A shorter secret is not replaced in free text: it would garble every line it matches."""
_REGISTRY_SECRETS = ("password", "auth", "identitytoken", "registrytoken")
_secrets: set[str] = set()


def hub_token(variable: str, source: str) -> str | None:
    """The token from `variable`, else from the file `<variable>_FILE` names; None if neither.

    Surrounding whitespace is dropped (a file's last line break); a value that is still not one
    token is refused, naming the variable or the file and never the value."""
    value = os.environ.get(variable, "").strip()
    if value:
        return _checked_token(value, variable, source)
    file_variable = f"{variable}_FILE"
    file_name = os.environ.get(file_variable, "").strip()
    if not file_name:
        return None
    try:
        content = read_regular(file_name, _TOKEN_FILE_MAX)
    except OSError as error:
        raise PermanentFetchError(
            source, f"{file_variable}: cannot read {file_name}: {error.strerror}"
        ) from None
    value = content.decode("utf-8", errors="replace").strip()
    if not value:
        raise PermanentFetchError(source, f"{file_variable}: {file_name} is empty")
    return _checked_token(value, f"{file_variable} ({file_name})", source)


def _checked_token(value: str, where: str, source: str) -> str:
    if len(value) > TOKEN_MAX:
        raise PermanentFetchError(
            source, f"{where} holds more than {TOKEN_MAX} characters, which no hub token has"
        )
    if not _TOKEN.fullmatch(value):
        raise PermanentFetchError(
            source,
            f"{where} is not one token: it holds a line break, a space, a control or a non-ASCII "
            "character (two tokens of a rotation?); set it to the one token the hub issued",
        )
    _keep_secret(value)
    return value


def hide_uri_credentials(uri: str) -> None:
    """A model URI with credentials is refused (`noctaya.core.model_source.resolve_model`), but
    every line the fetcher prints names the URI it was given; so such a URI is hidden whole,
    since which part of it is the secret cannot be told."""
    if holds_credentials(uri):
        _secrets.add(uri)


def check_endpoint(variable: str, value: str) -> str:
    """A hub endpoint without credentials: the hub clients log the URLs they request, so a
    password in one would reach the Job log; a token goes in the token variable instead."""
    if "@" in value:
        raise PermanentFetchError(
            variable,
            "holds credentials (an @ in the URL); give the hub's URL without them, and a token "
            "in the token variable",
        )
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
    """A readable dockerconfigjson with an `auths` object; errors name the file, not its content.
    Its passwords and tokens are kept for `redact`."""
    try:
        document = json.loads(read_regular(path, _REGISTRY_CONFIG_MAX))
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
    for entry in document.get("auths", {}).values():
        if isinstance(entry, dict):
            _keep_registry_secrets(entry)
    return path


def _keep_registry_secrets(entry: dict[str, object]) -> None:
    for key in _REGISTRY_SECRETS:
        value = entry.get(key)
        if isinstance(value, str):
            _keep_secret(value)
    auth = entry.get("auth")
    if isinstance(auth, str):
        try:
            decoded = base64.b64decode(auth, validate=True).decode("utf-8")
        except ValueError:  # not base64 of UTF-8: the registry client will say so
            return
        _keep_secret(decoded.partition(":")[2])


def _keep_secret(value: str) -> None:
    """Hide `value` (and its percent-encoded form, as a URL would carry it) from now on."""
    if len(value) >= _SECRET_MIN:
        _secrets.update({value, quote(value, safe="")})


def redact(text: str, *, lines: bool = False) -> str:
    """`text` without the secrets this process holds, the userinfo of any URL and the
    credential of any Authorization header, its unprintable characters escaped (line breaks
    too unless `lines`): what any output line of the fetcher passes through."""
    for secret in sorted(_secrets, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return redact_credentials(text, lines=lines)
