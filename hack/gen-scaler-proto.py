"""Regenerate the committed gRPC stubs of the KEDA External Push scaler from its proto.

Usage: python hack/gen-scaler-proto.py [--out DIR]   (default: the package's own source tree)

The stubs are committed so a runtime install needs no protoc; tests/scaler runs this script into
a temporary directory and fails when the committed files differ from what the proto produces.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grpc_tools import protoc

SRC_ROOT = Path(__file__).resolve().parent.parent / "packages" / "noctaya-local" / "src"
PROTO = "noctaya/local/externalscaler/externalscaler.proto"
GENERATED = ("externalscaler_pb2.py", "externalscaler_pb2.pyi", "externalscaler_pb2_grpc.py")


def generate(out_root: Path) -> None:
    """Write the stubs under `out_root`/noctaya/local/externalscaler (import paths included)."""
    out_root.mkdir(parents=True, exist_ok=True)
    code = protoc.main(
        [
            "protoc",
            f"-I{SRC_ROOT}",
            f"--python_out={out_root}",
            f"--pyi_out={out_root}",
            f"--grpc_python_out={out_root}",
            PROTO,
        ]
    )
    if code != 0:
        raise SystemExit(f"protoc failed with exit code {code}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=SRC_ROOT, help="root of the generated tree")
    args = parser.parse_args(argv)
    generate(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
