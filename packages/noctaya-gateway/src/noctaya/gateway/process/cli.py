"""`noctaya-gateway`: the gateway (default) or, with `--mode=aggregator`, the demand aggregator.

Each mode is its own entry module, imported only once the mode is chosen, so a process loads
what its mode needs: the aggregator never imports the proxy and HTTP server stack, nor the
gateway the aggregator. A startup error is logged as one line, without a traceback, and the
process exits 1; SIGTERM and SIGINT start the drain.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType

from noctaya.gateway.process import running as process
from noctaya.gateway.process.version import gateway_version
from noctaya.gateway.server import lean_import

log = logging.getLogger("noctaya.gateway")

MODE_ENTRIES = {
    "gateway": "noctaya.gateway.process.gateway_main",
    "aggregator": "noctaya.gateway.aggregator.main",
}
"""Mode → the module whose `run(environ) -> int` is that process."""


RENDERED = {(): "gateway", ("--mode=aggregator",): "aggregator"}
"""The command lines the operator renders, read without argparse: it would hold 0.4 MiB in
every gateway and aggregator for the one flag they are given. Any other command line (help,
`--version`, another spelling, a mistake) goes through argparse."""


def main(argv: Sequence[str] | None = None) -> int:
    mode = RENDERED.get(tuple(sys.argv[1:] if argv is None else argv))
    if mode is None:
        parsed = _parse(argv)
        if parsed is None:
            print(gateway_version())
            return 0
        mode = parsed
    process.configure_logging()
    entry = MODE_ENTRIES.get(mode)
    if entry is None:
        log.critical('unsupported mode "%s"', mode)
        return 1
    run: Callable[[Mapping[str, str]], int] = load_entry(entry).run
    return run(os.environ)


def load_entry(entry: str) -> ModuleType:
    """A mode's entry module, over hypercorn imported lean (both modes serve with it)."""
    lean_import.import_hypercorn()
    return importlib.import_module(entry)


def _parse(argv: Sequence[str] | None) -> str | None:
    """The mode a command line asks for; None for `--version`."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="noctaya-gateway",
        description="Noctaya gateway: OpenAI-compatible admission proxy with controlled cold "
        "starts, KEDA external scaler, or (--mode=aggregator) the multi-gateway demand "
        "aggregator. Configured by NOCTAYA_* environment variables.",
    )
    parser.add_argument("--version", "-version", action="store_true", help="print the version")
    parser.add_argument("--mode", "-mode", default="gateway", help="gateway (default) | aggregator")
    args = parser.parse_args(argv)
    return None if args.version else str(args.mode)
