"""`up` leaves the box running after this command exits (`--nodes N`: node 0 with the control
plane, and N-1 workers); `down` takes it away, whatever its size."""

from __future__ import annotations

import argparse
import sys

from ..envtest.prerequisites import PrerequisiteMissing
from . import layout
from .box import Cluster, ClusterError
from .host import HostError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cluster", description=__doc__)
    parser.add_argument("action", choices=["up", "down"])
    parser.add_argument(
        "--nodes", type=int, choices=range(1, 9), default=layout.NODE_COUNT, metavar="1..8"
    )
    args = parser.parse_args(argv)
    action = args.action
    cluster = Cluster(attached=False, nodes=layout.default_nodes(args.nodes))
    try:
        if action == "up":
            try:
                cluster.up()
            except BaseException:
                cluster.down()  # no half-made box; the logs stay
                raise
            print(f"kubeconfig: {cluster.kubeconfig}\nlogs: {cluster.folders.logs}")
            for what, seconds in cluster.timings.items():
                print(f"  {what} at {seconds:.1f} s")
        else:
            cluster.down()
    except (PrerequisiteMissing, ClusterError, HostError) as error:
        print(f"cluster {action}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
