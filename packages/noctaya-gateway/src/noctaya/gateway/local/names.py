"""Object names as the cluster checks them, so a file local mode serves also applies there.

An LLMService's name becomes Service and Deployment names, hence an RFC 1123 label (63
characters at most); an InferenceRuntime, like any custom resource, needs an RFC 1123 subdomain
(253 at most). A rejected value is shown shortened: it may be a megabyte long.
"""

from __future__ import annotations

import re

from noctaya.core.values.go_text import go_quote

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_LABEL = re.compile(_LABEL)
DNS_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")
LABEL_MAX, SUBDOMAIN_MAX = 63, 253
SHOWN_MAX = 64


def dns_label_problem(value: str) -> str | None:
    """Why `value` is not an RFC 1123 label, in the API server's words; None if it is one."""
    if len(value) > LABEL_MAX:
        return f"{_invalid(value)}: must be no more than {LABEL_MAX} characters"
    if not DNS_LABEL.fullmatch(value):
        return (
            f"{_invalid(value)}: a lowercase RFC 1123 label must consist of lower case "
            "alphanumeric characters or '-', and must start and end with an alphanumeric "
            "character (e.g. 'my-name', or '123-abc')"
        )
    return None


def dns_subdomain_problem(value: str) -> str | None:
    """Why `value` is not an RFC 1123 subdomain, in the API server's words; None if it is one."""
    if len(value) > SUBDOMAIN_MAX:
        return f"{_invalid(value)}: must be no more than {SUBDOMAIN_MAX} characters"
    if not DNS_SUBDOMAIN.fullmatch(value):
        return (
            f"{_invalid(value)}: a lowercase RFC 1123 subdomain must consist of lower case "
            "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
            "character (e.g. 'example.com')"
        )
    return None


def shown(value: str) -> str:
    """`value` quoted, or its start quoted with its length when it is too long to print."""
    if len(value) <= SHOWN_MAX:
        return go_quote(value)
    return f"{go_quote(value[:SHOWN_MAX])}... ({len(value)} characters)"


def _invalid(value: str) -> str:
    return f"Invalid value: {shown(value)}"
