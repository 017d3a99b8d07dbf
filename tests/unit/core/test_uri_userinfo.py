"""A model URI never carries credentials: `hf://TOKEN@org/name` put the token into the engine's
arguments and the served-model list. The core refuses such a URI wherever a spec is read (the
API models that `noctaya validate`, local mode and the controller decode with, and
`resolve_model` that every planner and the fetcher call), naming the field, never the value;
and a credential a failure line quotes is redacted before it is printed or stored."""

from __future__ import annotations

import pytest
from noctaya.core.api.validation import InvalidResource, parse_llmservice
from noctaya.core.errors import NoctayaError
from noctaya.core.model_source import holds_credentials, redact_credentials, resolve_model
from support.manifests import llmservice

SECRET = "hf_do_not_repeat_me"
DIGEST = "sha256:" + "a" * 64
CREDENTIALED = [
    f"hf://{SECRET}@acme/tiny",
    f"HF://{SECRET}@acme/tiny",
    f"huggingface://user:{SECRET}@acme/tiny",
    f"modelscope://{SECRET}@acme/tiny",
    f"hf://acme/tiny@{SECRET}",
    f"hf://acme@{SECRET}/tiny",
    f"oci://user:{SECRET}@registry.example/models/tiny@{DIGEST}",
    f"oci://{SECRET}@registry.example/models/tiny@{DIGEST}",
    f"oci://user:{SECRET}@registry.example",
    f"pvc://{SECRET}@claim/weights",
    f"s3://user:{SECRET}@bucket/model",
    f"user:{SECRET}@registry.example/models/tiny",
    f"hf:/{SECRET}@acme/tiny",
    f"{SECRET}@hf://acme/tiny",
    f"hf://a%40b:{SECRET}@acme/tiny",
]
REFUSAL = (
    "must not contain credentials (user:password@ or token@, or any @ in an hf:// or "
    "modelscope:// URI); the Secret that secretRef names holds them"
)


@pytest.mark.parametrize("uri", CREDENTIALED)
def test_resolution_refuses_credentials_without_repeating_them(uri: str) -> None:
    with pytest.raises(NoctayaError) as caught:
        resolve_model(uri, secret_ref_name="hub-token")

    assert (caught.value.reason, caught.value.message) == (
        "ModelResolution",
        f"model.source.uri {REFUSAL}",
    )


@pytest.mark.parametrize("uri", CREDENTIALED)
def test_the_api_models_refuse_credentials_at_the_field_without_the_value(uri: str) -> None:
    """One error, at the uri: the secretRef beside it is for a scheme that takes one."""
    manifest = llmservice("svc", {"model": {"source": {"uri": uri, "secretRef": {"name": "s"}}}})

    with pytest.raises(InvalidResource) as caught:
        parse_llmservice(manifest)

    assert caught.value.problems == [f"spec.model.source.uri: uri {REFUSAL}"]
    assert SECRET not in caught.value.message


@pytest.mark.parametrize(
    "uri",
    [
        "hf://acme/tiny",
        f"oci://registry.example:5000/models/tiny@{DIGEST}",
        "pvc://claim/weights@2024",
        "hf://a%40b/tiny",
        "s3://bucket/model@v1",
    ],
)
def test_an_at_sign_where_no_credentials_go_is_not_taken_for_them(uri: str) -> None:
    """A digest, a file name in a claim, an escaped `%40`: none sets off userinfo."""
    assert not holds_credentials(uri)


def test_a_digest_right_after_the_scheme_is_reported_as_the_bad_reference_it_is() -> None:
    with pytest.raises(NoctayaError) as caught:
        resolve_model(f"oci://model@{DIGEST}")

    assert caught.value.message.startswith('invalid oci uri "oci://model@sha256:')


@pytest.mark.parametrize(
    ("said", "shown"),
    [
        (
            f"GET http://mirror:{SECRET}@hub.example/api failed",
            "GET http://[redacted]@hub.example/api failed",
        ),
        (
            f"Illegal header value b'Bearer {SECRET}\\nhf_next'",
            "Illegal header value b'Bearer [redacted]'",
        ),
        (f"Authorization: Basic {SECRET}==", "Authorization: Basic [redacted]"),
        (
            f"GET https://cdn.example/b?X-Amz-Signature={SECRET}&x=1&access_token={SECRET}#f",
            "GET https://cdn.example/b?X-Amz-Signature=[redacted]&x=1&access_token=[redacted]#f",
        ),
        (f"two\nlines\u2028and\x1b[2J{SECRET[:3]}", "two\\nlines\\u2028and\\x1b[2Jhf_"),
        (
            f"oci://registry.example/models/tiny@{DIGEST}",
            f"oci://registry.example/models/tiny@{DIGEST}",
        ),
    ],
)
def test_a_quoted_credential_is_redacted_and_the_line_stays_one(said: str, shown: str) -> None:
    assert redact_credentials(said) == shown
