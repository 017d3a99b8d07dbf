"""How pydantic sees a value object written as text: validated by the type, printed by `str`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic_core import core_schema


def text_form_schema(validate: Callable[[Any], Any]) -> core_schema.CoreSchema:
    """Validate with `validate`; JSON schema and serialization both see the `str` form."""
    return core_schema.no_info_plain_validator_function(
        validate,
        json_schema_input_schema=core_schema.str_schema(),
        serialization=core_schema.plain_serializer_function_ser_schema(str),
    )
