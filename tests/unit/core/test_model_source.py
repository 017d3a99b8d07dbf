"""Model sources: every URI form, the path the runtime sees, how the weights arrive, every error."""

import pytest
from noctaya.core.api.llmservice import ModelSpec
from noctaya.core.errors import NoctayaError
from noctaya.core.model_source import (
    Delivery,
    LiteralEnv,
    ResolvedModel,
    SecretEnv,
    SourceKind,
    resolve_model,
    resolve_model_spec,
)

DIGEST = "a" * 64
OCI_REF = f"registry.example.com:5000/models/qwen3-8b@sha256:{DIGEST}"


def model_error(uri: str | None, **kwargs: str | None) -> NoctayaError:
    with pytest.raises(NoctayaError) as caught:
        resolve_model(uri, **kwargs)
    assert caught.value.reason == "ModelResolution"
    return caught.value


def test_hugging_face_source_is_the_repo_id_downloaded_by_the_engine() -> None:
    model = resolve_model("hf://Qwen/Qwen3-8B-Instruct")
    assert model == ResolvedModel(kind=SourceKind.HF, path="Qwen/Qwen3-8B-Instruct")
    assert model.env == ()
    assert model.delivery is Delivery.DOWNLOAD


@pytest.mark.parametrize("scheme", ["huggingface", "HF", "HuggingFace"])
def test_hugging_face_alias_and_scheme_case_are_accepted(scheme: str) -> None:
    model = resolve_model(f"{scheme}://Org/Model")
    assert model.kind is SourceKind.HF
    assert model.path == "Org/Model"


def test_reference_is_kept_verbatim_including_case() -> None:
    assert resolve_model("hf://Org/Model-V2").path == "Org/Model-V2"


def test_modelscope_source_tells_vllm_to_use_modelscope() -> None:
    model = resolve_model("modelscope://Qwen/Qwen3-8B-Instruct")
    assert model.kind is SourceKind.MODELSCOPE
    assert model.path == "Qwen/Qwen3-8B-Instruct"
    assert model.env == (LiteralEnv("VLLM_USE_MODELSCOPE", "true"),)
    assert model.delivery is Delivery.DOWNLOAD


def test_pvc_source_with_subpath_is_mounted_under_models() -> None:
    model = resolve_model("pvc://model-store/qwen3/8b")
    assert model.kind is SourceKind.PVC
    assert model.pvc_claim == "model-store"
    assert model.pvc_subpath == "qwen3/8b"
    assert model.path == "/models/qwen3/8b"
    assert model.delivery is Delivery.MOUNT
    assert model.ready_path is None


@pytest.mark.parametrize("uri", ["pvc://model-store", "pvc://model-store/", "pvc://model-store/."])
def test_pvc_source_without_subpath_is_the_whole_volume(uri: str) -> None:
    model = resolve_model(uri)
    assert model.pvc_claim == "model-store"
    assert model.path == "/models"


def test_pvc_claim_may_be_a_dotted_subdomain_of_253_characters() -> None:
    claim = ".".join(["a" * 63] * 4)[:253]
    assert resolve_model(f"pvc://{claim}/m").pvc_claim == claim


@pytest.mark.parametrize(
    "uri",
    [
        "pvc:///model",
        "pvc://Invalid_Claim/model",
        "pvc://-claim/model",
        "pvc://claim-/model",
        "pvc://a..b/model",
        "pvc://" + "a" * 254,
    ],
)
def test_pvc_claim_must_be_a_dns_subdomain(uri: str) -> None:
    error = model_error(uri)
    assert error.message == f'invalid pvc uri "{uri}": expected pvc://<claim>[/<subpath>]'


@pytest.mark.parametrize(
    "subpath", ["/abs", "a//b", "./a", "a/", "x/../y", "..", "../a", "a/.", "../../etc"]
)
def test_pvc_subpath_must_stay_within_the_model_volume(subpath: str) -> None:
    uri = f"pvc://claim/{subpath}"
    error = model_error(uri)
    assert error.message == f'invalid pvc uri "{uri}": subpath must stay within the model volume'


def test_pvc_subpath_may_contain_dots_that_do_not_climb() -> None:
    assert resolve_model("pvc://claim/..hidden/a..b").path == "/models/..hidden/a..b"


def test_oci_source_is_staged_into_the_digest_cache_directory() -> None:
    model = resolve_model(f"oci://{OCI_REF}")
    assert model.kind is SourceKind.OCI
    assert model.oci_reference == OCI_REF
    assert model.path == f"/cache/oci/sha256-{DIGEST}"
    assert model.ready_path == f"/cache/oci/sha256-{DIGEST}/.noctaya-ready"
    assert model.oci_secret_name is None
    assert model.delivery is Delivery.STAGING


def test_oci_source_carries_its_registry_secret() -> None:
    model = resolve_model(f"oci://{OCI_REF}", secret_ref_name="registry-creds")
    assert model.oci_secret_name == "registry-creds"


@pytest.mark.parametrize(
    "reference",
    [
        "r/m@sha256:" + DIGEST,
        "localhost/m@sha256:" + DIGEST,
        "ghcr.io/org/team/model_v1.2-x@sha256:" + DIGEST,
    ],
)
def test_oci_reference_forms_that_are_accepted(reference: str) -> None:
    assert resolve_model(f"oci://{reference}").oci_reference == reference


@pytest.mark.parametrize(
    "reference",
    [
        "ghcr.io/org/model:latest",
        "ghcr.io/org/model@sha256:" + "a" * 63,
        "ghcr.io/org/model@sha256:" + "A" * 64,
        "ghcr.io/Org/model@sha256:" + DIGEST,
        "ghcr.io/org/../model@sha256:" + DIGEST,
        "ghcr.io/org//model@sha256:" + DIGEST,
        "ghcr.io/org/model@sha512:" + DIGEST,
        "ghcr.io/org/model@sha256:" + DIGEST + "\n",
        "model@sha256:" + DIGEST,
        "-ghcr.io/org/model@sha256:" + DIGEST,
        "ghcr.io:port/org/model@sha256:" + DIGEST,
    ],
)
def test_oci_reference_must_be_digest_pinned_and_lowercase(reference: str) -> None:
    uri = f"oci://{reference}"
    error = model_error(uri)
    quoted = '"' + uri.replace("\n", "\\n") + '"'
    assert error.message == (
        f"invalid oci uri {quoted}: expected "
        "oci://<registry>/<repository>@sha256:<64 lowercase hex characters>"
    )


def test_oci_secret_ref_without_a_name_is_rejected() -> None:
    error = model_error(f"oci://{OCI_REF}", secret_ref_name="")
    assert error.message == "model.source.secretRef.name is required"


def test_bad_oci_reference_is_reported_before_an_empty_secret_name() -> None:
    error = model_error("oci://ghcr.io/org/model:latest", secret_ref_name="")
    assert error.message.startswith("invalid oci uri")


@pytest.mark.parametrize("uri", ["pvc://claim", "s3://bucket/model"])
def test_secret_ref_is_only_for_credentialed_sources_and_checked_before_the_scheme(
    uri: str,
) -> None:
    error = model_error(uri, secret_ref_name="creds")
    assert error.message == (
        "model.source.secretRef is supported only for oci://, hf:// and modelscope:// sources"
    )


@pytest.mark.parametrize(
    ("uri", "variable"),
    [
        ("hf://Org/Gated", "HF_TOKEN"),
        ("HuggingFace://Org/Gated", "HF_TOKEN"),
        ("modelscope://Org/Gated", "MODELSCOPE_API_TOKEN"),
    ],
)
def test_a_hub_secret_ref_is_the_token_variable_read_from_its_token_key(
    uri: str, variable: str
) -> None:
    model = resolve_model(uri, secret_ref_name="hub-token")
    assert model.token_env == SecretEnv(variable, "hub-token", "token")
    assert model.oci_secret_name is None
    assert resolve_model(uri).token_env is None


def test_a_hub_secret_ref_without_a_name_is_rejected() -> None:
    error = model_error("hf://Org/Gated", secret_ref_name="")
    assert error.message == "model.source.secretRef.name is required"


@pytest.mark.parametrize("uri", [None, ""])
def test_missing_uri_is_required(uri: str | None) -> None:
    assert model_error(uri).message == "model.source.uri is required"


def test_catalog_ref_is_reserved() -> None:
    error = model_error(None, catalog_ref="qwen3-8b")
    assert error.message == (
        "model.catalogRef resolution is not implemented yet; set model.source.uri"
    )


def test_empty_catalog_ref_counts_as_unset() -> None:
    assert model_error("", catalog_ref="").message == "model.source.uri is required"


def test_a_service_model_spec_passes_its_uri_and_registry_secret() -> None:
    spec = ModelSpec.model_validate(
        {"source": {"uri": f"oci://{OCI_REF}", "secretRef": {"name": "registry-creds"}}}
    )
    assert resolve_model_spec(spec) == resolve_model(
        f"oci://{OCI_REF}", secret_ref_name="registry-creds"
    )


def test_a_service_model_spec_with_only_a_catalog_ref_is_reserved() -> None:
    with pytest.raises(NoctayaError) as caught:
        resolve_model_spec(ModelSpec.model_validate({"catalogRef": "qwen3-8b"}))
    assert caught.value.message.startswith("model.catalogRef resolution is not implemented yet")


@pytest.mark.parametrize("uri", ["Qwen/Qwen3-8B", "hf://", "hf:/Org/Model"])
def test_uri_needs_a_scheme_and_a_reference(uri: str) -> None:
    error = model_error(uri)
    assert error.message == f'invalid model uri "{uri}": expected scheme://reference'


@pytest.mark.parametrize(("uri", "scheme"), [("s3://bucket/model", "s3"), ("HTTPS://x/y", "https")])
def test_unknown_scheme_is_named_lower_cased(uri: str, scheme: str) -> None:
    error = model_error(uri)
    assert error.message == (
        f'model uri scheme "{scheme}" is not supported yet '
        "(use hf://, modelscope://, oci://, or pvc://)"
    )


def test_messages_quote_uris_like_go() -> None:
    error = model_error('bad "uri"')
    assert error.message == 'invalid model uri "bad \\"uri\\"": expected scheme://reference'
