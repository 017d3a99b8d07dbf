"""Importing a third-party module without the modules it imports only for calls this process
rarely or never makes, the serving processes' main lever on idle memory: each such import is
resident in every gateway, aggregator and operator whether called or not.

While the modules are imported, each deferred name is a stand-in module whose attributes are
forwarders: a call to one imports the real module then and calls it there, so the rare call
still works. The stand-ins leave `sys.modules` as soon as the import is done, so any later
import of those names gets the real module. A forwarder stands only for something called
(a function, a class constructed); the callers' code is checked against that where this is used.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Iterable
from typing import Any


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
