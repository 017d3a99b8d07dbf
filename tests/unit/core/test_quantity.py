"""Kubernetes quantities parse like the API server and print in its canonical form."""

import re
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from noctaya.core.values import Quantity
from pydantic import TypeAdapter, ValidationError

BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
DECIMAL = {"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
SUFFIXES = sorted(BINARY) + sorted(DECIMAL)


@st.composite
def quantity_texts(draw: st.DrawFn) -> str:
    sign = draw(st.sampled_from(["", "-", "+"]))
    whole = draw(st.integers(min_value=0, max_value=10**15))
    fraction = draw(st.one_of(st.just(""), st.from_regex(r"\.[0-9]{0,12}", fullmatch=True)))
    suffix = draw(
        st.one_of(
            st.sampled_from(SUFFIXES),
            st.integers(min_value=-30, max_value=30).map(lambda e: f"e{e}"),
        )
    )
    return f"{sign}{whole}{fraction}{suffix}"


@given(quantity_texts())
def test_printed_quantity_parses_back_to_the_same_amount(text: str) -> None:
    quantity = Quantity.parse(text)
    assert Quantity.parse(str(quantity)) == quantity


@given(quantity_texts())
def test_canonical_form_is_a_fixed_point(text: str) -> None:
    printed = str(Quantity.parse(text))
    assert str(Quantity.parse(printed)) == printed


@given(st.integers(min_value=-(2**62), max_value=2**62), st.sampled_from(SUFFIXES))
def test_integer_amounts_keep_their_exact_value(count: int, suffix: str) -> None:
    if suffix in BINARY:  # binary amounts are capped at int64, as Kubernetes does
        expected = Decimal(max(-(2**63 - 1), min(count * BINARY[suffix], 2**63 - 1)))
    else:
        expected = Decimal(count).scaleb(DECIMAL[suffix])
    assert Quantity.parse(f"{count}{suffix}").value == expected


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("500m", "500m"),
        ("32Gi", "32Gi"),
        ("60Gi", "60Gi"),
        ("1.5Gi", "1536Mi"),
        ("0.5", "500m"),
        (".5", "500m"),
        ("1.", "1"),
        ("1000", "1k"),
        ("1500", "1500"),
        ("1e3", "1e3"),
        ("1E3", "1e3"),
        ("1.5e3", "1500"),
        ("12e6", "12e6"),
        ("2048Ki", "2Mi"),
        ("1024", "1024"),
        ("1025Ki", "1025Ki"),
        ("0.5Ki", "512"),
        ("1.0001Ki", "1024102400u"),
        ("1E", "1E"),
        ("1000E", "1000E"),
        ("1e21", "1e21"),
        ("0", "0"),
        ("-0", "0"),
        ("0Gi", "0"),
        ("+1", "1"),
        ("-1.5Gi", "-1536Mi"),
        ("0.1n", "1n"),
        ("-0.1n", "-1n"),
        ("1e-12", "1e-9"),
        ("16Ei", "9223372036854775807"),
        ("-16Ei", "-9223372036854775807"),
    ],
)
def test_prints_like_the_api_server(text: str, canonical: str) -> None:
    assert str(Quantity.parse(text)) == canonical


@pytest.mark.parametrize(
    "text",
    ["", " 1", "1 ", "abc", ".", "+", "-", "1.2.3", "Gi", "1GiB", "--1", "1e", "5i", "1k1", "1Kb"],
)
def test_rejects_malformed_quantities_naming_the_input(text: str) -> None:
    expected = re.escape(f'quantity "{text}" must match the regular expression')
    with pytest.raises(ValueError, match=expected):
        Quantity.parse(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1e1001", 'quantity "1e1001" has an exponent beyond ±1000'),
        ("1e-1001", 'quantity "1e-1001" has an exponent beyond ±1000'),
        ("1" + "0" * 1001, "is too large"),
    ],
)
def test_rejects_absurdly_large_exponents_cheaply(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Quantity.parse(text)


def test_equal_amounts_are_equal_whatever_their_spelling() -> None:
    assert Quantity.parse("1Ki") == Quantity.parse("1024")
    assert hash(Quantity.parse("1Ki")) == hash(Quantity.parse("1024"))
    assert Quantity.parse("1k") != Quantity.parse("1Ki")


def test_pydantic_field_accepts_strings_and_integers_and_writes_canonical_strings() -> None:
    adapter = TypeAdapter(Quantity)
    assert adapter.validate_python("1.5Gi") == Quantity.parse("1536Mi")
    assert adapter.validate_python(8) == Quantity.parse("8")
    assert adapter.dump_python(Quantity.parse("1.5Gi"), mode="json") == "1536Mi"
    with pytest.raises(ValidationError, match='quantity "1GiB"'):
        adapter.validate_python("1GiB")
    with pytest.raises(ValidationError, match="quantities must be strings"):
        adapter.validate_python(1.5)
