"""Root conftest: registers the suite-wide plugins (one line each, so others can add theirs)."""

pytest_plugins = [
    "pytester",
    "support.control_plane",
]
