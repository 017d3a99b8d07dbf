"""Structured logs in the two shapes of zap, the logger of Go operators, on purpose: pipelines
and people used to those read these the same way, and the `--zap-*` flags mean the same.

Production (the default): one JSON object per line with `level`, `ts`, `logger`, `msg` and the
record's `extra` fields, at info. Development (`--zap-devel`, which suits a terminal and not a
cluster's log pipeline, hence not the default, unlike the reference's): tab-separated
`time LEVEL logger message {fields as JSON}`, from debug. Either way each field is a key, not
prose, so a log pipeline can filter on `llmservice` or `error` without parsing messages.
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from datetime import UTC, datetime
from typing import Any, TextIO

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}
_LEVEL_NAMES = {"debug": logging.DEBUG, "info": logging.INFO, "error": logging.ERROR}
_LEVEL_NAMES["panic"] = logging.CRITICAL
_QUIET_LIBRARIES = ("urllib3", "kubernetes")  # per-request chatter at debug level


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = {k: v for k, v in record.__dict__.items() if k not in _STANDARD}
    if record.exc_info and record.exc_info[1] is not None:
        fields["error"] = str(record.exc_info[1]) or type(record.exc_info[1]).__name__
        fields["stacktrace"] = "".join(traceback.format_exception(*record.exc_info)).rstrip()
    return fields


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "level": record.levelname.lower(),
            "ts": _timestamp(record),
            "logger": record.name,
            "msg": record.getMessage(),
            **_fields(record),
        }
        return json.dumps(entry, default=str, ensure_ascii=False)


class ConsoleFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = _fields(record)
        stacktrace = fields.pop("stacktrace", None)
        parts = [_timestamp(record), record.levelname, record.name, record.getMessage()]
        if fields:
            parts.append(json.dumps(fields, default=str, ensure_ascii=False))
        line = "\t".join(parts)
        return f"{line}\n{stacktrace}" if stacktrace else line


def level_number(level: str) -> int:
    """The level `--zap-log-level` names; an integer N > 0 is debug verbosity N, which is debug
    here (Python has one debug level)."""
    return _LEVEL_NAMES.get(level, logging.DEBUG)


def configure_logging(
    *, development: bool, encoder: str | None, level: str | None, stream: TextIO | None = None
) -> None:
    """Route every logger to `stream` (stderr) in the chosen shape; replaces earlier handlers."""
    json_lines = (encoder or ("console" if development else "json")) == "json"
    threshold = level_number(level or ("debug" if development else "info"))
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if json_lines else ConsoleFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(threshold)
    for name in _QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(max(threshold, logging.WARNING))
