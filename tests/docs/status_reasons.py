"""Every condition reason the operator can write, found in the source rather than listed by hand.

A reason reaches a condition in one of a few shapes, each recognised here from the syntax tree
of noctaya.core and noctaya.k8s:

- `NoctayaError("Reason", ...)`, and `super().__init__("Reason", ...)` in its subclasses;
- a module constant `REASON = "Reason"` (used as `NoctayaError(REASON, ...)`);
- the reconciler's steps `api_step("Reason", ...)`, `apply(...)`, `create_once(...)`,
  `delete(...)` and `applier.apply(obj, owner, "Reason")`;
- the observation's public constants (`IMAGE_PULL_FAILED = "ImagePullFailed"` in
  observation.py; its private ones, such as `_CREATING = "ContainerCreating"`, are the kubelet's
  words it reads, never reasons it writes);
- the status policy's condition values `(TRUE/FALSE, "Reason", "message")` and
  `StatusEvent(type, "Reason", ...)`.

A new reason written any of these ways appears here without anyone updating a list.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("packages/noctaya-core/src", "packages/noctaya-k8s/src")
_REASON = re.compile(r"^[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*$")
_CALLS = {"NoctayaError", "__init__", "api_step", "apply", "create_once", "delete"}
_CONDITION_STATUSES = {"TRUE", "FALSE"}


def code_reasons() -> set[str]:
    reasons: set[str] = set()
    for root in SOURCES:
        for path in sorted((REPO / root).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            reasons |= _reasons_in(tree, observation=path.name == "observation.py")
    return reasons


def _reasons_in(tree: ast.Module, *, observation: bool) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _callee(node.func) in _CALLS:
            found |= {text for arg in node.args if (text := _reason(arg))}
        elif isinstance(node, ast.Call) and _callee(node.func) == "StatusEvent":
            found |= {text} if len(node.args) > 1 and (text := _reason(node.args[1])) else set()
        elif isinstance(node, ast.Assign) and node.col_offset == 0:
            names = {t.id for t in node.targets if isinstance(t, ast.Name)}
            public = all(n.isupper() and not n.startswith("_") for n in names)
            if "REASON" in names or (observation and public):
                found |= {text} if (text := _reason(node.value)) else set()
        elif isinstance(node, ast.Tuple) and len(node.elts) == 3:
            status, reason, _ = node.elts
            if isinstance(status, ast.Name) and status.id in _CONDITION_STATUSES:
                found |= {text} if (text := _reason(reason)) else set()
    return found


def _callee(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _reason(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value if _REASON.match(node.value) else None
    return None
