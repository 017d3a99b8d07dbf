"""Importing Noctaya changes nothing outside Noctaya, and the `kubernetes` client it imports is
the ordinary one: a process's threads may touch its names first at the same moment (the
operator runs informers, leader election and its servers on threads).

Each check runs in an interpreter of its own, where modules are imported once.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from support.fresh_interpreter import json_printed_by, printed_by

CLIENT_NAMES = (
    "config.load_config",
    "config.load_incluster_config",
    "config.load_kube_config",
    "config.ConfigException",
    "config.new_client_from_config",
    "client.CoreV1Api",
    "client.ApiClient",
    "client.V1Pod",
    "utils.create_from_yaml",
    "utils.parse_quantity",
    "utils.FailToCreateError",
    "watch.Watch",
    "dynamic.DynamicClient",
    "stream.stream",
)
"""Names bound by the `__init__` of `kubernetes` and of its subpackages, each read through the
package as `kubernetes.config.load_config` is."""

THREADS = 8

ORDERS = ("same order", "every other thread in reverse")
"""Either way several threads touch `kubernetes` and `kubernetes.config` first together."""

IMPORT_EVERY_NOCTAYA_MODULE = """
import importlib, pkgutil
import noctaya
for found in pkgutil.walk_packages(noctaya.__path__, "noctaya."):
    if found.name.rpartition(".")[2] != "__main__":
        importlib.import_module(found.name)
"""
"""Found on the installed namespace package, whatever its distributions hold today."""

DESCRIBE_MODULES = """
def ours(name):
    return name == "noctaya" or name.startswith("noctaya.")

def kind(module):
    spec = getattr(module, "__spec__", None)
    cls = type(module)
    return [f"{cls.__module__}.{cls.__qualname__}", getattr(spec, "name", None)]
"""


def program(*parts: str) -> str:
    """`parts` dedented each and joined, so code kept at module level can be put between."""
    return "\n".join(textwrap.dedent(part) for part in parts)


@pytest.mark.parametrize("round_", range(2))
@pytest.mark.parametrize("order", ORDERS)
def test_threads_touching_client_names_first_at_once_all_find_them(order: str, round_: int) -> None:
    """Each thread walks the names down from `kubernetes` (as `kubernetes.config.load_config`
    reads), in the operator's process: its entry module imported first. The barrier starts the
    threads together, so most names are first touched by several at once; each round is a new
    process, where whichever thread comes first differs."""
    found = json_printed_by(
        program(
            f"""
            names = {list(CLIENT_NAMES)!r}
            order = {order!r}
            threads = {THREADS}
            """,
            """
            import json, threading
            import noctaya.k8s, noctaya.k8s.operator.main
            import kubernetes

            barrier = threading.Barrier(threads)
            failures, seen = [], [{} for _ in range(threads)]

            def touch(index):
                mine = names[::-1] if order != "same order" and index % 2 else names
                barrier.wait()
                for name in mine:
                    try:
                        value = kubernetes
                        for part in name.split("."):
                            value = getattr(value, part)
                        seen[index][name] = id(value)
                    except Exception as error:
                        failures.append(f"thread {index}: kubernetes.{name}: {error!r}")

            started = [threading.Thread(target=touch, args=(i,)) for i in range(threads)]
            for thread in started:
                thread.start()
            for thread in started:
                thread.join()
            print(json.dumps({
                "failures": failures,
                "differ": sorted(
                    {name for one in seen for name in one if one[name] != seen[0].get(name)}
                ),
            }))
            """,
        )
    )
    assert isinstance(found, dict)
    assert found["failures"] == []
    assert found["differ"] == [], "every thread found the same object for each name"


def test_importing_noctaya_after_its_dependencies_leaves_their_modules_as_they_were() -> None:
    """With every third-party package the installed Noctaya distributions require imported
    first, importing every Noctaya module replaces none of the modules there, changes no
    module's class, and what it adds beside its own modules is each a module as imported: of
    the import system's class or one of its own package's, under the name its spec gives."""
    found = json_printed_by(
        program(
            """
            import importlib, importlib.metadata, json, sys
            from packaging.requirements import Requirement

            def normal(name):
                return name.lower().replace("_", "-")

            noctaya_distributions = [
                d.metadata["Name"] for d in importlib.metadata.distributions()
                if normal(d.metadata["Name"]).startswith("noctaya-")
            ]
            required = {
                normal(Requirement(line).name)
                for distribution in noctaya_distributions
                for line in importlib.metadata.requires(distribution) or ()
                if Requirement(line).marker is None
                and not normal(Requirement(line).name).startswith("noctaya-")
            }
            packages = sorted(
                top for top, distributions in importlib.metadata.packages_distributions().items()
                if top.isidentifier() and not top.startswith("_")
                and any(normal(d) in required for d in distributions)
            )
            for package in packages:
                importlib.import_module(package)
            """,
            DESCRIBE_MODULES,
            "before = {name: (module, type(module)) for name, module in sys.modules.items()}",
            IMPORT_EVERY_NOCTAYA_MODULE,
            """
            added = {
                name: kind(module) for name, module in sys.modules.items()
                if name not in before and not ours(name)
            }
            print(json.dumps({
                "imported first": packages,
                "replaced": sorted(
                    name for name, (module, _) in before.items()
                    if sys.modules.get(name) is not module
                ),
                "class changed": sorted(
                    name for name, (module, cls) in before.items() if type(module) is not cls
                ),
                "not as imported": {
                    name: described for name, described in added.items()
                    if described[1] != name or not (
                        described[0] == "builtins.module"
                        or described[0].partition(".")[0] == name.partition(".")[0]
                    )
                },
                "noctaya modules": sum(ours(name) for name in sys.modules),
            }))
            """,
        )
    )
    assert isinstance(found, dict)
    assert {"kubernetes", "pydantic", "yaml"} <= set(found["imported first"])
    assert found["noctaya modules"] > 100, "every Noctaya module was imported"
    assert found["replaced"] == []
    assert found["class changed"] == []
    assert found["not as imported"] == {}


def test_importing_noctaya_first_adds_each_module_beside_its_own_as_a_plain_import_would() -> None:
    """Every module outside Noctaya that importing all of Noctaya first adds is what importing
    that name in a process without Noctaya makes: of the same class, with the same spec name (a
    package's own lazy modules and aliases, as requests' `requests.packages.*`, included). A
    second interpreter imports those names in the order the first added them."""
    added = json_printed_by(
        program(
            "import json, sys",
            DESCRIBE_MODULES,
            "before = set(sys.modules)",
            IMPORT_EVERY_NOCTAYA_MODULE,
            """
            print(json.dumps({
                name: kind(module) for name, module in list(sys.modules.items())
                if name not in before and not ours(name)
            }))
            """,
        )
    )
    assert isinstance(added, dict)
    assert "kubernetes" in added
    plain = json.loads(
        printed_by(
            program(
                "import importlib, json, sys",
                DESCRIBE_MODULES,
                f"names = {list(added)!r}",
                """
                for name in names:
                    if name not in sys.modules:
                        try:
                            importlib.import_module(name)
                        except ImportError:
                            pass  # a name only another module's import sets: `__mp_main__`
                print(json.dumps({
                    name: kind(sys.modules[name]) for name in names if name in sys.modules
                }))
                """,
            )
        )
    )
    assert {
        name: {"after Noctaya": described, "plain import": plain.get(name)}
        for name, described in added.items()
        if plain.get(name) != described
    } == {}
