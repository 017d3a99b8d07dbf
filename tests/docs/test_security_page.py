"""Security: what the page says about key rotation is what the gateway does
(tests/gateway/test_auth.py: a rotated file refuses the old key at once; a file of two lines
accepts neither)."""

from __future__ import annotations

from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "operations" / "security.md"


def test_rotation_is_said_to_have_a_window_because_one_key_is_accepted() -> None:
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    assert "The gateway accepts one key at a time" in text
    assert "a rotation always has a window where some clients fail" in text
    assert "without a window" not in text
