"""Object metadata as the API server checks it: names, namespaces, label and annotation keys.

`kubectl apply` is refused for a name that is not an RFC 1123 subdomain, a label value longer
than 63 characters or an annotation key that is not a qualified name, before any CRD rule runs;
the models apply the same checks, in the API server's words, so `noctaya validate` and local
mode refuse the same manifests. An LLMService's name is narrower still: it names Services (RFC
1035 labels) and, with a suffix such as `-backend` or `-prewarm`, objects whose names must fit
in a label value, so the CRD and the model hold it to `LLMSERVICE_NAME`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from noctaya.core.api.rules import RULE_ERROR_TYPE
from noctaya.core.values.go_text import go_quote
from pydantic_core import PydanticCustomError

_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL = f"^{_LABEL}$"
DNS1123_SUBDOMAIN = rf"^{_LABEL}(\.{_LABEL})*$"
DNS1035_LABEL = "^[a-z]([-a-z0-9]*[a-z0-9])?$"
_QUALIFIED_NAME = re.compile("^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile("^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_MAX, SUBDOMAIN_MAX = 63, 253
ANNOTATIONS_MAX_BYTES = 256 * 1024
LONGEST_SUFFIX = "-backend"
"""The longest suffix an LLMService's name gets in a Service or label value (`-gateway` and
`-prewarm` are as long): the name plus it must stay a 63-character label."""
_SHOWN_MAX = 64

_SUBDOMAIN_WORDS = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com')"
)
_LABEL_WORDS = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name', or '123-abc')"
)
_DNS1035_WORDS = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name', or 'abc-123')"
)
_NAME_PART_WORDS = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc')"
)
_LABEL_VALUE_WORDS = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue', or 'my_value', "
    "or '12345')"
)


@dataclass(frozen=True)
class NameRule:
    """A name format: its pattern and length bound, for the CRD schema and for the check."""

    pattern: str
    max_length: int
    words: str

    def problem(self, value: str) -> str | None:
        """Why `value` breaks the rule, as the API server says it; None if it does not."""
        if len(value) > self.max_length:
            return f"{invalid(value)}: must be no more than {self.max_length} characters"
        if not re.fullmatch(self.pattern.strip("^$"), value):
            return f"{invalid(value)}: {self.words}"
        return None

    def schema(self) -> dict[str, Any]:
        return {"type": "string", "maxLength": self.max_length, "pattern": self.pattern}


OBJECT_NAME = NameRule(DNS1123_SUBDOMAIN, SUBDOMAIN_MAX, _SUBDOMAIN_WORDS)
"""Any object's name, custom resources included."""
NAMESPACE_NAME = NameRule(DNS1123_LABEL, LABEL_MAX, _LABEL_WORDS)
LLMSERVICE_NAME = NameRule(
    DNS1035_LABEL,
    LABEL_MAX - len(LONGEST_SUFFIX),
    f"{_DNS1035_WORDS}; an LLMService's name is its Services' name",
)


def shown(value: str) -> str:
    """`value` quoted, or its start quoted with its length when it is too long to print: a
    rejected value may be a megabyte long."""
    if len(value) <= _SHOWN_MAX:
        return go_quote(value)
    return f"{go_quote(value[:_SHOWN_MAX])}... ({len(value)} characters)"


def invalid(value: str) -> str:
    return f"Invalid value: {shown(value)}"


def qualified_name_problem(key: str) -> str | None:
    """A label or annotation key: `[prefix/]name`, the prefix a subdomain (`app.kubernetes.io`)."""
    prefix, slash, name = key.rpartition("/")
    if slash and "/" in prefix:
        return f"{invalid(key)}: a qualified name must have at most one '/'"
    if slash and not prefix:
        return f"{invalid(key)}: prefix part must be non-empty"
    if slash and (problem := OBJECT_NAME.problem(prefix)):
        return f"{invalid(key)}: prefix part {problem.split(': ', 2)[-1]}"
    if not name:
        return f"{invalid(key)}: name part must be non-empty"
    if len(name) > LABEL_MAX:
        return f"{invalid(key)}: name part must be no more than {LABEL_MAX} characters"
    if not _QUALIFIED_NAME.match(name):
        return f"{invalid(key)}: {_NAME_PART_WORDS}"
    return None


def label_value_problem(value: str) -> str | None:
    if len(value) > LABEL_MAX:
        return f"{invalid(value)}: must be no more than {LABEL_MAX} characters"
    if not _LABEL_VALUE.match(value):
        return f"{invalid(value)}: {_LABEL_VALUE_WORDS}"
    return None


def annotations_size_problem(annotations: Mapping[str, str]) -> str | None:
    size = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if size > ANNOTATIONS_MAX_BYTES:
        return f"Too long: must have at most {ANNOTATIONS_MAX_BYTES} bytes"
    return None


def rule_error(problem: str | None) -> None:
    """Raise `problem` as a pydantic error reported in these words, on the field being checked."""
    if problem is not None:
        raise PydanticCustomError(RULE_ERROR_TYPE, problem)
