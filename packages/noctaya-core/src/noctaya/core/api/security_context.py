"""The serving container's security context: a Kubernetes core/v1 SecurityContext, field for
field, held to what the baseline Pod Security level allows.

A runtime's context is copied to the serving container (and to the `wait-for-prewarm` init
container, which runs the same image), and the pod-level fields the restricted level asks for
are derived from it. Whatever would make a backend privileged (a privileged container, added
capabilities beyond the default set, an unmasked /proc, an unconfined seccomp or AppArmor
profile, a custom SELinux user, role or type, a Windows host process) is refused by the CRD's
rules at admission and by the controller, with the same words.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from noctaya.core.api import rules
from noctaya.core.api.base import ApiModel, LinuxId, StrictBool
from pydantic import ConfigDict, Field, ValidationInfo, field_validator

CapabilityName = Annotated[str, Field(min_length=1, max_length=64)]


class Capabilities(ApiModel):
    """Linux capabilities to add to or drop from the runtime's default set."""

    model_config = ConfigDict(json_schema_extra=rules.validations(rules.CAPABILITIES_ADD_BASELINE))

    add: list[CapabilityName] | None = Field(default=None, max_length=64)
    """Only the container runtime's default capabilities (AUDIT_WRITE, CHOWN, DAC_OVERRIDE,
    FOWNER, FSETID, KILL, MKNOD, NET_BIND_SERVICE, SETFCAP, SETGID, SETPCAP, SETUID,
    SYS_CHROOT); restricted allows NET_BIND_SERVICE alone."""
    drop: list[CapabilityName] | None = Field(default=None, max_length=64)
    """Restricted needs ALL."""

    @field_validator("add")
    @classmethod
    def _baseline_capabilities(cls, value: list[str] | None) -> list[str] | None:
        rules.CAPABILITIES_ADD_BASELINE.check(
            all(name in rules.BASELINE_CAPABILITIES for name in value or ())
        )
        return value


class ProfileType(StrEnum):
    """Kind of a seccomp or AppArmor profile."""

    RUNTIME_DEFAULT = "RuntimeDefault"
    LOCALHOST = "Localhost"
    UNCONFINED = "Unconfined"


class ConfinementProfile(ApiModel):
    """A seccomp or AppArmor profile: the runtime's default, or one loaded on the node."""

    model_config = ConfigDict(
        json_schema_extra=rules.validations(rules.PROFILE_CONFINED, rules.PROFILE_LOCALHOST)
    )

    localhost_profile: str | None = Field(default=None, max_length=4095)
    """The node's profile; with type Localhost only."""
    type: ProfileType
    """RuntimeDefault or Localhost."""

    @field_validator("type")
    @classmethod
    def _confined(cls, value: ProfileType, info: ValidationInfo) -> ProfileType:
        rules.PROFILE_CONFINED.check(value is not ProfileType.UNCONFINED)
        localhost = value is ProfileType.LOCALHOST
        rules.PROFILE_LOCALHOST.check(localhost == bool(info.data.get("localhost_profile")))
        return value


class SeccompProfile(ConfinementProfile):
    """The container's system calls: restricted needs RuntimeDefault or Localhost set."""


class AppArmorProfile(ConfinementProfile):
    """The container's AppArmor confinement."""


class SELinuxOptions(ApiModel):
    """The SELinux context of the container; only its level and a container type are free."""

    model_config = ConfigDict(
        json_schema_extra=rules.validations(
            rules.SELINUX_NO_USER, rules.SELINUX_NO_ROLE, rules.SELINUX_TYPE
        )
    )

    user: str | None = Field(default=None, max_length=256)
    """SELinux user; must be empty: a custom user breaks baseline."""
    role: str | None = Field(default=None, max_length=256)
    """SELinux role; must be empty: a custom role breaks baseline."""
    type: str | None = Field(default=None, max_length=256)
    """SELinux type: empty, container_t, container_init_t or container_kvm_t."""
    level: str | None = Field(default=None, max_length=256)
    """SELinux level (MLS/MCS label) of the container."""

    @field_validator("user")
    @classmethod
    def _no_user(cls, value: str | None) -> str | None:
        rules.SELINUX_NO_USER.check(not value)
        return value

    @field_validator("role")
    @classmethod
    def _no_role(cls, value: str | None) -> str | None:
        rules.SELINUX_NO_ROLE.check(not value)
        return value

    @field_validator("type")
    @classmethod
    def _container_type(cls, value: str | None) -> str | None:
        rules.SELINUX_TYPE.check(not value or value in rules.BASELINE_SELINUX_TYPES)
        return value


class WindowsOptions(ApiModel):
    """Windows settings, kept for a faithful copy; a Linux node ignores them."""

    model_config = ConfigDict(json_schema_extra=rules.validations(rules.NO_HOST_PROCESS))

    gmsa_credential_spec_name: str | None = None
    """Name of the GMSA credential spec to use."""
    gmsa_credential_spec: str | None = None
    """The GMSA credential spec itself, inlined."""
    run_as_user_name: str | None = None
    """Windows user name of the container's process."""
    host_process: StrictBool | None = None
    """Must not be true: a host process breaks baseline."""

    @field_validator("host_process")
    @classmethod
    def _no_host_process(cls, value: bool | None) -> bool | None:
        rules.NO_HOST_PROCESS.check(value is not True)
        return value


class ProcMountType(StrEnum):
    """How /proc is mounted in the container."""

    DEFAULT = "Default"
    UNMASKED = "Unmasked"


class SecurityContext(ApiModel):
    """A core/v1 SecurityContext for the serving container. The backend meets restricted when
    it sets allowPrivilegeEscalation false, drops ALL capabilities, runs as non-root
    (runAsNonRoot true, or a runAsUser other than 0) and sets a seccompProfile; the pod's
    runAsNonRoot, seccompProfile and (from runAsGroup) fsGroup are derived from it."""

    model_config = ConfigDict(
        json_schema_extra=rules.validations(rules.NOT_PRIVILEGED, rules.PROC_MOUNT_DEFAULT)
    )

    allow_privilege_escalation: StrictBool | None = None
    """Whether a process may gain more privileges than its parent; restricted needs false."""
    app_armor_profile: AppArmorProfile | None = None
    """AppArmor confinement of the container."""
    capabilities: Capabilities | None = None
    """Capabilities added to or dropped from the runtime's default set."""
    privileged: StrictBool | None = None
    """Must not be true: a privileged container breaks baseline."""
    proc_mount: ProcMountType | None = None
    """Default only: an unmasked /proc breaks baseline."""
    read_only_root_filesystem: StrictBool | None = None
    """Mount the image's root filesystem read-only; the engine must then write only to its
    volumes (the cache, /dev/shm)."""
    run_as_group: LinuxId | None = None
    """Primary group of the container's process; also the pod's fsGroup when the container
    runs as non-root, so it can write a fresh cache claim."""
    run_as_non_root: StrictBool | None = None
    """Refuse to start a process that would run as root; the pod takes it over."""
    run_as_user: LinuxId | None = None
    """User of the container's process, instead of the image's; anything but 0 also stands
    for runAsNonRoot in the pod."""
    se_linux_options: SELinuxOptions | None = None
    """SELinux context of the container."""
    seccomp_profile: SeccompProfile | None = None
    """System call filter of the container; the pod takes it over."""
    windows_options: WindowsOptions | None = None
    """Windows settings, copied as they are."""

    @field_validator("privileged")
    @classmethod
    def _not_privileged(cls, value: bool | None) -> bool | None:
        rules.NOT_PRIVILEGED.check(value is not True)
        return value

    @field_validator("proc_mount")
    @classmethod
    def _default_proc_mount(cls, value: ProcMountType | None) -> ProcMountType | None:
        rules.PROC_MOUNT_DEFAULT.check(value in (None, ProcMountType.DEFAULT))
        return value
