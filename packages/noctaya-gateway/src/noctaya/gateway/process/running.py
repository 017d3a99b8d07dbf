"""How this package's commands run: on uvloop where available (it roughly doubles hypercorn's
per-connection request rate in measurements), logging one line per event, `YYYY/MM/DD hh:mm:ss
message`: the reference implementation's log lines, so what reads those reads these alike."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def quiet_cancelled_callbacks(loop: asyncio.AbstractEventLoop) -> None:
    """Drop the "Exception in callback ... CancelledError" tracebacks Python 3.11 logs whenever a
    server's connection task is cancelled (`asyncio.start_server`'s done-callback calls
    `task.exception()` on it; fixed in 3.12). A cancelled connection, e.g. one force-closed at
    the end of a drain, is no error. Other contexts go to the handler that was there. Idempotent.
    """
    previous = loop.get_exception_handler()
    if getattr(previous, "quiets_cancelled", False):
        return

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if isinstance(context.get("exception"), asyncio.CancelledError):
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    handler.quiets_cancelled = True  # type: ignore[attr-defined]
    loop.set_exception_handler(handler)


def _task_named_for_its_coroutine(
    loop: asyncio.AbstractEventLoop, coro: Any, **options: Any
) -> asyncio.Task[Any]:
    """Python 3.11 gives every task a name string of its own ("Task-12345"), made as the task
    is: two per held stream, thousands held. The coroutine's own qualified name costs nothing
    and tells more in a log line. A name the caller gives still wins; later Pythons pass more
    options (and `name=None`), taken as they come."""
    if options.get("name") is None:
        options["name"] = getattr(coro, "__qualname__", None)
    return asyncio.Task(coro, loop=loop, **options)


def run(main: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        runner.get_loop().set_task_factory(_task_named_for_its_coroutine)
        return runner.run(main)


def configure_logging() -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%Y/%m/%d %H:%M:%S"
    )
