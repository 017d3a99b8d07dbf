"""The names a service answers to come from the engine's arguments, else the model reference."""

from __future__ import annotations

import pytest
from noctaya.core.plan.served_models import served_model_names


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--served-model-name=qwen"], ("qwen",)),
        (["--served-model-name", "qwen", "chat", "--port=8000"], ("qwen", "chat")),
        (["serve", "Qwen/Qwen3-8B", "--served-model-name", "a", "--served-model-name=b"], ("b",)),
        (["--model_alias=demo"], ("demo",)),
        (["--model=Qwen/Qwen3-8B", "--port=8000"], ("Qwen/Qwen3-8B",)),
        (["--served-model-name", "--port=8000"], ("Qwen/Qwen3-8B",)),
        (["--served-model-name="], ("Qwen/Qwen3-8B",)),
        (["--served-model-name-extra=x"], ("Qwen/Qwen3-8B",)),
    ],
)
def test_names_follow_the_engines_own_flags(args: list[str], names: tuple[str, ...]) -> None:
    assert served_model_names(args, "Qwen/Qwen3-8B") == names


def test_without_a_name_or_a_reference_there_is_none() -> None:
    assert served_model_names([], "") == ()
