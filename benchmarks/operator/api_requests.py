"""Counting API requests two ways: at a client, and in the API server's own metrics.

Both are keyed `(verb, resource)` in the API server's vocabulary (`LIST` and `WATCH` are GETs on
a collection, `APPLY` is a PATCH with the apply content type), so a client-side count can be
subtracted from, or checked against, the server's `apiserver_request_total`.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kubernetes import client as k8s
from prometheus_client.parser import text_string_to_metric_families

Key = tuple[str, str]  # (verb, resource[/subresource])
WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"})
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"


def classify(method: str, url: str, headers: dict[str, Any] | None) -> Key:
    """The API server's verb and resource for one request URL (non-resource paths: "")."""
    parts = urlsplit(url)
    segments = [s for s in parts.path.split("/") if s]
    if segments[:1] == ["api"]:
        rest = segments[2:]
    elif segments[:1] == ["apis"]:
        rest = segments[3:]
    else:
        return method.upper(), ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    resource = "/".join(rest[0:1] + rest[2:3])
    named = len(rest) >= 2
    verb = method.upper()
    if verb == "GET":
        watching = parse_qs(parts.query).get("watch", [""])[0] in ("true", "1")
        verb = "WATCH" if watching else ("GET" if named else "LIST")
    elif verb == "PATCH":
        content_type = str((headers or {}).get("Content-Type", ""))
        verb = "APPLY" if content_type.startswith(APPLY_CONTENT_TYPE) else "PATCH"
    elif verb == "DELETE" and not named:
        verb = "DELETECOLLECTION"
    return verb, resource


class RequestCounter:
    """Counts every request an ApiClient sends, by `(verb, resource)`; thread-safe."""

    def __init__(self, api_client: k8s.ApiClient) -> None:
        self._counts: Counter[Key] = Counter()
        self._lock = threading.Lock()
        send = api_client.call_api

        def counted(method: str, url: str, header_params: Any = None, *args: Any, **kw: Any) -> Any:
            key = classify(method, url, header_params)
            with self._lock:
                self._counts[key] += 1
            return send(method, url, header_params, *args, **kw)

        api_client.call_api = counted  # type: ignore[method-assign]

    def snapshot(self) -> Counter[Key]:
        with self._lock:
            return Counter(self._counts)


def _resource(labels: dict[str, str]) -> str:
    sub = labels.get("subresource", "")
    return f"{labels.get('resource', '')}/{sub}" if sub else labels.get("resource", "")


class ServerCounts:
    """A reading of the API server's request and storage counters."""

    def __init__(self, text: str) -> None:
        self.requests: Counter[Key] = Counter()  # everything the server answered
        self.self_requests: Counter[Key] = Counter()  # the server's own loopback client
        self.storage: Counter[Key] = Counter()  # etcd operations: ("create", "deployments")
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = sample.labels
                if sample.name == "apiserver_request_total":
                    self.requests[(labels["verb"], _resource(labels))] += int(sample.value)
                elif sample.name == "apiserver_selfrequest_total":
                    self.self_requests[(labels["verb"], _resource(labels))] += int(sample.value)
                elif sample.name == "etcd_requests_total":
                    key = (labels["operation"], labels["resource"])
                    self.storage[key] += int(sample.value)

    @classmethod
    def read(cls, api_client: k8s.ApiClient) -> ServerCounts:
        response = api_client.call_api("GET", f"{api_client.configuration.host}/metrics")
        response.read()
        return cls(response.data.decode())

    def requests_since(self, earlier: ServerCounts) -> Counter[Key]:
        """Requests from clients other than the server itself, since `earlier`."""
        delta = (self.requests - earlier.requests) - (self.self_requests - earlier.self_requests)
        return +delta

    def storage_since(self, earlier: ServerCounts) -> Counter[Key]:
        return +(self.storage - earlier.storage)
