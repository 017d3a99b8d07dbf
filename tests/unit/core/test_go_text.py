"""Values in messages are spelled as Go's %q and %v would spell them."""

import ast

import pytest
from hypothesis import given
from hypothesis import strategies as st
from noctaya.core.values.go_text import go_list, go_positive_int, go_quote


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("nvidia", '"nvidia"'),
        ("", '""'),
        ('say "hi"', r'"say \"hi\""'),
        ("a\\b", r'"a\\b"'),
        ("line\nnext\ttab", r'"line\nnext\ttab"'),
        ("\x01\x7f", r'"\x01\x7f"'),
        ("café µs", '"café µs"'),
        ("\u2028", r'"\u2028"'),
        ("\U000e0001", r'"\U000e0001"'),
    ],
)
def test_quotes_like_go_strconv_quote(text: str, quoted: str) -> None:
    assert go_quote(text) == quoted


@given(st.text())
def test_quoted_text_is_a_python_literal_of_the_same_string(text: str) -> None:
    assert ast.literal_eval(go_quote(text)) == text


def test_lists_like_go_slices() -> None:
    assert go_list(["nvidia", "ascend"]) == "[nvidia ascend]"
    assert go_list([]) == "[]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", 1),
        ("+42", 42),
        ("007", 7),
        ("0", None),
        ("-3", None),
        ("", None),
        (" 5", None),
        ("1_000", None),
        ("1e3", None),
        ("٣", None),
    ],
)
def test_positive_int_reads_go_atoi_syntax_above_zero(text: str, expected: int | None) -> None:
    assert go_positive_int(text) == expected
