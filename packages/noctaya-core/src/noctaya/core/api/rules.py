"""Cross-field rules, each stated once: the CEL rule the API server runs and the pydantic check.

A `Rule` carries the human message both sides report, the CEL expression for the CRD's
`x-kubernetes-validations`, and the field (relative to the node the rule sits on) that the error
points at. The models call `Rule.check` in their validators and publish `Rule.crd_rule()` in
their schema, so the API server and `parse_llmservice` reject the same input with the same words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from noctaya.core.model_source import CREDENTIAL_PATTERNS, CREDENTIALS_REFUSED
from pydantic_core import PydanticCustomError

RULE_ERROR_TYPE = "noctaya_rule"


@dataclass(frozen=True)
class Rule:
    message: str
    cel: str
    field: str | None = None
    """Field of the node the error is reported on (CRD `fieldPath` `.<field>`), if not the node."""

    def crd_rule(self) -> dict[str, str]:
        rule = {"rule": self.cel, "message": self.message}
        if self.field is not None:
            rule["fieldPath"] = f".{self.field}"
        return rule

    def check(self, ok: bool) -> None:
        """Raise the rule's error (as a pydantic error, so it gains the field's path) unless ok."""
        if not ok:
            raise PydanticCustomError(RULE_ERROR_TYPE, self.message)


def validations(*rules: Rule) -> dict[str, Any]:
    """The `x-kubernetes-validations` fragment for a model's `json_schema_extra`."""
    return {"x-kubernetes-validations": [rule.crd_rule() for rule in rules]}


def _positive(field: str) -> str:
    return f"!has(self.{field}) || duration(self.{field}) > duration('0s')"


MODEL_SOURCE_EXCLUSIVE = Rule(
    "set exactly one of source or catalogRef",
    "has(self.source) != (has(self.catalogRef) && self.catalogRef != '')",
)
SECRET_REF_SOURCES = Rule(
    "secretRef is supported only for oci://, hf:// and modelscope:// sources",
    "!has(self.secretRef) || self.uri.matches('^(?i:oci|hf|huggingface|modelscope)://')",
    "secretRef",
)
URI_WITHOUT_CREDENTIALS = Rule(
    f"uri {CREDENTIALS_REFUSED}",
    "!has(self.uri) || !("
    "(!self.uri.contains('://') && self.uri.contains('@'))"
    + "".join(f" || self.uri.matches('{pattern}')" for pattern in CREDENTIAL_PATTERNS)
    + ")",
    "uri",
)
"""A narrowing on purpose: such a URI's `@` part would reach the engine's arguments, the
served-model list and status. A CEL rule, not a `pattern`, because the API server's refusal of
a pattern repeats the value."""
SECRET_REF_NAME = Rule(
    "secretRef.name is required",
    "!has(self.secretRef) || (has(self.secretRef.name) && self.secretRef.name != '')",
    "secretRef",
)
RUNTIME_SELECTION_EXCLUSIVE = Rule(
    "set exactly one of name or selector.vendor",
    "(has(self.name) && self.name != '')"
    " != (has(self.selector) && has(self.selector.vendor) && size(self.selector.vendor) > 0)",
)
SCALING_MIN_MAX = Rule(
    "min must not exceed max",
    "!has(self.min) || !has(self.max) || self.min <= self.max",
    "max",
)
ACTIVATION_TIMEOUT_POSITIVE = Rule(
    "activationTimeout must be greater than zero",
    _positive("activationTimeout"),
    "activationTimeout",
)
DRAIN_TIMEOUT_NON_NEGATIVE = Rule(
    "drainTimeout must not be negative",
    "!has(self.drainTimeout) || duration(self.drainTimeout) >= duration('0s')",
    "drainTimeout",
)
STABILIZATION_WHOLE_SECONDS = Rule(
    "scaleDownStabilization must be a whole number of seconds from 0s to 1h",
    # Whole seconds without string arithmetic (which the API server's cost estimator cannot
    # bound): the epoch plus the duration must survive truncation to Unix seconds unchanged.
    "!has(self.scaleDownStabilization)"
    " || (duration(self.scaleDownStabilization) >= duration('0s')"
    " && duration(self.scaleDownStabilization) <= duration('1h')"
    " && timestamp(int(timestamp(0) + duration(self.scaleDownStabilization)))"
    " == timestamp(0) + duration(self.scaleDownStabilization))",
    "scaleDownStabilization",
)
SCALER_TLS_COMPLETE = Rule(
    "serverSecretName and authenticationRef.name are both required when tls is set",
    "has(self.serverSecretName) && self.serverSecretName != ''"
    " && has(self.authenticationRef) && has(self.authenticationRef.name)"
    " && self.authenticationRef.name != ''",
)
KV_CACHE_TARGET_PERCENT = Rule(
    "target is a percent of KV cache from 1 to 100 when metric is kvCacheUtil",
    "!has(self.metric) || self.metric != 'kvCacheUtil' || !has(self.target) || self.target <= 100",
    "target",
)
HEARTBEAT_POSITIVE = Rule(
    "heartbeatInterval must be greater than zero",
    _positive("heartbeatInterval"),
    "heartbeatInterval",
)
SCHEDULER_QUEUE_NEEDS_VOLCANO = Rule(
    "scheduler.queue requires scheduler.name volcano",
    "!has(self.queue) || self.queue == '' || (has(self.name) && self.name == 'volcano')",
    "queue",
)
# Rules that sit on a scalar node (`self` is the value). An int-or-string value is `dyn` in CEL;
# both rules cost a constant amount whatever the string's length, so no maxLength is needed.
QUANTITY_NON_NEGATIVE = Rule(
    "must be greater than or equal to 0",
    "type(self) == int ? self >= 0"
    " : !self.startsWith('-') || !quantity(self).isLessThan(quantity('0'))",
)
PORT_NUMBER_OR_NAME = Rule(
    "must be a port number from 1 to 65535 or a name",
    "type(self) == string ? size(self) > 0 : self >= 1 && self <= 65535",
)
METRICS_QUEUE_DEPTH = Rule(
    "metrics.queueDepth is required when metrics is set",
    "has(self.queueDepth) && self.queueDepth != ''",
)
REQUEST_PATH_PRINTABLE = Rule(
    "path must be printable ASCII without spaces",
    "!has(self.path) || self.path.matches('^[!-~]*$')",
    "path",
)
"""For the readiness probe's and the metrics' paths, which the gateway sends as its own requests'
targets: a space or a non-ASCII character would split or corrupt the request line."""


def printable_path(value: str | None) -> str | None:
    """The pydantic side of `REQUEST_PATH_PRINTABLE`, a field validator of either path."""
    REQUEST_PATH_PRINTABLE.check(value is None or all("!" <= char <= "~" for char in value))
    return value


# The serving container's security context, held to the baseline Pod Security level.
_BASELINE = "every backend meets the baseline Pod Security level"
BASELINE_CAPABILITIES = (
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
)
"""The capabilities a container runtime grants by default, the only ones baseline lets a
container add."""
BASELINE_SELINUX_TYPES = ("container_t", "container_init_t", "container_kvm_t")


def _cel_strings(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{value}'" for value in values) + "]"


NOT_PRIVILEGED = Rule(
    f"privileged must not be true: {_BASELINE}",
    "!has(self.privileged) || !self.privileged",
    "privileged",
)
PROC_MOUNT_DEFAULT = Rule(
    f"procMount must be Default: {_BASELINE}",
    "!has(self.procMount) || self.procMount == 'Default'",
    "procMount",
)
CAPABILITIES_ADD_BASELINE = Rule(
    f"add may hold only {', '.join(BASELINE_CAPABILITIES)}: {_BASELINE}",
    f"!has(self.add) || self.add.all(c, c in {_cel_strings(BASELINE_CAPABILITIES)})",
    "add",
)
PROFILE_CONFINED = Rule(
    f"type must be RuntimeDefault or Localhost: {_BASELINE}", "self.type != 'Unconfined'", "type"
)
PROFILE_LOCALHOST = Rule(
    "type Localhost needs a localhostProfile, and no other type takes one",
    "(self.type == 'Localhost') == (has(self.localhostProfile) && self.localhostProfile != '')",
    "type",
)
SELINUX_NO_USER = Rule(
    f"user must be empty: {_BASELINE}", "!has(self.user) || self.user == ''", "user"
)
SELINUX_NO_ROLE = Rule(
    f"role must be empty: {_BASELINE}", "!has(self.role) || self.role == ''", "role"
)
SELINUX_TYPE = Rule(
    f"type must be empty, {', '.join(BASELINE_SELINUX_TYPES[:-1])} or "
    f"{BASELINE_SELINUX_TYPES[-1]}: "
    f"{_BASELINE}",
    f"!has(self.type) || self.type in {_cel_strings(('', *BASELINE_SELINUX_TYPES))}",
    "type",
)
NO_HOST_PROCESS = Rule(
    f"hostProcess must not be true: {_BASELINE}",
    "!has(self.hostProcess) || !self.hostProcess",
    "hostProcess",
)

ALL_RULES = (
    MODEL_SOURCE_EXCLUSIVE,
    URI_WITHOUT_CREDENTIALS,
    SECRET_REF_SOURCES,
    SECRET_REF_NAME,
    RUNTIME_SELECTION_EXCLUSIVE,
    SCALING_MIN_MAX,
    ACTIVATION_TIMEOUT_POSITIVE,
    DRAIN_TIMEOUT_NON_NEGATIVE,
    STABILIZATION_WHOLE_SECONDS,
    KV_CACHE_TARGET_PERCENT,
    SCALER_TLS_COMPLETE,
    HEARTBEAT_POSITIVE,
    SCHEDULER_QUEUE_NEEDS_VOLCANO,
    METRICS_QUEUE_DEPTH,
    REQUEST_PATH_PRINTABLE,
    QUANTITY_NON_NEGATIVE,
    PORT_NUMBER_OR_NAME,
    NOT_PRIVILEGED,
    PROC_MOUNT_DEFAULT,
    CAPABILITIES_ADD_BASELINE,
    PROFILE_CONFINED,
    PROFILE_LOCALHOST,
    SELINUX_NO_USER,
    SELINUX_NO_ROLE,
    SELINUX_TYPE,
    NO_HOST_PROCESS,
)
