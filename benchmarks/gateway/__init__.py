"""Gateway benchmark: the same load straight at the engine stub and through the gateway.

Run from the repository root: `.venv/bin/python -m benchmarks.gateway` (needs `wrk`).
"""
