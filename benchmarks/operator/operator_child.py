"""The benchmark's handle on the operator process: start it, scrape it, read its CPU and RSS."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from api_requests import Key
from operator_process import CLIENT_REQUESTS
from prometheus_client.parser import text_string_to_metric_families

HERE = Path(__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Scrape:
    reconciles: float  # every result
    errors: float
    queue: int
    client: Counter[Key]  # requests the operator's client sent


class OperatorChild:
    """`operator_process.py` running against `kubeconfig`, on the sources in `pythonpath` (this
    tree's installed packages when empty)."""

    def __init__(
        self,
        kubeconfig: Path,
        *,
        workers: int | None,
        resync: float,
        pythonpath: list[Path],
        profile: Path | None,
    ) -> None:
        self.port = _free_port()
        command = [sys.executable, str(HERE / "operator_process.py"), str(kubeconfig)]
        command += [str(self.port), "--resync", str(resync)]
        if workers is not None:
            command += ["--workers", str(workers)]
        if profile is not None:
            command += ["--profile", str(profile)]
        env = dict(os.environ)
        if pythonpath:
            env["PYTHONPATH"] = os.pathsep.join(str(p) for p in pythonpath)
        self.popen = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.scrape()
                return
            except OSError:
                if self.popen.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the operator process did not start") from None
                time.sleep(0.1)

    def scrape(self) -> Scrape:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as r:
            text = r.read().decode()
        scrape = Scrape(reconciles=0.0, errors=0.0, queue=0, client=Counter())
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "controller_runtime_reconcile_total":
                    scrape.reconciles += sample.value
                    if sample.labels.get("result") == "error":
                        scrape.errors += sample.value
                elif sample.name == "workqueue_depth":
                    scrape.queue = int(sample.value)
                elif sample.name == CLIENT_REQUESTS + "_total":
                    key = (sample.labels["verb"], sample.labels["resource"])
                    scrape.client[key] = int(sample.value)
        return scrape

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.popen.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def peak_rss_mib(self) -> float:
        status = Path(f"/proc/{self.popen.pid}/status").read_text()
        match = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
        assert match, "no VmHWM"
        return int(match.group(1)) / 1024

    def stop(self) -> None:
        self.popen.terminate()
        try:
            self.popen.wait(120)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
