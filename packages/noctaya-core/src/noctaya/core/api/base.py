"""The wire conventions every API model shares: camelCase names, strict scalars, Kubernetes formats.

The CRD schema is generated from these models, so each scalar type carries the JSON-schema
fragment the API server needs (`format: int32`, int-or-string quantities, duration patterns)
beside the validation pydantic runs; the two can never drift apart.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Annotated, Any, Final

from noctaya.core.api import rules
from noctaya.core.values import Duration, Quantity
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    Strict,
    ValidationInfo,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

API_GROUP: Final = "serving.noctaya.io"
API_VERSION: Final = "v1alpha1"
GROUP_VERSION: Final = "serving.noctaya.io/v1alpha1"

# Longest duration string accepted; bounds the cost of the CEL rules that call duration().
DURATION_MAX_LENGTH = 64
# Duration syntax (`300ms`, `1h30m`): exactly what CEL's duration() accepts, so the CEL rules
# can call it on any value this pattern lets through.
DURATION_PATTERN = r"^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$"
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# The pattern Kubernetes publishes for `resource.Quantity`.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


READ_BACK: Final = "read back from the API server"
"""Validation context of objects the API server returns: their unknown fields are ignored."""


class ApiModel(BaseModel):
    """Base of every API object: camelCase on the wire, snake_case in Python, unknown keys rejected.

    Unknown keys in what users write are errors (not silently dropped as the API server's pruning
    would) so a typo such as `scaling.maxx` is reported instead of quietly falling back to a
    default. Objects read back from the API server (`READ_BACK` context) are already pruned to
    the installed CRD, which may be newer than these models: their unknown fields are ignored,
    or every service would fail after a CRD upgrade.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        use_attribute_docstrings=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """The JSON-ready manifest form: camelCase keys, unset optional fields omitted."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    @model_validator(mode="before")
    @classmethod
    def _ignore_unknown_fields_read_back(cls, data: Any, info: ValidationInfo) -> Any:
        if info.context != READ_BACK or not isinstance(data, dict):
            return data
        if cls.model_config.get("extra") != "forbid":
            return data  # models that keep unknown keys keep them on reads too
        known = _wire_names(cls)
        return {key: value for key, value in data.items() if key in known}


@cache
def _wire_names(model: type[BaseModel]) -> frozenset[str]:
    """Every key a model accepts: wire (alias) and Python names."""
    fields = model.model_fields
    return frozenset(fields) | {field.alias for field in fields.values() if field.alias}


class _SchemaFormat:
    """Adds an OpenAPI `format` (`int32`, `int64`) to a generated schema node."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        schema["format"] = self.fmt
        return schema


def _bounded_duration_text(value: Any) -> Any:
    if isinstance(value, str) and len(value) > DURATION_MAX_LENGTH:
        raise ValueError(f"must be at most {DURATION_MAX_LENGTH} characters")
    return value


def _fits(bits: int) -> Callable[[int], int]:
    """A range check kept apart from `ge`/`le`, which a field's own bounds would override."""
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def check(value: int) -> int:
        if not low <= value <= high:
            raise ValueError(f"must fit in a {bits}-bit integer")
        return value

    return check


Int32 = Annotated[int, Strict(), AfterValidator(_fits(32)), _SchemaFormat("int32")]
Int64 = Annotated[int, Strict(), AfterValidator(_fits(64)), _SchemaFormat("int64")]
# Bounds of optional integers must sit inside the type: on `X | None` pydantic cannot place them.
NonNegativeInt32 = Annotated[
    int, Strict(), Field(ge=0), AfterValidator(_fits(32)), _SchemaFormat("int32")
]
NonNegativeInt64 = Annotated[
    int, Strict(), Field(ge=0), AfterValidator(_fits(64)), _SchemaFormat("int64")
]
PositiveInt64 = Annotated[
    int, Strict(), Field(ge=1), AfterValidator(_fits(64)), _SchemaFormat("int64")
]
PortNumber = Annotated[int, Strict(), Field(ge=1, le=65535), _SchemaFormat("int32")]
LinuxId = Annotated[int, Strict(), Field(ge=0, le=2**31 - 1), _SchemaFormat("int64")]
"""A user or group id, bounded as Pod validation bounds it."""
StrictBool = Annotated[bool, Strict()]
VendorName = Annotated[str, Field(min_length=1, max_length=63, pattern=DNS_LABEL_PATTERN)]
"""A vendor plugin's name: a DNS label, so any installed plugin can be named, not a fixed list."""

ApiDuration = Annotated[
    Duration,
    BeforeValidator(_bounded_duration_text),
    WithJsonSchema(
        {"type": "string", "pattern": DURATION_PATTERN, "maxLength": DURATION_MAX_LENGTH}
    ),
]
"""A duration (`10s`, `5m`, `1h30m`) written as a string."""


def _quantity_schema(*checks: rules.Rule) -> WithJsonSchema:
    """A quantity's int-or-string schema, with CEL rules for `checks` if any."""
    schema: dict[str, Any] = {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": QUANTITY_PATTERN,
        "x-kubernetes-int-or-string": True,
    }
    return WithJsonSchema(schema | rules.validations(*checks) if checks else schema)


ApiQuantity = Annotated[Quantity, _quantity_schema()]
"""A Kubernetes quantity (`500m`, `32Gi`), written as a string or a whole number."""


def _non_negative(value: Quantity) -> Quantity:
    rules.QUANTITY_NON_NEGATIVE.check(value.value >= 0)
    return value


NonNegativeQuantity = Annotated[
    Quantity, AfterValidator(_non_negative), _quantity_schema(rules.QUANTITY_NON_NEGATIVE)
]
"""An amount of CPU, memory or storage: a quantity that is zero or more, as Kubernetes demands."""


def _int_or_string(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("must be an integer or a string")
    return value


def _port_number_or_name(value: int | str) -> int | str:
    rules.PORT_NUMBER_OR_NAME.check(value != "" and (isinstance(value, str) or 1 <= value <= 65535))
    return value


PortNumberOrName = Annotated[
    int | str,
    BeforeValidator(_int_or_string),
    AfterValidator(_port_number_or_name),
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True,
            **rules.validations(rules.PORT_NUMBER_OR_NAME),
        }
    ),
]
"""A port given by number (1-65535) or by name, as in Kubernetes probes."""


def empty_object_default(factory: Callable[[], Any]) -> Any:
    """A nested object the API server defaults to `{}`, so the defaults inside it apply too."""
    return Field(default_factory=factory, json_schema_extra={"default": {}})
