"""The demand report between gateways and the aggregator: its JSON shape and its shared token.

Both sides import this module, so the reporter can never send what the aggregator rejects. The
decoder is deliberately strict (exact field names and types, no unknown or repeated fields, no
trailing value, no NaN, no lone surrogate escapes): a report is either exactly right or it
changes nothing. A repeated field means different reports to different parsers (first or last
wins), and `"\\ud800"` is no text UTF-8 can carry, so both are refused rather than resolved.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeGuard

from noctaya.core.files import read_regular
from noctaya.gateway.process.describe import describe_error

MAX_BODY_BYTES = 64 * 1024
MAX_MEMBER_ID_BYTES = 512
MIN_TOKEN_LENGTH = 32
TOKEN_FILE_LIMIT = 64 * 1024
INT64_MAX = 2**63 - 1
_UINT64_MAX = 2**64 - 1
_FIELDS = frozenset({"memberID", "sequence", "demand"})


@dataclass(frozen=True)
class DemandReport:
    member_id: str
    sequence: int
    demand: int

    def encode(self) -> bytes:
        return json.dumps(
            {"memberID": self.member_id, "sequence": self.sequence, "demand": self.demand},
            separators=(",", ":"),
        ).encode()


def decode_report(body: bytes, max_demand: int) -> DemandReport | None:
    """The report in `body` if it is well-formed and within bounds, else None (a 400)."""
    try:
        document = json.loads(
            body.decode("utf-8"),
            parse_constant=_reject_constant,
            object_pairs_hook=_object_without_repeats,
        )
    except (ValueError, RecursionError):
        return None
    if not isinstance(document, dict) or not document.keys() <= _FIELDS:
        return None
    member_id = document.get("memberID")
    sequence = document.get("sequence")
    demand = document.get("demand")
    if not (isinstance(member_id, str) and _is_int(sequence) and _is_int(demand)):
        return None
    try:
        member_id_bytes = len(member_id.encode())
    except UnicodeEncodeError:  # a lone surrogate
        return None
    if not 0 < member_id_bytes <= MAX_MEMBER_ID_BYTES:
        return None
    if not 1 <= sequence <= _UINT64_MAX or not 0 <= demand <= max_demand:
        return None
    return DemandReport(member_id=member_id, sequence=sequence, demand=demand)


def read_demand_token(path: str) -> bytes:
    """The shared token from its file (re-read on use, so a rotated Secret takes effect): a
    regular file of at most `TOKEN_FILE_LIMIT` bytes, never a FIFO or a device. Blocks: an
    asynchronous caller runs it on a worker thread."""
    if not path:
        raise ValueError("demand authentication token file is required")
    try:
        token = read_regular(path, TOKEN_FILE_LIMIT).strip()
    except OSError as exc:
        raise ValueError(f"read demand authentication token: {describe_error(exc)}") from None
    if len(token) < MIN_TOKEN_LENGTH:
        raise ValueError(
            f"demand authentication token must contain at least {MIN_TOKEN_LENGTH} characters"
        )
    return token


def bearer(token: bytes) -> bytes:
    """The Authorization header value that carries `token`."""
    return b"Bearer " + token


def _is_int(value: object) -> TypeGuard[int]:
    """JSON integers only: Python's bool is an int, and floats like 1.0 are not integers."""
    return type(value) is int


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _object_without_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) != len(pairs):
        raise ValueError("repeated object key")
    return document
