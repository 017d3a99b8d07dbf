"""Model source URIs: what a `spec.model` names, where the runtime finds it, how it arrives.

`hf://` and `modelscope://` name hub repositories the engine downloads itself (or a prewarm Job
downloads into the cache); `pvc://` names weights already on a volume; `oci://` names a
digest-pinned artifact that a staging Job pulls and promotes into the cache.

A URI never carries credentials: the part before an `@` would travel in the engine's arguments,
the served-model list and every message that names the source, so such a URI is refused without
repeating it, and a credential a failure line quotes is redacted before it is printed or stored.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from noctaya.core.errors import NoctayaError
from noctaya.core.values.go_text import go_quote

if TYPE_CHECKING:  # the API models take a third of a second to import, and noctaya-fetch needs none
    from noctaya.core.api.llmservice import ModelSpec

REASON = "ModelResolution"
MODEL_STORE_PATH = "/models"
"""Where a `pvc://` claim is mounted read-only in the serving container."""
OCI_CACHE_ROOT = "/cache/oci"
"""Where promoted OCI artifacts live inside the cache volume."""
READY_MARKER = ".noctaya-ready"
HUB_TOKEN_KEY = "token"
"""The key of a hub source's `secretRef` Secret that holds the access token."""
HF_TOKEN = "HF_TOKEN"
MODELSCOPE_TOKEN = "MODELSCOPE_API_TOKEN"
"""The variables the Hugging Face and ModelScope clients read their access token from."""

SECRET_REF_SCHEMES = frozenset({"oci", "hf", "huggingface", "modelscope"})
"""The sources a `secretRef` gives credentials to: a registry's, or a hub's token."""
CREDENTIAL_PATTERNS = (
    r"^[^/]*@",
    r"^[^/]*://[^/]*@[^/]*/",
    r"^[^/]*://[^/@]*:[^/]*@",
    r"^(?i:hf|huggingface|modelscope)://[^@]*@",
)
"""Where an `@` sets off credentials in a model URI: before the first `/`
(`user:password@host`); in the authority, before a host and a path
(`oci://user:password@registry/…`, `hf://token@org/name`) or after a `user:` with none; and
anywhere in a hub reference, whose repository ids hold no `@`. In a URI without `://` nothing
tells userinfo apart, so any `@` counts. An `@` that starts a digest right after the scheme
(`oci://model@sha256:…`, a registry left out) is not taken for one. Python's `re` and the API
server's RE2 read these patterns alike (the CRD's rule is built from them)."""
CREDENTIALS_REFUSED = (
    "must not contain credentials (user:password@ or token@, or any @ in an hf:// or "
    "modelscope:// URI); the Secret that secretRef names holds them"
)
"""Said after the field's name, never with its value."""
REDACTED = "[redacted]"
_URI_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^\s/@'\"<>]*@")
_AUTHORIZATION = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9\-._~+/\\]{8,}=*")
_SECRET_PARAMETER = re.compile(
    r"(?i)([?&;][\w.-]*(?:token|signature|secret|password|credential|key|sig)[\w.-]*=)"
    r"[^&;#\s'\"<>]+"
)
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1123_SUBDOMAIN_MAX = 253
_OCI_REGISTRY = r"[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?(?::[0-9]+)?"
_OCI_REFERENCE = re.compile(
    rf"(?P<registry>{_OCI_REGISTRY})"
    r"/(?P<repository>[a-z0-9]+(?:[._/-][a-z0-9]+)*)"
    r"@sha256:(?P<digest>[a-f0-9]{64})"
)


def holds_credentials(uri: str) -> bool:
    """Whether `uri` has an `@` where credentials could sit (`CREDENTIAL_PATTERNS`)."""
    if "://" not in uri:
        return "@" in uri
    return any(re.search(pattern, uri) for pattern in CREDENTIAL_PATTERNS)


def redact_credentials(text: str, *, lines: bool = False) -> str:
    """`text` fit to print or store though it quotes a client's error: the userinfo of any
    URL, the value of a query parameter named like a credential (a presigned URL's signature,
    a `?token=`) and the credential of an Authorization header replaced; unprintable characters
    escaped first (line breaks too, unless `lines`), so that an escape sequence cannot steer a
    terminal, a line break cannot forge a line, and neither can hide a credential from the
    patterns. A name that merely contains `key` or `sig` loses its value too: better a value
    hidden for nothing than a credential shown."""
    text = "".join(
        char if char.isprintable() or (lines and char == "\n") else go_quote(char)[1:-1]
        for char in text
    )
    text = _URI_USERINFO.sub(rf"\1{REDACTED}@", text)
    text = _SECRET_PARAMETER.sub(rf"\1{REDACTED}", text)
    return _AUTHORIZATION.sub(rf"\1 {REDACTED}", text)


def is_oci_registry(text: str) -> bool:
    """`host[:port]` as the registry of an `oci://` URI is spelled."""
    return re.fullmatch(_OCI_REGISTRY, text) is not None


class SourceKind(StrEnum):
    HF = "hf"
    MODELSCOPE = "modelscope"
    PVC = "pvc"
    OCI = "oci"


class Delivery(StrEnum):
    """How the weights reach the serving container."""

    DOWNLOAD = "download"
    """The engine (or an optional prewarm Job) downloads from a hub into the cache."""
    STAGING = "staging"
    """A staging Job must pull and promote the artifact before any backend can start."""
    MOUNT = "mount"
    """Weights already sit on a volume; it is mounted read-only and nothing is fetched."""


@dataclass(frozen=True, slots=True)
class LiteralEnv:
    """An environment variable with a literal value, added by the core (model or cache env)."""

    name: str
    value: str


@dataclass(frozen=True, slots=True)
class SecretEnv:
    """An environment variable read from a Secret's key (`secretKeyRef`): its value never
    appears in a spec, an argument, a log or a status."""

    name: str
    secret_name: str
    key: str


@dataclass(frozen=True, slots=True)
class ResolvedModel:
    """A parsed `spec.model`: the runtime's view (`path`, `env`) and what delivery needs."""

    kind: SourceKind
    path: str
    """`.Model.Path` in templates: a hub repo id, `/models[/<subpath>]`, or the OCI cache dir."""
    env: tuple[LiteralEnv, ...] = ()
    pvc_claim: str | None = None
    pvc_subpath: str | None = None
    oci_reference: str | None = None
    """`<registry>/<repository>@sha256:<digest>`, without the scheme."""
    oci_secret_name: str | None = None
    token_env: SecretEnv | None = None
    """A hub source's access token, from its `secretRef`, for the prewarm Job and the engine."""
    ready_path: str | None = None
    """The marker file whose presence means the promoted OCI artifact is complete."""

    @property
    def oci_registry(self) -> str | None:
        """The OCI reference's registry, `host[:port]`."""
        return self.oci_reference.partition("/")[0] if self.oci_reference else None

    @property
    def delivery(self) -> Delivery:
        if self.kind is SourceKind.PVC:
            return Delivery.MOUNT
        if self.kind is SourceKind.OCI:
            return Delivery.STAGING
        return Delivery.DOWNLOAD


def resolve_model(
    uri: str | None, *, secret_ref_name: str | None = None, catalog_ref: str | None = None
) -> ResolvedModel:
    """Parse `spec.model`; raise `NoctayaError("ModelResolution", …)` on any bad input.

    `secret_ref_name` is None when `source.secretRef` is absent and `""` when it is present with
    an empty name, so "not supported for this source" and "name is required" can be told apart.
    For `oci://` it names a dockerconfigjson Secret; for `hf://` and `modelscope://`, a Secret
    whose key `token` holds the hub token.
    """
    if not uri:
        if catalog_ref:
            raise _error("model.catalogRef resolution is not implemented yet; set model.source.uri")
        raise _error("model.source.uri is required")
    if holds_credentials(uri):
        raise _error(f"model.source.uri {CREDENTIALS_REFUSED}")
    scheme, separator, reference = uri.partition("://")
    if not separator or not reference:
        raise _error(f"invalid model uri {go_quote(uri)}: expected scheme://reference")
    scheme = scheme.lower()
    if secret_ref_name is not None and scheme not in SECRET_REF_SCHEMES:
        raise _error(
            "model.source.secretRef is supported only for oci://, hf:// and modelscope:// sources"
        )
    if scheme in ("hf", "huggingface"):
        token = _hub_token(HF_TOKEN, secret_ref_name)
        return ResolvedModel(kind=SourceKind.HF, path=reference, token_env=token)
    if scheme == "modelscope":
        env = (LiteralEnv("VLLM_USE_MODELSCOPE", "true"),)
        token = _hub_token(MODELSCOPE_TOKEN, secret_ref_name)
        return ResolvedModel(kind=SourceKind.MODELSCOPE, path=reference, env=env, token_env=token)
    if scheme == "pvc":
        return _resolve_pvc(uri, reference)
    if scheme == "oci":
        return _resolve_oci(uri, reference, secret_ref_name)
    raise _error(
        f"model uri scheme {go_quote(scheme)} is not supported yet "
        "(use hf://, modelscope://, oci://, or pvc://)"
    )


def resolve_model_spec(spec: ModelSpec) -> ResolvedModel:
    """`resolve_model` over an LLMService's `spec.model`, as the operator and local mode read it."""
    source = spec.source
    return resolve_model(
        source.uri if source else None,
        secret_ref_name=source.secret_ref.name if source and source.secret_ref else None,
        catalog_ref=spec.catalog_ref,
    )


def _hub_token(variable: str, secret_ref_name: str | None) -> SecretEnv | None:
    if secret_ref_name is None:
        return None
    if not secret_ref_name:
        raise _error("model.source.secretRef.name is required")
    return SecretEnv(variable, secret_ref_name, HUB_TOKEN_KEY)


def _resolve_pvc(uri: str, reference: str) -> ResolvedModel:
    claim, _, subpath = reference.partition("/")
    if len(claim) > _DNS1123_SUBDOMAIN_MAX or not _DNS1123_SUBDOMAIN.fullmatch(claim):
        raise _error(f"invalid pvc uri {go_quote(uri)}: expected pvc://<claim>[/<subpath>]")
    if subpath and not _stays_within_volume(subpath):
        raise _error(f"invalid pvc uri {go_quote(uri)}: subpath must stay within the model volume")
    path = MODEL_STORE_PATH if subpath in ("", ".") else f"{MODEL_STORE_PATH}/{subpath}"
    return ResolvedModel(kind=SourceKind.PVC, path=path, pvc_claim=claim, pvc_subpath=subpath)


def _stays_within_volume(subpath: str) -> bool:
    """Relative, already in clean form (normalising would not change it: no `//`, `.` or
    `name/..`, no trailing `/`), and not climbing out."""
    return (
        not subpath.startswith("/")
        and posixpath.normpath(subpath) == subpath
        and subpath != ".."
        and not subpath.startswith("../")
    )


def _resolve_oci(uri: str, reference: str, secret_ref_name: str | None) -> ResolvedModel:
    match = _OCI_REFERENCE.fullmatch(reference)
    if match is None:
        raise _error(
            f"invalid oci uri {go_quote(uri)}: expected "
            "oci://<registry>/<repository>@sha256:<64 lowercase hex characters>"
        )
    if secret_ref_name == "":
        raise _error("model.source.secretRef.name is required")
    path = f"{OCI_CACHE_ROOT}/sha256-{match.group('digest')}"
    return ResolvedModel(
        kind=SourceKind.OCI,
        path=path,
        oci_reference=reference,
        oci_secret_name=secret_ref_name,
        ready_path=f"{path}/{READY_MARKER}",
    )


def _error(message: str) -> NoctayaError:
    return NoctayaError(REASON, message)
