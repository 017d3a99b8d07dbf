"""The plugin's promises, checked by running small pytest sessions inside this one."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from support.envtest import Binaries, ControlPlane
from support.envtest.control_plane import OWNER_FILE, WORKDIR_PREFIX

PLUGIN = ("-p", "support.control_plane")
NEEDS_API_SERVER = """
import pytest

@pytest.mark.integration
def test_needs_the_api_server(api_client):
    pass
"""


@pytest.fixture(autouse=True)
def inner_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


@pytest.fixture
def no_binaries(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("NOCTAYA_CONTROL_PLANE_CACHE", str(tmp_path / "empty-cache"))


@pytest.fixture
def no_keda_crds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("NOCTAYA_KEDA_CACHE", str(tmp_path / "empty-keda-cache"))


@pytest.fixture
def built_binaries(monkeypatch: pytest.MonkeyPatch, control_plane_binaries: Binaries) -> None:
    """pytester points HOME at its own temp dir; the inner session keeps finding the real build."""
    monkeypatch.setenv(
        "NOCTAYA_CONTROL_PLANE_CACHE", str(control_plane_binaries.etcd.parent.parent)
    )


@pytest.fixture
def fetched_keda_crds(monkeypatch: pytest.MonkeyPatch, keda_crds: Path) -> None:
    """As built_binaries, for the fetched KEDA CRDs (the cache root holds one folder a version)."""
    monkeypatch.setenv("NOCTAYA_KEDA_CACHE", str(keda_crds.parents[1]))


@pytest.mark.usefixtures("no_binaries")
def test_missing_binaries_fail_loudly_under_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    pytester.makepyfile(NEEDS_API_SERVER)
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*bash hack/build-control-plane.sh*", "*CI=true*"])


@pytest.mark.usefixtures("no_binaries")
def test_missing_binaries_skip_locally_naming_the_build_command(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    pytester.makepyfile(NEEDS_API_SERVER)
    result = pytester.runpytest(*PLUGIN, "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*bash hack/build-control-plane.sh*"])


@pytest.mark.integration
@pytest.mark.usefixtures("built_binaries", "no_keda_crds")
def test_missing_keda_crds_fail_loudly_under_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    pytester.makepyfile(NEEDS_API_SERVER)
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*bash hack/fetch-keda-crds.sh*", "*CI=true*"])


@pytest.mark.integration
@pytest.mark.usefixtures("built_binaries", "no_keda_crds")
def test_missing_keda_crds_skip_locally_naming_the_fetch_command(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    pytester.makepyfile(NEEDS_API_SERVER)
    result = pytester.runpytest(*PLUGIN, "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*bash hack/fetch-keda-crds.sh*"])


def test_tests_using_the_control_plane_are_marked_integration_even_if_forgotten(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        "def test_unmarked(control_plane):\n    pass\n\ndef test_plain():\n    pass\n"
    )
    result = pytester.runpytest(*PLUGIN, "-m", "not integration")
    result.assert_outcomes(passed=1, deselected=1)


@pytest.mark.integration
@pytest.mark.usefixtures("built_binaries", "fetched_keda_crds")
def test_failing_test_shows_process_logs_and_leaves_no_process_or_temp_dir(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    record = tmp_path / "record.json"
    monkeypatch.setenv("RECORD", str(record))
    pytester.makepyfile(
        """
        import json, os, pathlib

        def test_fails_on_purpose(control_plane):
            pathlib.Path(os.environ["RECORD"]).write_text(json.dumps({
                "workdir": str(control_plane.workdir),
                "pids": control_plane.process_ids(),
            }))
            assert False, "deliberate failure"
        """
    )
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*etcd log, last lines*", "*kube-apiserver log, last lines*"])
    seen = json.loads(record.read_text())
    assert set(seen["pids"]) == {"etcd", "kube-apiserver"}
    assert not Path(seen["workdir"]).exists()
    for pid in seen["pids"].values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_work_dir_of_a_killed_session_is_swept_but_a_live_one_is_kept(tmp_path: Path) -> None:
    dead_owner = subprocess.Popen(["true"])
    dead_owner.wait()  # reaped: its pid is gone
    abandoned = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
    (abandoned / OWNER_FILE).write_text(str(dead_owner.pid))
    live = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
    (live / OWNER_FILE).write_text(str(os.getpid()))
    plane = ControlPlane(Binaries(etcd=tmp_path / "etcd", kube_apiserver=tmp_path / "apiserver"))
    try:
        assert not abandoned.exists()
        assert live.exists()
    finally:
        plane.stop()
        live.joinpath(OWNER_FILE).unlink()
        live.rmdir()
