"""What `noctaya-local` logs about its processes: the formats, and the patterns that read them.

The lines are for people first; the demo and the tests read the same lines through these
patterns, so a reworded message cannot silently break them. A line about one service starts
with its name.
"""

from __future__ import annotations

import re

ENDPOINT = "serving %d LLMService(s) at %s: %s"
GATEWAY_STARTED = "%s: gateway started (pid %d)"
SERVING = 'serving LLMService "%s" at %s with runtime "%s" (engine at %s, %s)'
ENGINE_STARTED = "%s: engine started (pid %d): %s"
ENGINE_EXITED = "%s: engine (pid %d) exited on its own: %s"
ENGINE_STOPPED = "%s: engine stopped (pid %d, %s)"
ENGINE_START_FAILED = "%s: engine failed to start: %s"
RESTARTING = "%s: restarting the engine in %gs"
SCALE_UP = "%s: demand active: scaling the engine from 0 to 1"
SCALE_DOWN_PENDING = "%s: demand inactive: scaling the engine to 0 in %ds unless demand returns"
SCALE_DOWN = "%s: no demand for %ds: scaling the engine to 0"
SWAP_OUT = "%s: swapping out: its engine stops to hand its devices to %s"
STARTED_IN = (
    "%s: ready %.2fs after it was asked for: %.2fs to stop %s, %.2fs to start, %.2fs to load"
)
SERVICE_ADDED = "%s: added (%s)"
SERVICE_CHANGED = "%s: changed (%s): restarting it"
SERVICE_REMOVED = "%s: removed (%s): stopping it"
EDIT_REFUSED = "%s: refused, the running services stay as they are: %s"
SERVICE_RESTARTING = "%s: its processes failed; starting them again in %gs"
STOPPED = "stopped"

_SERVICE = r"(?P<service>[a-z0-9-]+): "
ENDPOINT_RE = re.compile(r"serving \d+ LLMService\(s\) at (?P<url>\S+): ")
GATEWAY_STARTED_RE = re.compile(_SERVICE + r"gateway started \(pid (?P<pid>\d+)\)")
SERVING_RE = re.compile(r'serving LLMService "(?P<name>[^"]*)" at (?P<url>\S+) ')
ENGINE_STARTED_RE = re.compile(_SERVICE + r"engine started \(pid (?P<pid>\d+)\)")
ENGINE_STOPPED_RE = re.compile(_SERVICE + r"engine stopped \(pid (?P<pid>\d+), ")
SCALE_DOWN_PENDING_RE = re.compile(
    _SERVICE + r"demand inactive: scaling the engine to 0 in (?P<s>\d+)s"
)
SWAP_OUT_RE = re.compile(
    _SERVICE + r"swapping out: its engine stops to hand its devices to "
    r"(?P<to>[a-z0-9-]+)"
)
STARTED_IN_RE = re.compile(
    _SERVICE + r"ready (?P<total>[\d.]+)s after it was asked for: (?P<stop>[\d.]+)s to stop "
    r"(?P<stopped>.+), (?P<start>[\d.]+)s to start, (?P<load>[\d.]+)s to load"
)
SERVICE_ADDED_RE = re.compile(_SERVICE + r"added \(")
SERVICE_REMOVED_RE = re.compile(_SERVICE + r"removed \(")
EDIT_REFUSED_RE = re.compile(r"(?P<file>\S+): refused, the running services stay as they are: ")
