"""A request's bytes, held once while it waits.

Hypercorn passes each read to h11 as a `RawData` event and, on HTTP/1.1, stays inside that call
while the request is in progress (h11 is paused until the response ends): the read loop's frame
and each protocol frame above h11 keep the event, and with it the bytes of the read, up to 64 KiB.
A cold request is held for minutes with its body already parsed out by the app, so every held
stream kept its request twice (a 20 KB prompt cost 40 KB). Once h11 has copied a read into its
own buffer, the event gives its bytes up.
"""

from __future__ import annotations

from hypercorn.events import Event, RawData
from noctaya.gateway.response_writes import HeadWithBodyH11Protocol


class HeldReadsH11Protocol(HeadWithBodyH11Protocol):
    async def handle(self, event: Event) -> None:
        if type(event) is not RawData:
            await super().handle(event)
            return
        self.connection.receive_data(event.data)  # as hypercorn's handle does
        object.__setattr__(event, "data", b"")  # frozen: nobody else may change it
        await self._handle_events()
