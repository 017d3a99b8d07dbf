"""The annotations on an LLMService that only local mode reads (a cluster ignores them):

- `serving.noctaya.io/local-pinned: "true"`: the service's engine is never stopped to hand its
  devices to another service (its own scale-down still applies; with `scaling.min: 1` too, it
  stays loaded for good).
- `serving.noctaya.io/local-listen: HOST:PORT`: the service also gets an endpoint of its own,
  which serves it whatever a request's `model` says, beside the shared one.
"""

from __future__ import annotations

from noctaya.core.api import LLMService
from noctaya.core.values.go_text import go_quote
from noctaya.core.values.listen_address import parse_listen_address
from noctaya.local.errors import LocalConfigError

PINNED_ANNOTATION = "serving.noctaya.io/local-pinned"
LISTEN_ANNOTATION = "serving.noctaya.io/local-listen"


def _field(service: LLMService, annotation: str) -> str:
    name = go_quote(service.metadata.name or "")
    return f"LLMService {name} metadata.annotations[{go_quote(annotation)}]"


def pinned(service: LLMService) -> bool:
    text = service.metadata.annotations.get(PINNED_ANNOTATION)
    if text is None or text == "false":
        return False
    if text == "true":
        return True
    raise LocalConfigError(
        f'{_field(service, PINNED_ANNOTATION)}: Invalid value {go_quote(text)}: "true" or "false"'
    )


def own_listen_address(service: LLMService) -> str | None:
    text = service.metadata.annotations.get(LISTEN_ANNOTATION)
    if text is None:
        return None
    try:
        _, port = parse_listen_address(text)
    except ValueError as error:
        raise LocalConfigError(
            f"{_field(service, LISTEN_ANNOTATION)}: Invalid value {go_quote(text)}: {error}"
        ) from None
    if port == 0:
        raise LocalConfigError(
            f"{_field(service, LISTEN_ANNOTATION)}: Invalid value {go_quote(text)}: "
            "a service's own endpoint needs a fixed port"
        )
    return text
