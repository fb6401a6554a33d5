REPO = "/app/repo"

import subprocess

def git(*args, repo=REPO):
    out = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout

from pathlib import Path

def expected_hash():
    for line in git("log", "--format=%H %s").splitlines():
        h, subject = line.split(" ", 1)
        if subject == "Update env defaults":
            return h
    raise AssertionError("history was modified")

def test_answer():
    got = Path("/app/answer.txt").read_text().strip()
    assert len(got) == 40
    assert got == expected_hash()

def test_history_intact():
    assert len(git("log", "--format=%H").split()) == 7
