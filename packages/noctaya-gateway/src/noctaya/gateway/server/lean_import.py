"""hypercorn imported without the standard modules it loads only for what the gateway never
uses: `multiprocessing.synchronize` (a type annotation, and hypercorn's multi-worker runner),
`logging.config` (a logging configuration file) and `tomllib` (a TOML configuration file). They
and what they bring (tempfile, shutil, bz2, lzma, pickle) are 1.9 MiB of every gateway's and
aggregator's resident memory, about 2 GiB at a thousand idle services.

hypercorn imports names from them (`from logging.config import dictConfig`), which
`importlib.util.LazyLoader` cannot defer: a from-import reads the attribute at once. So while
hypercorn's modules are imported, each deferred module is a stand-in whose attributes are
forwarders: a call to one imports the real module then and calls it there, so the option that
needs it still works. The stand-ins leave `sys.modules` as soon as hypercorn is in, so any later
import of those names gets the real module.

Switched on only by a process's entry point (`import_hypercorn`, called by `noctaya-gateway`
before it starts a thread), and only then: with other threads running, one
of them could import a deferred module while its stand-in is in `sys.modules`, so hypercorn is
imported as it is. Only on the release lines the server patches are tested with, whose use of
each name was read (a forwarder stands only for something called); anywhere else hypercorn is
imported as it is, and the patches refuse the release as before. The ledger (`patches/ledger.md`)
has the measured saving.
"""

from __future__ import annotations

import importlib
import sys
import threading
import types
from collections.abc import Callable, Iterable
from typing import Any

from noctaya.gateway.server.tested_versions import (
    UntestedServerLibrary,
    require_tested_versions,
)

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
    if threading.active_count() > 1:
        return  # another thread could see a stand-in: the plain import happens where it is used
    try:
        require_tested_versions()
    except UntestedServerLibrary:
        return
    import_deferring(HYPERCORN_MODULES, DEFERRED)


def import_deferring(modules: Iterable[str], deferred: Iterable[str]) -> None:
    """Import `modules` with each name of `deferred` not yet imported standing in."""
    stand_ins = [name for name in deferred if name not in sys.modules]
    for name in stand_ins:
        sys.modules[name] = _stand_in(name)
    try:
        for module in modules:
            importlib.import_module(module)
    finally:
        for name in stand_ins:
            del sys.modules[name]


def is_forwarder(value: object) -> bool:
    """Whether `value` is a stand-in's forwarder (or the stand-in module itself)."""
    if isinstance(value, types.ModuleType):
        return sys.modules.get(value.__name__) is not value
    return getattr(value, "__module__", None) == __name__


def _stand_in(name: str) -> types.ModuleType:
    module = types.ModuleType(name, f"stands in for {name} until one of its names is called")

    def attribute(attribute: str) -> object:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        submodule = sys.modules.get(f"{name}.{attribute}")  # `import a.b as c` reads a.b
        return submodule if submodule is not None else _forwarder(name, attribute)

    module.__getattr__ = attribute  # type: ignore[method-assign]
    return module


def _forwarder(module: str, attribute: str) -> Callable[..., Any]:
    def forward(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), attribute)(*args, **kwargs)

    forward.__name__ = forward.__qualname__ = attribute
    return forward
