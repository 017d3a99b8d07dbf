"""How the package's commands run their event loop."""

from __future__ import annotations

import asyncio

from noctaya.gateway.process import running as process


async def _held() -> None:
    await asyncio.sleep(0)


def test_a_task_is_named_for_its_coroutine_without_a_string_of_its_own() -> None:
    async def main() -> tuple[asyncio.Task[None], asyncio.Task[None], str]:
        coro = _held()
        named_for_coro = asyncio.get_running_loop().create_task(coro)
        named_by_caller = asyncio.create_task(_held(), name="by the caller")
        await asyncio.gather(named_for_coro, named_by_caller)
        current = asyncio.current_task()
        assert current is not None
        return named_for_coro, named_by_caller, current.get_name()

    named_for_coro, named_by_caller, main_name = process.run(main())
    # The very string the code object holds: thousands of held tasks share it.
    assert named_for_coro.get_name() is _held.__code__.co_qualname
    assert named_by_caller.get_name() == "by the caller"
    assert main_name.endswith("<locals>.main")
