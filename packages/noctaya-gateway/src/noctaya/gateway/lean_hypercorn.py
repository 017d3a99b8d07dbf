"""hypercorn imported without the standard modules it loads only for what the gateway never
uses: `multiprocessing.synchronize` (a type annotation, and hypercorn's multi-worker runner),
`logging.config` (a logging configuration file) and `tomllib` (a TOML configuration file). They
and what they bring (tempfile, shutil, bz2, lzma, pickle) are 1.9 MiB of every gateway's and
aggregator's resident memory, about 2 GiB at a thousand idle services.

While hypercorn is imported, each of those names is a stand-in module whose attributes are
forwarders: a call to one imports the real module then and calls it there, so the option that
needs it still works. The stand-ins leave `sys.modules` as soon as hypercorn is in, so every
later import of those modules gets the real one. Only on the release lines the server patches
are tested with (a forwarder could not stand in for a value a later release uses otherwise);
anywhere else hypercorn is imported as it is, and the patches refuse the release as before.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable
from typing import Any

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
    stand_ins = [name for name in DEFERRED if name not in sys.modules]
    for name in stand_ins:
        sys.modules[name] = _stand_in(name)
    try:
        for module in HYPERCORN_MODULES:
            importlib.import_module(module)
    finally:
        for name in stand_ins:
            del sys.modules[name]


def _stand_in(name: str) -> types.ModuleType:
    module = types.ModuleType(name, f"stands in for {name} until one of its names is called")

    def attribute(attribute: str) -> Callable[..., Any]:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return _forwarder(name, attribute)

    module.__getattr__ = attribute  # type: ignore[method-assign]
    return module


def _forwarder(module: str, attribute: str) -> Callable[..., Any]:
    def forward(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), attribute)(*args, **kwargs)

    forward.__name__ = forward.__qualname__ = attribute
    return forward
