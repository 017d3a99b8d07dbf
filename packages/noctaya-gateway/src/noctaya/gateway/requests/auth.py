"""Client bearer-key check. The key file is re-read on every request so that rotating the
Kubernetes Secret takes effect without a restart; digests are compared in constant time.
The scheme is matched case-insensitively, as RFC 9110 has it (`bearer <key>` is what some
clients send); an exact-case `Bearer ` match would refuse them."""

from __future__ import annotations

import enum
import hashlib
import hmac

_BEARER = b"bearer "


class AuthResult(enum.Enum):
    OK = "ok"
    UNAUTHORIZED = "unauthorized"
    UNAVAILABLE = "authentication_unavailable"


class ApiKeyAuth:
    def __init__(self, key_file: str) -> None:
        self._key_file = key_file

    def check(self, authorization: bytes | None) -> AuthResult:
        """Judge the first `Authorization` header value (None when absent)."""
        try:
            with open(self._key_file, "rb") as handle:
                key = handle.read().strip()
        except OSError:
            return AuthResult.UNAVAILABLE
        if not key:
            return AuthResult.UNAVAILABLE
        if authorization is None or authorization[: len(_BEARER)].lower() != _BEARER:
            return AuthResult.UNAUTHORIZED
        presented = hashlib.sha256(authorization[len(_BEARER) :]).digest()
        if hmac.compare_digest(presented, hashlib.sha256(key).digest()):
            return AuthResult.OK
        return AuthResult.UNAUTHORIZED
