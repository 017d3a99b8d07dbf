"""What `noctaya-local` logs about its processes: the formats, and the patterns that read them.

The lines are for people first; the demo and the tests read the same lines through these
patterns, so a reworded message cannot silently break them.
"""

from __future__ import annotations

import re

GATEWAY_STARTED = "gateway started (pid %d)"
SERVING = 'serving LLMService "%s" at %s with runtime "%s" (engine at %s, %s)'
ENGINE_STARTED = "engine started (pid %d): %s"
ENGINE_EXITED = "engine (pid %d) exited on its own: %s"
ENGINE_STOPPED = "engine stopped (pid %d, %s)"
SCALE_UP = "demand active: scaling the engine from 0 to 1"
SCALE_DOWN_PENDING = "demand inactive: scaling the engine to 0 in %ds unless demand returns"
SCALE_DOWN = "no demand for %ds: scaling the engine to 0"
STOPPED = "stopped"

GATEWAY_STARTED_RE = re.compile(r"gateway started \(pid (?P<pid>\d+)\)")
SERVING_RE = re.compile(r'serving LLMService "(?P<name>[^"]*)" at (?P<url>\S+) ')
ENGINE_STARTED_RE = re.compile(r"engine started \(pid (?P<pid>\d+)\)")
ENGINE_STOPPED_RE = re.compile(r"engine stopped \(pid (?P<pid>\d+), ")
SCALE_DOWN_PENDING_RE = re.compile(r"demand inactive: scaling the engine to 0 in (?P<s>\d+)s")
