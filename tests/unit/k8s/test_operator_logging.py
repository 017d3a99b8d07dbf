"""Operator logs are structured: JSON lines in production, zap-console text in development."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from noctaya.k8s.operator.logging_setup import configure_logging


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    """Configure logging into a buffer; put the root logger back as it was afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    quiet = {name: logging.getLogger(name).level for name in ("urllib3", "kubernetes")}
    yield io.StringIO()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    for name, old in quiet.items():
        logging.getLogger(name).setLevel(old)


def test_production_mode_writes_one_json_object_per_line_with_extra_fields(
    stream: io.StringIO,
) -> None:
    configure_logging(development=False, encoder=None, level=None, stream=stream)
    log = logging.getLogger("noctaya.k8s.reconciler")
    log.debug("not at info level")
    log.info("Reconciled LLMService", extra={"llmservice": "team-a/qwen", "readyReplicas": 0})

    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    entry = json.loads(lines[0])
    assert entry["level"] == "info"
    assert entry["logger"] == "noctaya.k8s.reconciler"
    assert entry["msg"] == "Reconciled LLMService"
    assert (entry["llmservice"], entry["readyReplicas"]) == ("team-a/qwen", 0)
    assert entry["ts"].endswith("Z")


def test_an_exception_becomes_error_and_stacktrace_fields(stream: io.StringIO) -> None:
    configure_logging(development=False, encoder=None, level=None, stream=stream)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("noctaya").exception("reconcile failed")

    entry = json.loads(stream.getvalue())
    assert entry["level"] == "error"
    assert entry["error"] == "boom"
    assert "RuntimeError: boom" in entry["stacktrace"]


def test_development_mode_writes_tab_separated_text_from_debug_level(stream: io.StringIO) -> None:
    configure_logging(development=True, encoder=None, level=None, stream=stream)
    logging.getLogger("noctaya.k8s.operator").debug("starting", extra={"gatewayReplicas": 2})

    timestamp, level, logger, message, fields = stream.getvalue().rstrip("\n").split("\t")
    assert (level, logger, message) == ("DEBUG", "noctaya.k8s.operator", "starting")
    assert json.loads(fields) == {"gatewayReplicas": 2}
    assert timestamp.endswith("Z")


def test_the_encoder_and_level_flags_override_the_mode_defaults(stream: io.StringIO) -> None:
    configure_logging(development=True, encoder="json", level="error", stream=stream)
    logging.getLogger("noctaya").info("hidden")
    logging.getLogger("noctaya").error("shown")

    assert [json.loads(line)["msg"] for line in stream.getvalue().splitlines()] == ["shown"]


def test_client_libraries_stay_quiet_at_debug_level(stream: io.StringIO) -> None:
    configure_logging(development=True, encoder=None, level="debug", stream=stream)
    logging.getLogger("urllib3.connectionpool").debug("Starting new HTTPS connection")
    logging.getLogger("urllib3.connectionpool").warning("Retrying")

    assert "Starting new" not in stream.getvalue()
    assert "Retrying" in stream.getvalue()
