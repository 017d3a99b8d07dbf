"""The `--gateway-*` flags that give every gateway a default the LLMService does not set.

The operator reads them (the chart's `gateway.*` values), and so do `noctaya render` and
`noctaya validate`, which render what the operator would: one definition for both. Each flag is
a string until `gateway_defaults` checks it, so a value that parses but is not allowed is the
operator's exit 1 (with the flag named), not argparse's usage error.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from noctaya.core.api import Toleration as ApiToleration
from noctaya.core.api import names
from noctaya.core.api.llmservice import GatewayResources
from noctaya.core.api.validation import describe
from noctaya.core.plan.container import Scheduling, Toleration, toleration
from noctaya.core.plan.gateway import GatewayDefaults, RequestLimits
from noctaya.core.values import Duration
from noctaya.core.values.duration import positive_duration
from noctaya.core.values.quantity import byte_count
from pydantic import TypeAdapter, ValidationError

_RESOURCES = {
    "gateway_cpu_request": ("requests", "cpu"),
    "gateway_memory_request": ("requests", "memory"),
    "gateway_cpu_limit": ("limits", "cpu"),
    "gateway_memory_limit": ("limits", "memory"),
}
_TIMEOUTS = (
    "gateway_request_body_timeout",
    "gateway_client_send_timeout",
    "gateway_backend_read_timeout",
    "gateway_backend_head_timeout",
)
_TOLERATIONS = TypeAdapter(list[ApiToleration])


def add_gateway_default_flags(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    for dest, (section, resource) in _RESOURCES.items():
        add(
            f"--{dest.replace('_', '-')}",
            default="",
            metavar="QUANTITY",
            help=f"{resource} {section[:-1]} of every gateway whose LLMService sets no "
            "spec.endpoint.resources; empty: none",
        )
    add(
        "--gateway-max-request-body",
        default="",
        metavar="BYTES",
        help="largest request body a gateway takes (a quantity such as 8Mi); empty: the "
        "gateway's default, NOCTAYA_MAX_REQUEST_BODY",
    )
    for dest in _TIMEOUTS:
        variable = "NOCTAYA_" + dest.removeprefix("gateway_").upper()
        add(
            f"--{dest.replace('_', '-')}",
            default="",
            metavar="DURATION",
            help=f"every gateway's {variable} (a Go duration); empty: the gateway's default",
        )
    add(
        "--gateway-node-selector",
        default="",
        metavar="KEY=VALUE,...",
        help="node labels every gateway and aggregator pod requires",
    )
    add(
        "--gateway-tolerations",
        default="",
        metavar="JSON",
        help="tolerations of every gateway and aggregator pod, a JSON list of Kubernetes "
        "tolerations",
    )


def gateway_defaults(values: Mapping[str, Any]) -> GatewayDefaults:
    """The defaults the flags (parsed arguments as a mapping) give; ValueError naming the flag
    of the first value that is not allowed."""
    return GatewayDefaults(
        resources=_resources(values),
        limits=RequestLimits(
            max_request_body=_bytes(values["gateway_max_request_body"]),
            request_body_timeout=_duration(values, "gateway_request_body_timeout"),
            client_send_timeout=_duration(values, "gateway_client_send_timeout"),
            backend_read_timeout=_duration(values, "gateway_backend_read_timeout"),
            backend_head_timeout=_duration(values, "gateway_backend_head_timeout"),
        ),
        scheduling=Scheduling(
            node_selector=_node_selector(values["gateway_node_selector"]),
            tolerations=_tolerations(values["gateway_tolerations"]),
        ),
    )


def _flag(dest: str) -> str:
    return f"--{dest.replace('_', '-')}"


def _resources(values: Mapping[str, Any]) -> GatewayResources | None:
    amounts: dict[str, dict[str, str]] = {}
    for dest, (section, resource) in _RESOURCES.items():
        if values[dest]:
            amounts.setdefault(section, {})[resource] = values[dest]
    if not amounts:
        return None
    try:
        return GatewayResources.model_validate(amounts)
    except ValidationError as error:
        detail = error.errors()[0]
        where = (str(detail["loc"][0]), str(detail["loc"][1]))
        dest = next(d for d, place in _RESOURCES.items() if place == where)
        raise ValueError(f"{_flag(dest)}: {describe(detail).split(': ', 1)[1]}") from None


def _bytes(text: str) -> int | None:
    if not text:
        return None
    try:
        return byte_count(text)
    except ValueError:
        raise ValueError(
            f'--gateway-max-request-body: must be a positive whole number of bytes such as "8Mi",'
            f' got "{text}"'
        ) from None


def _duration(values: Mapping[str, Any], dest: str) -> Duration | None:
    text = values[dest]
    if not text:
        return None
    try:
        return positive_duration(text)
    except ValueError:
        raise ValueError(
            f'{_flag(dest)}: must be a positive duration such as "90s", got "{text}"'
        ) from None


def _node_selector(text: str) -> dict[str, str]:
    selector: dict[str, str] = {}
    for pair in filter(None, text.split(",")):
        key, equals, value = pair.partition("=")
        problem = (
            "want KEY=VALUE"
            if not equals
            else names.qualified_name_problem(key) or names.label_value_problem(value)
        )
        if problem:
            raise ValueError(f"--gateway-node-selector: {pair}: {problem}")
        selector[key] = value
    return selector


def _tolerations(text: str) -> tuple[Toleration, ...]:
    if not text:
        return ()
    try:
        declared = _TOLERATIONS.validate_python(json.loads(text))
    except json.JSONDecodeError as error:
        raise ValueError(f"--gateway-tolerations: not JSON: {error}") from None
    except ValidationError as error:
        problem = describe(error.errors()[0])
        raise ValueError(f"--gateway-tolerations: {problem}") from None
    return tuple(toleration(item) for item in declared)
