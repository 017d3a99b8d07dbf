"""`GET /v1/models` and `GET /v1/models/{id}` (or HEAD) while the backend is cold: answered here,
from the names the service serves, so that a UI polling for models never wakes an accelerator.

They are never demand: the request path hands them to `ModelList` before admission, and
`ModelList` proxies them to a ready backend (whose answer is the authoritative one) or answers
them itself, without taking a queue slot or an activation lease either way.
"""

from __future__ import annotations

import json
import time
from typing import Any

from noctaya.gateway.requests.responses import JSON, GatewayError, Send, send_body, send_error

MODELS = "/v1/models"
_PREFIX = MODELS + "/"
_LISTING_METHODS = frozenset({"GET", "HEAD"})
_OWNER = "noctaya"
_ID_SHOWN = 256


def model_list_target(scope: dict[str, Any]) -> str | None:
    """The empty string for the list, the model id for one model, None for any other request:
    what decides, for the gateway and local mode alike, that a request is no demand.

    HEAD asks for what GET would answer (RFC 9110 §9.3.2; the server sends the head alone), and
    `/v1/models/` or `/v1/models/{id}/` name what they name without the slash: a UI polling any
    of them must not wake an accelerator. Other methods (`DELETE /v1/models/{id}` is an OpenAI
    route) are the backend's to answer."""
    if scope["method"] not in _LISTING_METHODS:
        return None
    path: str = scope["path"]
    if path == MODELS:
        return ""
    if path.startswith(_PREFIX):
        return path[len(_PREFIX) :].removesuffix("/")  # ids such as `Qwen/Qwen3-8B` hold slashes
    return None


class ModelList:
    """The OpenAI model objects of the names the engine answers to, rendered once."""

    def __init__(self, names: tuple[str, ...], created: int | None = None) -> None:
        created = int(time.time()) if created is None else created
        models = [
            {"id": name, "object": "model", "created": created, "owned_by": _OWNER}
            for name in names
        ]
        self._list = _json({"object": "list", "data": models})
        self._models = {model["id"]: _json(model) for model in models}

    async def answer(self, target: str, send: Send) -> int:
        """Answer the list (`target` "") or one model; the status it answered with."""
        if not target:
            await send_body(send, 200, JSON, self._list)
            return 200
        body = self._models.get(target)
        if body is None:
            await send_error(send, _not_found(target), True)
            return 404
        await send_body(send, 200, JSON, body)
        return 200


def _not_found(model: str) -> GatewayError:
    shown = model if len(model) <= _ID_SHOWN else model[:_ID_SHOWN] + "..."
    return GatewayError(
        404, f"The model {json.dumps(shown)} does not exist", "invalid_request_error",
        "model_not_found",
    )  # fmt: skip


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
