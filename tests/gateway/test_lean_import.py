"""hypercorn imported lean (`server.lean_import`) leaves its configuration-file modules unloaded,
yet every option that needs one still works, and the rest of the process imports the real modules.
Each check runs in a fresh interpreter: the import happens once per process."""

from __future__ import annotations

from pathlib import Path

from support.fresh_interpreter import printed_by


def test_the_configuration_file_options_load_their_modules_when_used(tmp_path: Path) -> None:
    toml_file = tmp_path / "server.toml"
    toml_file.write_text('bind = ["127.0.0.1:9"]\n')
    log_file = tmp_path / "logging.toml"
    log_file.write_text('version = 1\n[loggers.probe]\nlevel = "WARNING"\n')
    printed = printed_by(
        f"""
        import logging, sys
        from noctaya.gateway.server import lean_import
        lean_import.import_hypercorn()
        import hypercorn.asyncio, hypercorn.config, hypercorn.logging
        deferred = [name for name in lean_import.DEFERRED if name in sys.modules]
        print("unloaded" if deferred == [] else f"loaded {{deferred}}")
        print(hypercorn.config.Config.from_toml({str(toml_file)!r}).bind)
        config = hypercorn.config.Config()
        config.logconfig = "toml:" + {str(log_file)!r}
        hypercorn.logging.Logger(config)
        print(logging.getLogger("probe").level == logging.WARNING)
        config = hypercorn.config.Config()
        config.logconfig_dict = {{"version": 1, "loggers": {{"dict": {{"level": "ERROR"}}}}}}
        hypercorn.logging.Logger(config)
        print(logging.getLogger("dict").level == logging.ERROR)
        import multiprocessing.synchronize, logging.config, tomllib
        print(isinstance(multiprocessing.synchronize.Event, type), callable(tomllib.loads))
        """
    )
    assert printed.splitlines() == [
        "unloaded",
        "['127.0.0.1:9']",
        "True",
        "True",
        "True True",
    ]


def test_nothing_changes_where_hypercorn_is_already_imported() -> None:
    printed = printed_by(
        """
        import sys
        import hypercorn.asyncio
        from noctaya.gateway.server import lean_import
        lean_import.import_hypercorn()
        print(sys.modules["hypercorn.asyncio.run"].EventType.__module__)
        """
    )
    assert printed.strip() == "multiprocessing.synchronize"


def test_a_release_the_patches_were_not_tested_with_is_imported_as_it_is() -> None:
    printed = printed_by(
        """
        import sys
        from noctaya.gateway.server import lean_import
        from noctaya.gateway.server import tested_versions
        tested_versions.TESTED_LINES["hypercorn"] = (0, 1)
        lean_import.import_hypercorn()
        print("hypercorn" in sys.modules)
        import hypercorn.asyncio
        print(sys.modules["hypercorn.asyncio.run"].EventType.__module__)
        """
    )
    assert printed.splitlines() == ["False", "multiprocessing.synchronize"]
