"""The documentation describes the project as it is: the README is a user's page (short, the two set-up
commands first), and no tracked text narrates the project's history (issue or session numbers, "until
version N", before/after notes). The docs site itself is built by `make docs` (mkdocs --strict)."""
from __future__ import annotations

import re
import subprocess

import pytest

from tests.paths import ROOT

README_MAX_LINES = 200
SETUP_COMMANDS_WITHIN = 40
TEXT_SUFFIXES = (".py", ".md", ".yaml", ".yml", ".toml")
# Chronology, not description. `--sessions 32` (a flag) and `X-Session-Id` (a header) are not matched:
# the word must not follow a letter, digit or hyphen, and a number must follow it.
HISTORY = re.compile(
    r"(?<![\w-])(?:issues?|sessions?|items?)[ -]#?\d+"
    r"|\buntil (?:persona )?version \d"
    r"|\bsteps? \d+ of (?:the )?development\b",
    re.IGNORECASE,
)
BEFORE = re.compile(r"\bBefore:")  # a before/after note; "before:" in lower case is ordinary prose
THIS_FILE = "tests/test_docs.py"  # its examples are the phrases it looks for


def tracked_text_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    names = [n for n in out.decode().split("\0") if n and n != THIS_FILE]
    return [n for n in names if n.endswith(TEXT_SUFFIXES) or n.rsplit("/", 1)[-1] == "Makefile"]


def history_phrases(text: str) -> list[str]:
    return [m.group(0) for m in sorted([*HISTORY.finditer(text), *BEFORE.finditer(text)], key=lambda m: m.start())]


@pytest.mark.parametrize("text,found", [
    ("as issue 8 found", ["issue 8"]),
    ("(Issue 19, item 6)", ["Issue 19", "item 6"]),
    ("sessions 9-15 and session-2", ["sessions 9", "session-2"]),
    ("Until version 2 the gate", ["Until version 2"]),
    ("until persona version 2,", ["until persona version 2"]),
    ("Before: it hung.", ["Before:"]),
    ("step 3 of development", ["step 3 of development"]),
    ("X-Session-Id: 7, --sessions 32, step 0 of an episode, before: lowercase", []),
])
def test_the_history_pattern(text, found):
    assert history_phrases(text) == found


def test_no_tracked_text_narrates_history():
    hits = []
    for name in tracked_text_files():
        path = ROOT / name
        if not path.is_file():  # deleted in the work tree, not yet in the index
            continue
        for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            hits += [f"{name}:{lineno}: {phrase!r} in {line.strip()[:100]}" for phrase in history_phrases(line)]
    assert not hits, "history narration; describe the project as it is:\n" + "\n".join(hits)


def test_readme_is_short_and_starts_with_the_two_setup_commands():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; topics go in docs/"
    head = lines[:SETUP_COMMANDS_WITHIN]
    for command in ("make demo", "make test"):
        assert any(line.startswith(command) for line in head), f"`{command}` not in README's first lines"


def test_readme_and_docs_link_only_inside_the_repository():
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        assert "../shared/" not in path.read_text(), path
