"""The delivery every fetcher shares: trust a matching marked tree, else own the destination
(waiting for another fetcher that owns it), then fill, verify and promote it.

The fetcher that owns a destination is the only one that writes its `.partial` and promotes it;
the others wait and return the owner's marked tree once it is there, or take over from an owner
that died and resume what it left. An owner first clears its `.partial` of whatever an earlier
owner cannot have left for it to resume (`noctaya.fetch.promotion.prepare_partial`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from noctaya.fetch.errors import TransientFetchError
from noctaya.fetch.layout import Target, locate
from noctaya.fetch.marker import marker_of, trusted
from noctaya.fetch.ownership import Owner, Ownership, Waiting
from noctaya.fetch.progress import Progress
from noctaya.fetch.promotion import partial_of, prepare_partial
from noctaya.fetch.retry import RetryPolicy


@dataclass(frozen=True, slots=True)
class Delivered:
    path: Path
    """The directory an engine loads."""
    fetched: bool
    """Whether this process filled the destination (rather than finding it complete)."""
    completed_by: Owner | None = None
    """The owner whose result this process waited for and adopted."""


def deliver(target: Target, fill: Callable[[Target], None], waiting: Waiting) -> Delivered:
    """`target` complete, filled by `fill` unless a trusted marker says it already is."""
    target.make_parent()
    if (found := _complete(target)) is not None:
        return Delivered(found, fetched=False)
    ownership = Ownership(target.destination, target.uri, waiting)
    if not ownership.acquire(_marked(target)):
        return Delivered(_completed(target), fetched=False, completed_by=ownership.waited_for)
    try:
        if (found := _complete(target)) is not None:  # finished while this one started
            return Delivered(found, fetched=False, completed_by=ownership.waited_for)
        prepare_partial(partial_of(target.destination))
        fill(target)
        return Delivered(_completed(target), fetched=True)
    finally:
        ownership.release()


class Fetcher:
    """One source kind's fetcher: `fill` is the source's own part, done only by the
    destination's owner; `deliver` does the rest."""

    def __init__(
        self,
        *,
        retry: RetryPolicy | None = None,
        progress: Progress | None = None,
        waiting: Waiting | None = None,
    ) -> None:
        self._retry = retry or RetryPolicy()
        self._progress = progress or Progress()
        self._waiting = waiting or Waiting()

    def fetch(self, uri: str, cache: Path) -> Path:
        """Deliver `uri` under `cache` in this process, as the command does without its progress
        lines and exit statuses; the directory an engine loads."""
        return deliver(locate(uri, cache), self.fill, self._waiting).path

    def fill(self, target: Target) -> None:
        """Download, verify and promote `target` into its destination (owned by the caller)."""
        raise NotImplementedError


def _complete(target: Target) -> Path | None:
    """The directory an engine loads, if the destination is a trusted tree that names one."""
    if not trusted(target.destination, target.identity):
        return None
    return target.result()


def _completed(target: Target) -> Path:
    """The directory of a target just found or made complete, unless someone changed it since."""
    found = _complete(target)
    if found is None:
        raise TransientFetchError(
            target.uri, f"{target.destination} changed as soon as it was complete; try again"
        )
    return found


def _marked(target: Target) -> Callable[[], bool]:
    """Whether the target has become trusted, checked in full only when its marker changes."""
    marker = marker_of(target.destination)
    last: tuple[int, int, int] | None = None

    def done() -> bool:
        nonlocal last
        try:
            status = os.stat(marker)
        except OSError:
            return False
        seen = (status.st_ino, status.st_mtime_ns, status.st_size)
        if seen == last:
            return False
        last = seen
        return _complete(target) is not None

    return done
