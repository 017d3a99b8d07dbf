"""The model names a service answers to: what clients put in `model`, and what the gateway lists
on `GET /v1/models` while the backend is cold.

They come from the engine's own arguments, so the cold list is the list the warm engine gives:
vLLM's `--served-model-name` (one or more names; the first is the one responses carry) or the
llama.cpp server's `--model_alias`; without either the engine calls the model by the reference it
was given (`.Model.Path`), and so does this.
"""

from __future__ import annotations

from collections.abc import Sequence

NAME_FLAGS = ("--served-model-name", "--model_alias")


def served_model_names(args: Sequence[str], model_path: str) -> tuple[str, ...]:
    """The names in the engine's rendered `args` (the last flag wins, as argparse takes it),
    else `model_path`."""
    names: tuple[str, ...] = ()
    for index, arg in enumerate(args):
        flag, equals, value = arg.partition("=")
        if flag not in NAME_FLAGS:
            continue
        if equals:
            names = (value,)
        else:
            following = []
            for word in args[index + 1 :]:
                if word.startswith("-"):
                    break
                following.append(word)
            names = tuple(following)
    return tuple(name for name in names if name) or ((model_path,) if model_path else ())
