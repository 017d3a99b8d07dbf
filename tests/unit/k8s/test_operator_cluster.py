"""Where the operator finds its cluster and its own namespace."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from noctaya.k8s.operator import cluster
from noctaya.k8s.operator.cluster import ClusterConfigError, load_api_client, manager_namespace


def _kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


def test_namespace_comes_from_pod_namespace_first(tmp_path: Path) -> None:
    file = tmp_path / "namespace"
    file.write_text("from-file\n")
    assert manager_namespace({"POD_NAMESPACE": "from-env"}, file) == "from-env"


def test_namespace_falls_back_to_the_service_account_file(tmp_path: Path) -> None:
    file = tmp_path / "namespace"
    file.write_text("from-file\n")
    assert manager_namespace({}, file) == "from-file"


def test_namespace_defaults_to_noctaya_system_outside_a_cluster(tmp_path: Path) -> None:
    assert manager_namespace({}, tmp_path / "absent") == "noctaya-system"


def test_the_kubeconfig_flag_wins_over_the_environment(tmp_path: Path) -> None:
    flag = _kubeconfig(tmp_path / "flag", "https://127.0.0.1:1111")
    env = _kubeconfig(tmp_path / "env", "https://127.0.0.1:2222")
    client = load_api_client(str(flag), {"KUBECONFIG": str(env)})
    assert client.configuration.host == "https://127.0.0.1:1111"


def test_kubeconfig_environment_variable_is_used_without_the_flag(tmp_path: Path) -> None:
    env = _kubeconfig(tmp_path / "env", "https://127.0.0.1:2222")
    client = load_api_client(None, {"KUBECONFIG": str(env)})
    assert client.configuration.host == "https://127.0.0.1:2222"


def test_an_unreadable_kubeconfig_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ClusterConfigError, match="invalid Kubernetes client configuration"):
        load_api_client(str(tmp_path / "missing"), {})


def test_no_configuration_anywhere_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cluster, "HOME_KUBECONFIG", tmp_path / "no-such-config")
    with pytest.raises(ClusterConfigError) as missing:
        load_api_client(None, {})
    assert "--kubeconfig" in str(missing.value)
    assert "KUBECONFIG" in str(missing.value)
