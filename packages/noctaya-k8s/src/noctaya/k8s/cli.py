"""The `noctaya` command: one argparse sub-command per job (`crds` here; others register alongside).

Each sub-command is a `(name, help, configure, run)` entry in `COMMANDS`; `configure` adds its
arguments and `run` returns the process exit code, so adding `operator` or `render` is one entry.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from noctaya.k8s.crds import write_crds
from noctaya.k8s.rbac import write_rbac


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def _configure_output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output", required=True, type=Path, help="directory to write the YAML files into"
    )


def _writing(write: Callable[[Path], list[Path]]) -> Callable[[argparse.Namespace], int]:
    """A sub-command that writes generated manifests into `--output` and lists them."""

    def run(args: argparse.Namespace) -> int:
        for path in write(args.output):
            print(path)
        return 0

    return run


COMMANDS: list[Command] = [
    Command(
        "crds",
        "write the CustomResourceDefinitions generated from the API models",
        _configure_output,
        _writing(write_crds),
    ),
    Command(
        "rbac",
        "write the operator's RBAC: its ClusterRole, leader-election Role, bindings",
        _configure_output,
        _writing(write_rbac),
    ),
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="noctaya", description="Noctaya control plane")
    subcommands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        sub = subcommands.add_parser(command.name, help=command.help, description=command.help)
        command.configure(sub)
        sub.set_defaults(run=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
