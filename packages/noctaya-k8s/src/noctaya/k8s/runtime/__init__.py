"""Generic controller runtime: informers, work queue, leader election, probes, the manager.

Knows nothing about LLMServices; the reconciler and its watch mappings plug in through
`Manager.watch` and `Manager.run`.
"""

from .handlers import (
    EnqueueMapped,
    Mapper,
    UpdatePredicate,
    controller_owner,
    generation_changed,
    own_key,
)
from .health import HealthServer, parse_probe_address
from .informer import EventHandler, Informer, InformerTiming, WatchTarget
from .leader_election import (
    LEADER_ELECTION_ID,
    LeaderElectionConfig,
    LeaderElector,
    default_identity,
)
from .manager import LeadershipLost, Manager, ManagerOptions, Reconciler
from .resources import KindNotServed, ResourceKind, ResourceResolver
from .store import KubeObject, ObjectKey, Store, object_key
from .workqueue import ExponentialBackoff, WorkQueue

__all__ = [
    "LEADER_ELECTION_ID",
    "EnqueueMapped",
    "EventHandler",
    "ExponentialBackoff",
    "HealthServer",
    "Informer",
    "InformerTiming",
    "KindNotServed",
    "KubeObject",
    "LeaderElectionConfig",
    "LeaderElector",
    "LeadershipLost",
    "Manager",
    "ManagerOptions",
    "Mapper",
    "ObjectKey",
    "Reconciler",
    "ResourceKind",
    "ResourceResolver",
    "Store",
    "UpdatePredicate",
    "WatchTarget",
    "WorkQueue",
    "controller_owner",
    "default_identity",
    "generation_changed",
    "object_key",
    "own_key",
    "parse_probe_address",
]
