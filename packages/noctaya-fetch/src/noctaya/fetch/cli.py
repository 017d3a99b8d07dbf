"""`noctaya-fetch <uri> --cache DIR`: the prewarm / OCI staging Job's command.

Progress goes to stderr (a line every few seconds for `kubectl logs`, a live bar on a
terminal), then one summary line; the model's local directory goes to stdout. The exit code
tells a Job controller whether another try can help. While another fetcher owns the same
destination, the lines say whom this one waits for; it then ends on that fetcher's result, or
takes over if it died.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import time
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from noctaya.core.cache_planning import FETCH_PERMANENT_FAILURE
from noctaya.fetch.limits import DEFAULT_CONCURRENCY, DEFAULT_SIZE_CAP

if TYPE_CHECKING:
    from noctaya.fetch.delivery import Delivered
    from noctaya.fetch.progress import Progress

EXIT_PERMANENT = FETCH_PERMANENT_FAILURE
"""Retrying cannot help: bad URI, not found, not allowed, wrong bytes, unsafe artifact, a cache
that is read-only or holds the wrong kind of entry. The prewarm Job's pod failure policy fails
the Job at once on this status, so it is the operator's constant, not a copy of it."""
EXIT_TRANSIENT = 75
"""EX_TEMPFAIL: the network, the server or the cache volume (full) failed after every retry;
try again later."""
EXIT_INTERNAL = 70
"""EX_SOFTWARE: a failure the fetcher does not know how to classify (an errno that
`noctaya.fetch.errors.ERRNO_VERDICTS` does not list, a bug); the Job retries it."""
_FORMATTER = logging.Formatter()
TERMINATION_LOG = Path("/dev/termination-log")
"""Kubernetes' default terminationMessagePath: the failure line written there becomes the
container's termination message, which the operator quotes in the service's status."""


def main(argv: Sequence[str] | None = None) -> int:
    # The hub clients' own tqdm bars would garble the log; tqdm reads TQDM_* when it is
    # imported, so the fetchers are imported only after this (here and in `_deliver`).
    os.environ.setdefault("TQDM_DISABLE", "1")
    from noctaya.fetch.credentials import hide_uri_credentials, redact
    from noctaya.fetch.progress import Progress

    arguments = _parser().parse_args(argv)
    hide_uri_credentials(arguments.uri)
    _configure_logging()
    progress = Progress()
    started = time.monotonic()
    try:
        delivered = _deliver(arguments, progress)
    except Exception as error:
        line, status = _failure(arguments.uri, error)
        _failed(f"noctaya-fetch: {line}", arguments.termination_log)
        return status
    elapsed = time.monotonic() - started
    print(redact(_summary(arguments.uri, delivered, progress, elapsed)), file=sys.stderr)
    print(delivered.path)
    return 0


def _deliver(arguments: argparse.Namespace, progress: Progress) -> Delivered:
    """The model complete in the cache, fetched by this process or by another one it waited
    for; then the shared cache's ready marker, when one is asked for."""
    from noctaya.fetch.delivery import deliver
    from noctaya.fetch.layout import Target, locate
    from noctaya.fetch.marker import marker_of, read_record, write_marker
    from noctaya.fetch.ownership import Waiting
    from noctaya.fetch.progress import ProgressReporter
    from noctaya.fetch.retry import RetryPolicy
    from noctaya.fetch.sources import FetchOptions, fetcher_for

    uri: str = arguments.uri
    interval: float = arguments.progress_interval
    options = FetchOptions(
        retry=RetryPolicy(attempts=arguments.attempts),
        progress=progress,
        registry_config=arguments.registry_config,
        plain_http=arguments.plain_http,
        size_cap=arguments.size_cap,
        concurrency=arguments.concurrency,
    )

    def fill(target: Target) -> None:
        """The owner's part; the client libraries are imported only here."""
        fetcher = fetcher_for(target.model.kind, options)
        live = sys.stderr.isatty()
        with ProgressReporter(progress, uri, sys.stderr, interval=interval, live=live):
            fetcher.fill(target)

    target = locate(uri, arguments.cache)
    delivered = deliver(target, fill, Waiting(interval=interval, timeout=arguments.wait_timeout))
    if arguments.ready_marker is not None:
        write_marker(arguments.ready_marker, read_record(marker_of(target.destination)) or {})
    return delivered


def _failure(uri: str, error: Exception) -> tuple[str, int]:
    """The failure line (without the command's name) and the exit status that tells the Job
    whether another try can help."""
    from noctaya.fetch.errors import FetchError, describe, os_failure

    if isinstance(error, OSError):
        error = os_failure(uri, error) or error
    if isinstance(error, FetchError):
        return str(error), EXIT_TRANSIENT if error.transient else EXIT_PERMANENT
    if not isinstance(error, OSError):
        logging.getLogger("noctaya.fetch").error("unexpected failure", exc_info=error)
    return f"{uri}: {describe(error)}", EXIT_INTERNAL


def _summary(uri: str, delivered: Delivered, progress: Progress, elapsed: float) -> str:
    """The closing stderr line: who completed the model, or that it already was, or how much
    this process fetched and how fast (bytes resumed from an earlier try not counted)."""
    from noctaya.fetch.progress import format_bytes, format_duration

    path = delivered.path
    if delivered.completed_by is not None:
        return (
            f"noctaya-fetch: {uri}: completed by {delivered.completed_by} while this one "
            f"waited ({format_duration(elapsed)}); ready at {path}"
        )
    if not delivered.fetched or progress.total is None:
        return f"noctaya-fetch: {uri}: already complete at {path}"
    fetched = progress.done() - progress.resumed
    rate = format_bytes(fetched / max(elapsed, 1e-6))
    return (
        f"noctaya-fetch: {uri}: fetched {format_bytes(fetched)} in "
        f"{format_duration(elapsed)} ({rate}/s); ready at {path}"
    )


def _failed(line: str, termination_log: Path) -> None:
    """The failure on stderr, and as the termination message where a kubelet provides the file
    (outside a container there is none, and nothing is created): one line, without a secret,
    whatever the clients' errors quoted."""
    from noctaya.fetch.credentials import redact

    line = redact(line)
    print(line, file=sys.stderr)
    with contextlib.suppress(OSError), termination_log.open("r+") as message:
        message.truncate()
        message.write(line)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="noctaya-fetch",
        description="Download a model into a cache directory: verified, resumable, promoted "
        "atomically, with a readiness marker written last.",
    )
    parser.add_argument("uri", help="hf://, huggingface://, modelscope:// or oci://…@sha256:…")
    parser.add_argument("--cache", type=Path, required=True, help="the cache directory (/cache)")
    parser.add_argument(
        "--registry-config",
        type=Path,
        help="dockerconfigjson with the OCI registry's credentials (a mounted Secret)",
    )
    parser.add_argument(
        "--ready-marker",
        type=Path,
        help="a file to create once the model is complete, after its own marker (a shared "
        "cache's /cache/.noctaya-ready)",
    )
    parser.add_argument(
        "--plain-http", action="store_true", help="talk to the OCI registry over plain HTTP"
    )
    parser.add_argument(
        "--size-cap",
        type=_quantity,
        default=DEFAULT_SIZE_CAP,
        help="largest OCI artifact accepted, as a Kubernetes quantity (default 200Gi)",
    )
    parser.add_argument(
        "--concurrency",
        type=_positive,
        default=DEFAULT_CONCURRENCY,
        help="OCI blobs downloaded at once",
    )
    parser.add_argument(
        "--attempts", type=_positive, default=6, help="tries per download, the first included"
    )
    parser.add_argument(
        "--termination-log",
        type=Path,
        default=TERMINATION_LOG,
        help="where to write the failure line for Kubernetes if that file exists "
        "(default /dev/termination-log)",
    )
    parser.add_argument(
        "--wait-timeout",
        type=float,
        default=6 * 3600.0,
        help="seconds to wait for another fetcher that is fetching the same model into the "
        "same cache before giving up with exit code 75 (default 6 hours)",
    )
    parser.add_argument(
        "--progress-interval",
        type=float,
        default=5.0,
        help="seconds between progress lines (and lines naming the fetcher waited for) when "
        "stderr is not a terminal",
    )
    return parser


def _quantity(text: str) -> int:
    from noctaya.core.values import Quantity

    try:
        value = Quantity.parse(text).value
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a quantity such as 50Gi") from None
    if value <= 0 or value != value.to_integral_value():
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive whole number of bytes")
    return int(Decimal(value))


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def _configure_logging() -> None:
    """The fetcher's own lines, quieter hub clients, and every record of every logger (the
    clients' own handlers included, and warnings) redacted when it is made."""
    from noctaya.fetch.credentials import redact

    make_record = logging.getLogRecordFactory()

    def redacted_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        with contextlib.suppress(Exception):  # a bad format is the handler's to report
            record.msg, record.args = redact(record.getMessage(), lines=True), None
        if record.exc_info:
            record.exc_text = redact(_FORMATTER.formatException(record.exc_info), lines=True)
        if record.stack_info:
            record.stack_info = redact(record.stack_info, lines=True)
        return record

    logging.setLogRecordFactory(redacted_record)
    logging.captureWarnings(True)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("noctaya-fetch: %(message)s"))
    fetch_log = logging.getLogger("noctaya.fetch")
    fetch_log.addHandler(handler)
    fetch_log.setLevel(logging.INFO)
    fetch_log.propagate = False
    for noisy in ("modelscope", "modelscope_hub", "huggingface_hub", "oras"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


if __name__ == "__main__":
    sys.exit(main())
