"""hypercorn configured for a server facing clients: the gateway's and local mode's endpoint.

hypercorn has one timer for a connection with no request in progress: it bounds an idle
keep-alive connection and a request head still arriving alike. Proxies pooling connections to
the gateway race a short idle close into sporadic 502s, so the timer gets an idle budget (120 s,
`GatewayConfig.idle_timeout`); a head, once begun, has its own shorter deadline of 10 s
(`patches.head_timeout`), so a client trickling one cannot hold a connection for the idle budget.
"""

from __future__ import annotations

import logging

from hypercorn.config import Config
from noctaya.gateway.process.config import GatewayConfig
from noctaya.gateway.requests.proxy import UpstreamAborted


class _ServerLogFilter(logging.Filter):
    """hypercorn's log in the gateway's one-line form. No "Running on" banner: the gateway logs
    its own "listening on" line, with its version and backend. A backend failing mid-response
    aborts the client exchange by raising out of the app, which hypercorn logs with a traceback:
    one warning line says the same."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith("Running on "):
            return False
        if record.exc_info and isinstance(record.exc_info[1], UpstreamAborted):
            record.msg = "proxy: backend failed mid-response, aborted client stream: %s"
            record.args = (record.exc_info[1],)
            record.exc_info = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def _server_logger() -> logging.Logger:
    logger = logging.getLogger("noctaya.gateway.http")
    if not any(isinstance(f, _ServerLogFilter) for f in logger.filters):
        logger.addFilter(_ServerLogFilter())
    return logger


def hypercorn_config(config: GatewayConfig) -> Config:
    hc = Config()
    hc.backlog = 4096
    hc.graceful_timeout = config.shutdown_timeout
    hc.keep_alive_timeout = config.idle_timeout
    hc.keep_alive_max_requests = 2**31
    hc.h2_max_concurrent_streams = 250
    hc.h11_max_incomplete_size = 64 * 1024
    hc.include_server_header = False
    hc.accesslog = None
    hc.errorlog = _server_logger()
    return hc
