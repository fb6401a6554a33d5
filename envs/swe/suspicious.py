"""Patches that reach into the test machinery from the package under test.

SWE grading runs the instance's tests in the patched tree, so the package under test is imported by
the process that reports the verdict. A patch to a source file can wrap pytest's
`TestReport.from_item_and_call`, register a pytest hook, or exit the interpreter with status 0 at
import, and every test "passes": swebench counts such a patch resolved. No fix to a library's issue
needs to import pytest's internals into the library, so a patch that does is flagged `suspicious`,
with the lines named, and with `env.swe_strict` (the default) it scores 0.

This reads the added lines of the graded patch (test files are already dropped by `split_patch`);
it is a tripwire for a known class, not a proof: code that assembles the names at run time passes it.
"""
from __future__ import annotations

import re

_FILE = re.compile(r"^\+\+\+ b/(.*)$")
_MACHINERY = [
    (re.compile(r"\b_pytest\b"), "imports pytest's internals (_pytest)"),
    (re.compile(r"^\s*(import\s+pytest\b|from\s+pytest\b)"), "imports pytest"),
    (re.compile(r"\bTestReport\b"), "uses pytest's TestReport"),
    (re.compile(r"\bdef\s+pytest_\w+"), "defines a pytest hook"),
    (re.compile(r"\b(hookimpl|pluggy)\b"), "uses pytest's plugin machinery"),
    (re.compile(r"^(sys\.exit|os\._exit|exit|quit)\s*\("), "exits the interpreter at import"),
    (re.compile(r"\bsys\.modules\[\s*['\"](_?pytest|pluggy)"), "replaces a pytest module"),
]


def suspicious_lines(patch: str) -> list[str]:
    """One line per added line of `patch` that reaches into the test machinery, as
    "src/pkg/core.py: imports pytest's internals (_pytest): `from _pytest import reports`"."""
    found, path = [], "?"
    for line in patch.splitlines():
        if m := _FILE.match(line):
            path = m.group(1)
            continue
        if not line.startswith("+") or line.startswith("+++"):
            continue
        code = line[1:]
        for pattern, why in _MACHINERY:
            if pattern.search(code):
                found.append(f"{path}: {why}: `{code.strip()[:120]}`")
                break
    return found
