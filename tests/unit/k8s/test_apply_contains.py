"""When is a live object already what the operator would apply, and which cached objects does a
label selector pick?"""

from __future__ import annotations

from typing import Any

import pytest
from noctaya.k8s.apply import contains
from noctaya.k8s.reader import selector_matches

WANTED = {
    "metadata": {"name": "qwen", "ownerReferences": [{"uid": "u1", "controller": True}]},
    "spec": {
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "serving",
                        "args": ["--a", "--b"],
                        "env": [{"name": "A", "value": "1"}],
                    }
                ]
            }
        }
    },
}


def _live(**changes: Any) -> dict[str, Any]:
    container = {
        "name": "serving",
        "args": ["--a", "--b"],
        "env": [{"name": "A", "value": "1"}],
        "terminationMessagePath": "/dev/termination-log",
    }
    container.update(changes)
    return {
        "metadata": {
            "name": "qwen",
            "resourceVersion": "7",
            "ownerReferences": [{"uid": "u1", "controller": True, "kind": "LLMService"}],
        },
        "spec": {"replicas": 1, "template": {"spec": {"containers": [container]}}},
        "status": {"readyReplicas": 1},
    }


def test_server_defaults_and_status_beside_the_applied_fields_do_not_count() -> None:
    assert contains(_live(), WANTED)


def test_entries_others_added_to_a_named_list_do_not_count() -> None:
    live = _live(env=[{"name": "INJECTED", "value": "x"}, {"name": "A", "value": "1"}])
    assert contains(live, WANTED)


@pytest.mark.parametrize(
    "changes",
    [
        {"args": ["--a"]},
        {"args": ["--b", "--a"]},
        {"env": [{"name": "A", "value": "2"}]},
        {"env": []},
        {"name": "other"},
    ],
)
def test_a_changed_or_missing_applied_field_means_apply_again(changes: dict[str, Any]) -> None:
    assert not contains(_live(**changes), WANTED)


def test_a_missing_object_part_means_apply_again() -> None:
    assert not contains({"metadata": WANTED["metadata"]}, WANTED)
    assert not contains(None, {"a": 1})
    assert not contains({"a": [1]}, {"a": 1})


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("a=1", {"a": "1"}, True),
        ("a=1,b=2", {"a": "1", "b": "2", "c": "3"}, True),
        ("a=1,b=2", {"a": "1"}, False),
        ("a", {"a": ""}, True),
        ("a,b=2", {"b": "2"}, False),
        ("", {}, True),
        ("a=1", {"a": "2"}, False),
    ],
)
def test_label_selectors_pick_cached_objects_as_the_api_server_would(
    selector: str, labels: dict[str, str], expected: bool
) -> None:
    assert selector_matches(selector, {"metadata": {"labels": labels}}) is expected
