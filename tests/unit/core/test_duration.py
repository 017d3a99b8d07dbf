"""Go durations parse and print exactly like Go's `time` package, for every int64 value."""

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from noctaya.core.values import Duration
from pydantic import TypeAdapter, ValidationError

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
SECOND = 10**9
UNITS = {"ns": 1, "us": 10**3, "µs": 10**3, "ms": 10**6, "s": SECOND, "m": 60 * SECOND}
UNITS["h"] = 3600 * SECOND


@given(INT64)
def test_printed_duration_parses_back_to_the_same_value(nanoseconds: int) -> None:
    duration = Duration(nanoseconds)
    assert Duration.parse(str(duration)) == duration


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(sorted(UNITS)))
def test_whole_number_with_unit_is_that_many_units(count: int, unit: str) -> None:
    assert Duration.parse(f"{count}{unit}").nanoseconds == count * UNITS[unit]


@given(st.lists(st.tuples(st.integers(0, 999), st.sampled_from(sorted(UNITS))), min_size=1))
def test_components_add_up(components: list[tuple[int, str]]) -> None:
    text = "".join(f"{count}{unit}" for count, unit in components)
    expected = sum(count * UNITS[unit] for count, unit in components)
    assert Duration.parse(text).nanoseconds == expected
    assert Duration.parse("-" + text).nanoseconds == -expected


@pytest.mark.parametrize(
    ("text", "printed"),
    [
        ("5m", "5m0s"),
        ("1.5s", "1.5s"),
        ("2m", "2m0s"),
        ("1h30m", "1h30m0s"),
        ("90s", "1m30s"),
        ("10s", "10s"),
        ("300ms", "300ms"),
        ("1.5ms", "1.5ms"),
        ("1500us", "1.5ms"),
        ("1μs", "1µs"),
        ("999ns", "999ns"),
        ("-1s", "-1s"),
        ("+5s", "5s"),
        ("0", "0s"),
        ("-0", "0s"),
        ("0s", "0s"),
        ("1.000000001s", "1.000000001s"),
        (".5h", "30m0s"),
        ("1.h", "1h0m0s"),
        ("-9223372036854775808ns", "-2562047h47m16.854775808s"),
        ("9223372036854775807ns", "2562047h47m16.854775807s"),
    ],
)
def test_prints_like_go(text: str, printed: str) -> None:
    assert str(Duration.parse(text)) == printed


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", 'time: invalid duration ""'),
        ("-", 'time: invalid duration "-"'),
        ("s", 'time: invalid duration "s"'),
        (".s", 'time: invalid duration ".s"'),
        ("5", 'time: missing unit in duration "5"'),
        ("1.5.s", 'time: missing unit in duration "1.5.s"'),
        ("1x", 'time: unknown unit "x" in duration "1x"'),
        ("1s-1s", 'time: unknown unit "s-" in duration "1s-1s"'),
        ("5 m", 'time: unknown unit " m" in duration "5 m"'),
        ("9223372036854775808ns", 'time: invalid duration "9223372036854775808ns"'),
        ("2562048h", 'time: invalid duration "2562048h"'),
        ("2562047h47m16.854775808s", 'time: invalid duration "2562047h47m16.854775808s"'),
    ],
)
def test_rejects_what_go_rejects_with_gos_message(text: str, message: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        Duration.parse(text)


def test_most_negative_duration_is_accepted_but_not_one_less() -> None:
    assert Duration.parse("-2562047h47m16.854775808s").nanoseconds == -(2**63)
    with pytest.raises(ValueError, match="invalid duration"):
        Duration.parse("-2562047h47m16.854775809s")


def test_drain_budget_rounds_up_to_whole_seconds() -> None:
    assert Duration.parse("1.5s").ceil_seconds() == 2
    assert Duration.parse("90s").ceil_seconds() == 90
    assert Duration.parse("0s").ceil_seconds() == 0


def test_whole_seconds_check_for_stabilization_windows() -> None:
    assert Duration.parse("5m").is_whole_seconds()
    assert not Duration.parse("1.5s").is_whole_seconds()


def test_seconds_conversions_round_trip() -> None:
    assert Duration.of_seconds(2.5) == Duration.parse("2.5s")
    assert Duration.parse("2.5s").seconds == 2.5


def test_durations_order_by_length() -> None:
    assert Duration.parse("59s") < Duration.parse("1m") < Duration.parse("1h")


def test_pydantic_field_reads_go_syntax_and_writes_go_string() -> None:
    adapter = TypeAdapter(Duration)
    assert adapter.validate_python("5m") == Duration.parse("300s")
    assert adapter.dump_python(Duration.parse("5m"), mode="json") == "5m0s"
    with pytest.raises(ValidationError, match='unknown unit "x"'):
        adapter.validate_python("1x")
    with pytest.raises(ValidationError, match="not a string"):
        adapter.validate_python(5)
