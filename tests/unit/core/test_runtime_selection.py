"""Runtime selection: pin by name, or the first vendor with a runtime, then top priority."""

import pytest
from noctaya.core.errors import NoctayaError
from noctaya.core.runtime_selection import (
    RuntimeCandidate,
    pinned_runtime_name,
    runtime_lookup_error,
    select_runtime,
)

A10 = RuntimeCandidate("nvidia-a10", "nvidia", 100)
A100 = RuntimeCandidate("nvidia-a100", "nvidia", 200)
ASCEND = RuntimeCandidate("ascend-910b3", "ascend", 500)


def selection_error(candidates: list[RuntimeCandidate], vendors: list[str]) -> str:
    with pytest.raises(NoctayaError) as caught:
        select_runtime(candidates, vendors)
    assert caught.value.reason == "RuntimeResolution"
    return caught.value.message


def test_pinned_name_is_fetched_directly() -> None:
    assert pinned_runtime_name("nvidia-a10", None) == "nvidia-a10"


def test_pinned_name_wins_over_a_vendor_selector() -> None:
    assert pinned_runtime_name("nvidia-a10", ["ascend"]) == "nvidia-a10"


def test_vendor_selector_means_no_pinned_name() -> None:
    assert pinned_runtime_name(None, ["nvidia"]) is None
    assert pinned_runtime_name("", ["nvidia"]) is None


@pytest.mark.parametrize(("name", "vendors"), [(None, None), ("", []), (None, [])])
def test_neither_name_nor_vendor_is_an_error(name: str | None, vendors: list[str] | None) -> None:
    with pytest.raises(NoctayaError) as caught:
        pinned_runtime_name(name, vendors)
    assert caught.value.reason == "RuntimeResolution"
    assert caught.value.message == "spec.runtime: set either name or selector.vendor"


def test_lookup_error_names_the_runtime_and_the_cause() -> None:
    error = runtime_lookup_error("nvidia-a10", 'inferenceruntimes "nvidia-a10" not found')
    assert error.reason == "RuntimeResolution"
    assert error.message == (
        'get InferenceRuntime "nvidia-a10": inferenceruntimes "nvidia-a10" not found'
    )


def test_highest_priority_runtime_of_the_vendor_is_selected() -> None:
    assert select_runtime([A10, A100, ASCEND], ["nvidia"]) == A100


def test_vendor_order_beats_priority() -> None:
    assert select_runtime([A10, ASCEND], ["nvidia", "ascend"]) == A10


def test_vendor_fallback_selects_second_vendor_when_first_has_no_runtime() -> None:
    assert select_runtime([A10, A100], ["ascend", "nvidia"]) == A100


def test_unknown_vendors_in_the_preference_list_are_skipped() -> None:
    assert select_runtime([ASCEND], ["intel", "ascend"]) == ASCEND


def test_negative_priorities_compare_normally() -> None:
    low = RuntimeCandidate("low", "nvidia", -5)
    lower = RuntimeCandidate("lower", "nvidia", -10)
    assert select_runtime([lower, low], ["nvidia"]) == low


def test_priority_defaults_to_zero() -> None:
    assert RuntimeCandidate("r", "nvidia").priority == 0


def test_tie_at_top_priority_is_ambiguous_and_lists_sorted_names() -> None:
    tied = [
        RuntimeCandidate("zeta", "nvidia", 100),
        RuntimeCandidate("alpha", "nvidia", 100),
        RuntimeCandidate("mid", "nvidia", 100),
        RuntimeCandidate("loser", "nvidia", 1),
    ]
    assert selection_error(tied, ["nvidia", "ascend"]) == (
        'multiple InferenceRuntimes match vendor "nvidia" at priority 100: '
        "[alpha mid zeta]; set spec.runtime.name"
    )


def test_tie_below_the_top_priority_is_not_ambiguous() -> None:
    candidates = [A100, RuntimeCandidate("x", "nvidia", 100), A10]
    assert select_runtime(candidates, ["nvidia"]) == A100


def test_tie_in_the_first_vendor_fails_even_if_a_later_vendor_is_unambiguous() -> None:
    tied = [RuntimeCandidate("b", "ascend", 0), RuntimeCandidate("a", "ascend", 0), A10]
    assert selection_error(tied, ["ascend", "nvidia"]).startswith(
        'multiple InferenceRuntimes match vendor "ascend" at priority 0: [a b]'
    )


def test_no_runtime_for_any_vendor_lists_the_vendors() -> None:
    assert selection_error([ASCEND], ["nvidia", "intel"]) == (
        "no InferenceRuntime matches vendors [nvidia intel]"
    )


def test_no_runtimes_at_all() -> None:
    assert selection_error([], ["nvidia"]) == "no InferenceRuntime matches vendors [nvidia]"


def test_candidates_may_be_any_iterable() -> None:
    assert select_runtime(iter([A10, A100]), ["nvidia"]) == A100
