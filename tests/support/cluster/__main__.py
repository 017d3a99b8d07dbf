"""`up` leaves the box running after this command exits; `down` takes it away."""

from __future__ import annotations

import argparse
import sys

from ..envtest.prerequisites import PrerequisiteMissing
from .box import Cluster, ClusterError
from .host import HostError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cluster", description=__doc__)
    parser.add_argument("action", choices=["up", "down"])
    action = parser.parse_args(argv).action
    cluster = Cluster(attached=False)
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
