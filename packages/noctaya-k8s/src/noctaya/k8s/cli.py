"""The `noctaya` command: one argparse sub-command per job (CRDs, RBAC, docs, render, validate).

Each sub-command is a `(name, help, configure, run)` entry in `COMMANDS`; `configure` adds its
arguments and `run` returns the process exit code, so a new sub-command is one more entry.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from noctaya.core.errors import NoctayaError
from noctaya.core.plugins import VendorRegistry
from noctaya.k8s.crds import write_crds
from noctaya.k8s.docs import PAGES
from noctaya.k8s.gateway_flags import add_gateway_default_flags, gateway_defaults
from noctaya.k8s.offline import DEFAULT_NAMESPACE, Outcome, render_files
from noctaya.k8s.operator.flags import DEFAULT_GATEWAY_IMAGE, go_int
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


def _configure_docs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("page", choices=sorted(PAGES), help="the page to generate")
    parser.add_argument(
        "--output", required=True, type=Path, help="Markdown file to write the page to"
    )


def _write_docs(args: argparse.Namespace) -> int:
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(PAGES[args.page](), encoding="utf-8")
    print(args.output)
    return 0


def _configure_manifests(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-f",
        "--filename",
        dest="files",
        action="extend",
        nargs="+",
        type=Path,
        required=True,
        metavar="FILE",
        help="LLMService and InferenceRuntime manifests (a directory: its .yaml files)",
    )
    parser.add_argument(
        "-n",
        "--namespace",
        default=DEFAULT_NAMESPACE,
        help="namespace of services whose manifest names none (default: %(default)s)",
    )
    parser.add_argument(
        "--gateway-image",
        default=DEFAULT_GATEWAY_IMAGE,
        help="the operator's --gateway-image (default: %(default)s)",
    )
    parser.add_argument(
        "--gateway-replicas",
        type=go_int,
        default=1,
        metavar="N",
        help="the operator's --gateway-replicas (default: %(default)s)",
    )
    add_gateway_default_flags(parser)


def _check(args: argparse.Namespace) -> Outcome | None:
    """The offline outcome with every problem printed to stderr; None when there were any."""
    try:
        defaults = gateway_defaults(vars(args))
    except ValueError as error:
        print(f"noctaya: {error}", file=sys.stderr)
        return None
    try:
        outcome = render_files(
            args.files,
            VendorRegistry.discover(),
            gateway_image=args.gateway_image,
            gateway_replicas=args.gateway_replicas,
            gateway_defaults=defaults,
            namespace=args.namespace,
        )
    except NoctayaError as error:  # the vendor plugins themselves cannot be loaded
        print(f"noctaya: {error.reason}: {error.message}", file=sys.stderr)
        return None
    for problem in outcome.problems + outcome.warnings:
        print(problem, file=sys.stderr)
    return None if outcome.problems else outcome


def _render(args: argparse.Namespace) -> int:
    outcome = _check(args)
    if outcome is None:
        return 1
    sys.stdout.write(outcome.yaml())
    return 0


def _validate(args: argparse.Namespace) -> int:
    outcome = _check(args)
    if outcome is None:
        return 1
    count = len(outcome.warnings)
    warned = f", {count} warning{'' if count == 1 else 's'}" if count else ""
    print(f"{outcome.documents} documents valid{warned}")
    return 0


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
    Command(
        "docs",
        "write a generated page of the manual (API reference, operator flags)",
        _configure_docs,
        _write_docs,
    ),
    Command(
        "render",
        "print the objects the operator would create for the given manifests, as YAML",
        _configure_manifests,
        _render,
    ),
    Command(
        "validate",
        "check manifests as the operator would; list every problem, exit 1 if there are any",
        _configure_manifests,
        _validate,
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
