"""Whether a scraper may read `/metrics`: the API server decides, a short cache remembers.

The bearer token goes to a TokenReview (who is this?) and the user to a SubjectAccessReview for
`get` on the non-resource URL (may they?): the check controller-runtime's authn/authz filter
makes, on purpose, so the RBAC that lets Prometheus scrape a Go operator lets it scrape this
one. Verdicts are cached briefly (allowed for a minute, refused for half of one), so that
Prometheus scraping every few seconds does not cost two API requests per scrape. Entries are
keyed by a digest of the token and the path (the token itself is never kept) and the cache
holds a bounded number of them. API failures are not cached: the next scrape asks again.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from http import HTTPStatus
from typing import Any

from kubernetes import client as k8s
from noctaya.core.ports import Clock
from noctaya.k8s.runtime.resources import describe_error

log = logging.getLogger(__name__)

REVIEW_TIMEOUT = 10.0  # the filter's TokenAccessReviewTimeout
ALLOWED_TTL = 60.0
REFUSED_TTL = 30.0
CACHE_SIZE = 1024

_Key = tuple[bytes, str]


class DecisionCache:
    """Recent verdicts by (token digest, path); the least recently used goes first when full."""

    def __init__(
        self,
        size: int = CACHE_SIZE,
        allowed_ttl: float = ALLOWED_TTL,
        refused_ttl: float = REFUSED_TTL,
        clock: Clock = time.monotonic,
    ) -> None:
        if size < 1:
            raise ValueError(f"the decision cache needs room for at least 1 entry, got {size}")
        self._size = size
        self._allowed_ttl = allowed_ttl
        self._refused_ttl = refused_ttl
        self._clock = clock
        self._entries: OrderedDict[_Key, tuple[HTTPStatus, float]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def get(self, key: _Key) -> HTTPStatus | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            status, expires = entry
            if self._clock() >= expires:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return status

    def put(self, key: _Key, status: HTTPStatus) -> None:
        ttl = self._allowed_ttl if status == HTTPStatus.OK else self._refused_ttl
        with self._lock:
            self._entries[key] = (status, self._clock() + ttl)
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)


class AccessReview:
    """Asks the API server whether a bearer token may read a path; fails closed on errors."""

    def __init__(self, api_client: k8s.ApiClient, cache: DecisionCache | None = None) -> None:
        self._authentication = k8s.AuthenticationV1Api(api_client)
        self._authorization = k8s.AuthorizationV1Api(api_client)
        self._cache = cache or DecisionCache()

    def status(self, authorization: str | None, path: str) -> HTTPStatus:
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return HTTPStatus.UNAUTHORIZED
        key = (hashlib.sha256(token.encode()).digest(), path)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        verdict, final = self._review(token, path)
        if final:
            self._cache.put(key, verdict)
        return verdict

    def _review(self, token: str, path: str) -> tuple[HTTPStatus, bool]:
        """The verdict, and whether the API server gave it (rather than failed to answer)."""
        try:
            review: Any = self._authentication.create_token_review(
                k8s.V1TokenReview(spec=k8s.V1TokenReviewSpec(token=token)),
                _request_timeout=REVIEW_TIMEOUT,
            )
        except Exception as error:
            log.warning("metrics: token review failed: %s", describe_error(error))
            return HTTPStatus.UNAUTHORIZED, False
        if not review.status or not review.status.authenticated:
            return HTTPStatus.UNAUTHORIZED, True
        user = review.status.user
        spec = k8s.V1SubjectAccessReviewSpec(
            user=user.username,
            uid=user.uid,
            groups=user.groups,
            extra=user.extra,
            non_resource_attributes=k8s.V1NonResourceAttributes(path=path, verb="get"),
        )
        try:
            decision: Any = self._authorization.create_subject_access_review(
                k8s.V1SubjectAccessReview(spec=spec), _request_timeout=REVIEW_TIMEOUT
            )
        except Exception as error:
            log.warning("metrics: access review failed: %s", describe_error(error))
            return HTTPStatus.FORBIDDEN, False
        if not decision.status or not decision.status.allowed:
            log.debug("metrics: %s may not get %s", user.username, path)
            return HTTPStatus.FORBIDDEN, True
        return HTTPStatus.OK, True
