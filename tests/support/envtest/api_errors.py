"""Reading the API server's Status body out of a client error."""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client.exceptions import ApiException


def api_status(error: ApiException) -> dict[str, Any]:
    """The metav1.Status the server sent, or a stand-in built from the HTTP status line."""
    try:
        status = json.loads(error.body or "")
    except (TypeError, ValueError):
        status = None
    if not isinstance(status, dict):
        return {"code": error.status, "message": f"{error.status} {error.reason}"}
    return status


def rejected_fields(error: ApiException) -> list[str]:
    """The field paths the server named as the causes of a rejection."""
    causes = api_status(error).get("details", {}).get("causes") or []
    return [str(cause.get("field", "")) for cause in causes]
