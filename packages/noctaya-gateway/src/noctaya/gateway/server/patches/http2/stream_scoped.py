"""h2's server connection with two connection errors narrowed to the one stream at fault.

- A body that disagrees with its `content-length` is a malformed request, which RFC 9113 makes
  a stream error; h2 finds it only as the DATA arrives and ends the whole connection.
- A stream opened past SETTINGS_MAX_CONCURRENT_STREAMS is refused with RST_STREAM
  REFUSED_STREAM, which RFC 9113 allows, so the client may retry it; unpatched, h2 ends the
  connection with GOAWAY PROTOCOL_ERROR, leaving every stream already accepted unanswered.
  h2 raises before decoding the header block, but the client's HPACK encoder has already
  changed its table for it: the block is decoded, and discarded, to keep both tables in step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import h2.connection
import h2.events
import h2.exceptions
import h2.stream
from h2.errors import ErrorCodes

if TYPE_CHECKING:
    from h2.events import Event
    from hyperframe.frame import DataFrame, Frame, HeadersFrame  # h2's frame layer


class StreamRefused(h2.events.Event):
    """The client opened a stream over the concurrency limit; it was reset with REFUSED_STREAM.
    The gateway charges it to the connection's reset budget (`floods`)."""

    def __init__(self, stream_id: int) -> None:
        self.stream_id = stream_id

    def __repr__(self) -> str:
        return f"<StreamRefused stream_id:{self.stream_id}>"


class StreamScopedConnection(h2.connection.H2Connection):
    def _receive_data_frame(self, frame: DataFrame) -> tuple[list[Frame], list[Event]]:
        try:
            return super()._receive_data_frame(frame)
        except h2.exceptions.InvalidBodyLengthError:
            self.reset_stream(frame.stream_id, ErrorCodes.PROTOCOL_ERROR)
            # Its bytes still count against the connection's window.
            self.acknowledge_received_data(frame.flow_controlled_length, frame.stream_id)
            return [], []

    def _receive_headers_frame(self, frame: HeadersFrame) -> tuple[list[Frame], list[Event]]:
        try:
            return super()._receive_headers_frame(frame)
        except h2.exceptions.TooManyStreamsError:
            return [], self._refuse(frame)

    def _refuse(self, frame: HeadersFrame) -> list[Event]:
        h2.connection._decode_headers(self.decoder, frame.data)  # for the HPACK table only
        events = self.state_machine.process_input(h2.connection.ConnectionInputs.RECV_HEADERS)
        # Opened (a stream id out of order is still the connection error h2 makes of it) and
        # reset at once: h2 then answers the stream's late frames as it does for any reset one.
        stream = self._begin_new_stream(
            frame.stream_id, h2.connection.AllowedStreamIDs(not self.config.client_side)
        )
        stream.state_machine.process_input(h2.stream.StreamInputs.RECV_HEADERS)
        self.reset_stream(frame.stream_id, ErrorCodes.REFUSED_STREAM)
        return [*events, StreamRefused(frame.stream_id)]
