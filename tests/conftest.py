"""Root conftest: registers the suite-wide plugins (one line each, so others can add theirs).

`noctaya.k8s` is imported first so that every test uses the `kubernetes` client loaded as the
operator loads it (`noctaya.k8s.lean_kubernetes`), the suite's own helpers included.
"""

import noctaya.k8s  # noqa: F401

pytest_plugins = [
    "pytester",
    "support.control_plane",
]
