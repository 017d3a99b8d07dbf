"""A lazily loaded `kubernetes` package (`lean_kubernetes`) is the same package: every name its
`__init__` binds resolves to the very object a full import binds, names it defines itself run
that `__init__`, and a process that imported the client first is left as it was. Each check
runs in a fresh interpreter, where the packages are loaded once."""

from __future__ import annotations

from pathlib import Path

from support.fresh_interpreter import json_printed_by


def test_each_name_resolves_to_what_the_full_init_binds() -> None:
    found = json_printed_by(
        """
        import json, sys
        from noctaya.k8s import lean_kubernetes
        lean_kubernetes.install()
        import kubernetes
        lazy = {}
        for name in lean_kubernetes.LAZY:
            package = sys.modules[name]
            plan = vars(package)["__lazy_plan__"]
            names = [bound for pairs in plan.imports.values() for bound, _ in pairs]
            lazy[name] = {bound: getattr(package, bound) for bound in names}
        unloaded = "kubernetes.config.kube_config" in sys.modules
        version = kubernetes.__version__
        full = {}
        for name in lean_kubernetes.LAZY:
            package = sys.modules[name]
            package.load_config if name == "kubernetes.config" else package.__all__ if (
                name == "kubernetes.utils") else getattr(package, "no_such_name", None)
            full[name] = {bound: vars(package)[bound] for bound in lazy[name]}
        print(json.dumps({
            "counts": {name: len(names) for name, names in lazy.items()},
            "differ": [f"{name}.{bound}" for name in lazy for bound in lazy[name]
                       if lazy[name][bound] is not full[name][bound]],
            "kube_config loaded by the lookups": unloaded,
            "version": version,
        }))
        """
    )
    assert isinstance(found, dict)
    assert found["differ"] == []
    assert found["counts"]["kubernetes"] >= 8, "client, config, dynamic, watch, stream, ..."
    assert found["counts"]["kubernetes.config"] >= 8
    assert found["counts"]["kubernetes.utils"] >= 10
    assert found["kube_config loaded by the lookups"] is True, "config's names were all looked up"
    import importlib.metadata

    assert found["version"] == importlib.metadata.version("kubernetes")


def test_a_name_the_init_defines_or_a_star_import_completes_the_package() -> None:
    found = json_printed_by(
        """
        import json, sys
        from noctaya.k8s import lean_kubernetes
        lean_kubernetes.install()
        from kubernetes.config import load_incluster_config
        before = "kubernetes.config.kube_config" in sys.modules
        from kubernetes.config import load_config
        namespace = {}
        exec("from kubernetes.utils import *", namespace)
        print(json.dumps({
            "kube_config before": before,
            "load_config": load_config.__module__,
            "star": sorted(name for name in namespace if not name.startswith("__")),
            "all": sorted(sys.modules["kubernetes.utils"].__all__),
        }))
        """
    )
    assert isinstance(found, dict)
    assert found["kube_config before"] is False
    assert found["load_config"] == "kubernetes.config"
    assert found["star"] == found["all"]
    assert "create_from_yaml" in found["star"]


def test_a_client_imported_before_is_left_as_it_is() -> None:
    found = json_printed_by(
        """
        import json, sys
        import kubernetes
        from noctaya.k8s import lean_kubernetes
        lean_kubernetes.install()
        print(json.dumps(["kubernetes.config.kube_config" in sys.modules,
                          "__getattr__" in vars(sys.modules["kubernetes"])]))
        """
    )
    assert found == [True, False]


def test_what_the_client_calls_of_a_deferred_module_still_works() -> None:
    found = json_printed_by(
        """
        import datetime, json, sys
        from noctaya.k8s import lean_kubernetes
        lean_kubernetes.install()
        from kubernetes.client import ApiClient
        from kubernetes.dynamic.resource import ResourceInstance
        deferred = [name for names in lean_kubernetes.DEFERRED.values() for name in names]
        unloaded = [name for name in deferred if name in sys.modules]
        client = ApiClient()
        date = client._ApiClient__deserialize("2026-12-04T10:20:30Z", "datetime")
        pooled = client.pool.apply_async(lambda: 6 * 7).get(timeout=10)
        client.close()
        printed = str(ResourceInstance(None, {"kind": "Pod", "metadata": {"name": "a"}}))
        print(json.dumps({
            "unloaded before": unloaded,
            "date": date.isoformat(),
            "pool": pooled,
            "printed": printed,
            "loaded after": [name for name in deferred if name in sys.modules],
        }))
        """
    )
    assert found == {
        "unloaded before": [],
        "date": "2026-12-04T10:20:30+00:00",
        "pool": 42,
        "printed": "ResourceInstance[Pod]:\n  kind: Pod\n  metadata:\n    name: a\n",
        "loaded after": ["dateutil.parser", "multiprocessing.pool", "yaml"],
    }


def test_a_kubeconfig_file_loads_without_the_oidc_refresher_until_it_is_called(
    tmp_path: Path,
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:6443'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    found = json_printed_by(
        f"""
        import json, sys
        from noctaya.core.deferred_imports import is_forwarder
        from noctaya.k8s import lean_kubernetes
        lean_kubernetes.install()
        from kubernetes import config
        client = config.new_client_from_config(config_file={str(kubeconfig)!r})
        host = client.configuration.host
        unloaded = "requests_oauthlib" not in sys.modules
        kube_config = sys.modules["kubernetes.config.kube_config"]
        session = kube_config.OAuth2Session(client_id="noctaya")
        print(json.dumps([host, unloaded, is_forwarder(kube_config.OAuth2Session),
                          type(session).__module__]))
        """
    )
    assert found == [
        "https://127.0.0.1:6443",
        True,
        True,
        "requests_oauthlib.oauth2_session",
    ]


def test_another_major_release_gets_lazy_packages_but_imports_as_it_is() -> None:
    """Loaded by path, so that the release is changed before anything installs it."""
    found = json_printed_by(
        """
        import importlib.util, json, os, sys
        package = importlib.util.find_spec("noctaya.k8s")  # found, not imported
        path = os.path.join(package.submodule_search_locations[0], "lean_kubernetes.py")
        spec = importlib.util.spec_from_file_location("lean_kubernetes_by_path", path)
        module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.TESTED_MAJOR = 1
        module.install()
        import kubernetes.dynamic.resource, kubernetes.client.api_client
        print(json.dumps([
            type(sys.modules["kubernetes"]).__name__,
            sys.modules["kubernetes.dynamic.resource"].yaml is sys.modules.get("yaml"),
            "dateutil.parser" in sys.modules,
        ]))
        """
    )
    assert found == ["LazyPackage", True, True]
