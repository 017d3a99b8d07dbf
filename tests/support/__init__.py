"""Test-only support code shared by the suites (pytest plugins, real-server harnesses)."""
