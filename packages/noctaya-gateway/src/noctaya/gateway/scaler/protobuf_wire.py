"""Protocol Buffers' wire format, as much of it as KEDA's scaler messages use.

The scaler reads and writes its six small messages itself: the protobuf runtime would add about
6 MiB to the resident memory of every gateway for four RPCs. Decoding keeps protobuf's rules, so
KEDA (or any proto3 client) sees no difference: unknown fields are skipped, groups too (nested
at most `MAX_GROUP_DEPTH` deep, as protobuf allows), a known field sent with another wire type
counts as unknown, the last value of a repeated singular field wins, and strings must be UTF-8.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator

VARINT, I64, LEN, START_GROUP, END_GROUP, I32 = range(6)
MAX_GROUP_DEPTH = 100
_MAX_FIELD_NUMBER = 2**29 - 1
_UINT64 = 2**64 - 1
_DOUBLE = struct.Struct("<d")


class WireError(ValueError):
    """Bytes that are not a protobuf message; the text says where they stop being one."""


def fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of each field: an int for a varint, the bytes of the
    payload for the other wire types, and empty bytes for a group (skipped)."""
    pos = 0
    while pos < len(data):
        number, wire, pos = _key(data, pos)
        if wire == START_GROUP:
            pos = _skip_group(data, pos, number)
            yield number, wire, b""
        else:
            value, pos = _value(data, pos, number, wire)
            yield number, wire, value


def text(number: int, payload: int | bytes) -> str:
    """A string field's value; protobuf refuses one that is not UTF-8, and so does this."""
    assert isinstance(payload, bytes)
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError:
        raise WireError(f"field {number} is not valid UTF-8") from None


def _key(data: bytes, pos: int, in_group: bool = False) -> tuple[int, int, int]:
    """Field number 0 is refused, but not inside a group being skipped: protobuf skips it."""
    start = pos
    key, pos = _varint(data, pos)
    if pos - start > 5:
        raise WireError("field key longer than 5 bytes")
    number, wire = key >> 3, key & 7
    if not (in_group or number > 0) or number > _MAX_FIELD_NUMBER:
        raise WireError(f"invalid field number {number}")
    return number, wire, pos


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    for shift in range(0, 70, 7):
        if pos >= len(data):
            raise WireError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value & _UINT64, pos
    raise WireError("varint longer than 10 bytes")


def _value(data: bytes, pos: int, number: int, wire: int) -> tuple[int | bytes, int]:
    if wire == VARINT:
        return _varint(data, pos)
    if wire == LEN:
        size, pos = _varint(data, pos)
    elif wire in (I64, I32):
        size = 8 if wire == I64 else 4
    else:
        raise WireError(f"field {number} has wire type {wire} outside a group")
    if size > len(data) - pos:
        raise WireError(f"field {number} is truncated")
    return data[pos : pos + size], pos + size


def _skip_group(data: bytes, pos: int, number: int) -> int:
    """The position after the group `number` that starts at `pos`, nested groups and all."""
    open_groups = [number]
    while open_groups:
        if len(open_groups) > MAX_GROUP_DEPTH:
            raise WireError(f"groups nested more than {MAX_GROUP_DEPTH} deep")
        if pos >= len(data):
            raise WireError(f"group {open_groups[-1]} is not closed")
        inner, wire, pos = _key(data, pos, in_group=True)
        if wire == START_GROUP:
            open_groups.append(inner)
        elif wire != END_GROUP:
            pos = _value(data, pos, inner, wire)[1]
        elif inner != open_groups.pop():
            raise WireError(f"group {inner} closed out of order")
    return pos


def varint(value: int) -> bytes:
    value &= _UINT64  # negative int64 values take ten bytes, as protobuf writes them
    encoded = bytearray()
    while value >= 0x80:
        encoded.append(value & 0x7F | 0x80)
        value >>= 7
    encoded.append(value)
    return bytes(encoded)


def message_field(number: int, payload: bytes) -> bytes:
    """A LEN field: strings, bytes, and embedded messages (written even when empty)."""
    return varint(number << 3 | LEN) + varint(len(payload)) + payload


def string_field(number: int, value: str) -> bytes:
    """Omitted when empty, as proto3 writes a field at its default."""
    return message_field(number, value.encode("utf-8")) if value else b""


def bool_field(number: int, value: bool) -> bytes:
    return varint(number << 3 | VARINT) + b"\x01" if value else b""


def double_field(number: int, value: float) -> bytes:
    if value == 0.0 and math.copysign(1.0, value) > 0:
        return b""  # +0.0 is the default; -0.0 is not, and is written
    return varint(number << 3 | I64) + _DOUBLE.pack(value)
