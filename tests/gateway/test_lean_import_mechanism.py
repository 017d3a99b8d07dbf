"""`import_deferring`: the modules imported see stand-ins whose calls reach the real module,
every later import gets the real module, and a module already imported is never stood in for.
Each case runs in a fresh interpreter, with a package of the test's own."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.fresh_interpreter import json_printed_by

USER = """
from heavy import helper
from heavy.part import Thing
import heavy.part as part_module

def call():
    return helper(2) + Thing().value + part_module.helper2()
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    package = tmp_path / "heavy"
    package.mkdir()
    (package / "__init__.py").write_text("import marker_a\ndef helper(n):\n    return n * 10\n")
    (package / "part.py").write_text(
        "import marker_b\nclass Thing:\n    value = 3\ndef helper2():\n    return 100\n"
    )
    (tmp_path / "marker_a.py").write_text("")
    (tmp_path / "marker_b.py").write_text("")
    (tmp_path / "user.py").write_text(USER)
    return tmp_path


def test_calls_reach_the_real_module_which_loads_only_then(folder: Path) -> None:
    found = json_printed_by(
        """
        import json, sys
        from noctaya.gateway.server.lean_import import import_deferring, is_forwarder
        import_deferring(["user"], ["heavy", "heavy.part"])
        import user
        names = ("heavy", "heavy.part", "marker_a", "marker_b")
        before = [name for name in names if name in sys.modules]
        forwarders = [is_forwarder(user.helper), is_forwarder(user.Thing)]
        forwarders.append(is_forwarder(user.part_module))
        result = user.call()
        import heavy.part
        print(json.dumps({
            "before": before,
            "forwarders": forwarders,
            "result": result,
            "after": sorted(name for name in names if name in sys.modules),
            "real later": [heavy.part.Thing.value, is_forwarder(heavy.part)],
        }))
        """,
        folder,
    )
    assert found == {
        "before": [],
        "forwarders": [True, True, True],
        "result": 123,
        "after": ["heavy", "heavy.part", "marker_a", "marker_b"],
        "real later": [3, False],
    }


def test_a_module_already_imported_is_used_as_it_is(folder: Path) -> None:
    found = json_printed_by(
        """
        import json
        import heavy.part
        from noctaya.gateway.server.lean_import import import_deferring, is_forwarder
        import_deferring(["user"], ["heavy.part"])
        import user
        print(json.dumps([is_forwarder(user.Thing), is_forwarder(user.helper), user.call()]))
        """,
        folder,
    )
    assert found == [False, False, 123]


def test_a_failing_import_leaves_no_stand_in(folder: Path) -> None:
    (folder / "broken.py").write_text("from heavy import helper\nraise RuntimeError('broken')\n")
    found = json_printed_by(
        """
        import json, sys
        from noctaya.gateway.server.lean_import import import_deferring
        try:
            import_deferring(["broken"], ["heavy"])
        except RuntimeError as error:
            print(json.dumps([str(error), "heavy" in sys.modules]))
        """,
        folder,
    )
    assert found == ["broken", False]
