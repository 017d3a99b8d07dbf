"""hypercorn imported without the standard modules it loads only for what the gateway never
uses: `multiprocessing.synchronize` (a type annotation, and hypercorn's multi-worker runner),
`logging.config` (a logging configuration file) and `tomllib` (a TOML configuration file). They
and what they bring (tempfile, shutil, bz2, lzma, pickle) are 1.9 MiB of every gateway's and
aggregator's resident memory, about 2 GiB at a thousand idle services.

Each stands in while hypercorn is imported (`import_deferring`), so the option that needs it
still works. Only on the release lines the server patches are tested with (a forwarder could
not stand in for a value a later release uses otherwise); anywhere else hypercorn is imported
as it is, and the patches refuse the release as before.
"""

from __future__ import annotations

import sys

from noctaya.core.deferred_imports import import_deferring
from noctaya.gateway.tested_versions import UntestedServerLibrary, require_tested_versions

DEFERRED = ("multiprocessing.synchronize", "logging.config", "tomllib")
"""The modules hypercorn imports at its own import only for options the gateway never sets."""

HYPERCORN_MODULES = (
    "hypercorn.asyncio",
    "hypercorn.config",
    "hypercorn.logging",
    "hypercorn.typing",
)
"""hypercorn's modules that import them; the gateway's server and patches import the rest."""


def import_hypercorn() -> None:
    """Import hypercorn with `DEFERRED` left unloaded; nothing if hypercorn is already in."""
    if "hypercorn" in sys.modules:
        return
    try:
        require_tested_versions()
    except UntestedServerLibrary:
        return
    import_deferring(HYPERCORN_MODULES, DEFERRED)
