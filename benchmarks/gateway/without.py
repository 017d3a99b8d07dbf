"""`noctaya-gateway` with some of its changes to hypercorn, h2, h11 or asyncio undone, to measure
what each one gains (the ledger's figures, `benchmarks.gateway.patches`).

    BENCH_WITHOUT=name[,name...] python -m benchmarks.gateway.without [noctaya-gateway arguments]

Each name restores the third-party behaviour one change replaces, and nothing else (`UNDO`); an
unknown name is an error, so a change removed from the gateway cannot be measured by mistake.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from noctaya.gateway.process import cli
from noctaya.gateway.server import patches as server_patches

ENVIRONMENT = "BENCH_WITHOUT"


def _drop_installer(module: str) -> Callable[[], None]:
    """The change is one of `SERVER_PATCHES`: leave it uninstalled."""

    def undo() -> None:
        server_patches.SERVER_PATCHES = tuple(
            install
            for install in server_patches.SERVER_PATCHES
            if install.__module__ != f"noctaya.gateway.server.patches.{module}"
        )

    return undo


def _restore(owner: str, attribute: str, original: str) -> Callable[[], None]:
    """The change is a method of one of the gateway's own subclasses: use the original's."""

    def undo() -> None:
        module_name, _, class_name = owner.rpartition(".")
        source_module, _, source_class = original.rpartition(".")
        klass = getattr(__import__(module_name, fromlist=[class_name]), class_name)
        source = getattr(__import__(source_module, fromlist=[source_class]), source_class)
        setattr(klass, attribute, getattr(source, attribute))

    return undo


def _default_task_factory() -> None:
    from noctaya.gateway.process import running as process

    process._task_named_for_its_coroutine = None  # type: ignore[assignment]


UNDO: dict[str, Callable[[], None]] = {
    "connection-lifetime": _drop_installer("connection_lifetime"),
    "slim-events": _drop_installer("slim_connections"),
    "task-names": _default_task_factory,
    "h2-immediate-send": _restore(
        "noctaya.gateway.server.patches.http2.protocol.GatewayH2Protocol",
        "stream_send",
        "hypercorn.protocol.h2.H2Protocol",
    ),
    "body-frames": _restore(
        "noctaya.gateway.server.patches.body_frames.BodyFramesH11Protocol",
        "stream_send",
        "hypercorn.protocol.h11.H11Protocol",
    ),
}
"""Each measurable change, by name, and how to undo it."""


def undo_named() -> bool:
    """Undo the changes `BENCH_WITHOUT` names; False, having undone none, if one is unknown."""
    names = [name for name in os.environ.get(ENVIRONMENT, "").split(",") if name]
    unknown = [name for name in names if name not in UNDO]
    if unknown:
        print(f"{ENVIRONMENT}: unknown change(s) {', '.join(unknown)}", file=sys.stderr)
        return False
    for name in names:
        UNDO[name]()
    return True


def main() -> int:
    if not undo_named():
        return 2
    return cli.main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
