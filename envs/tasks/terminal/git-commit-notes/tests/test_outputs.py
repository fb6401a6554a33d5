REPO = "/app/repo"

import subprocess

def git(*args, repo=REPO):
    out = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout

def test_head_message():
    assert git("log", "-1", "--format=%s").strip() == "Add release notes"

def test_history():
    subjects = git("log", "--format=%s", "main").splitlines()
    assert subjects == ["Add release notes", "Initial commit"]

def test_notes_committed():
    content = git("show", "HEAD:NOTES.md")
    assert content.strip() == "Remember to update the changelog."

def test_clean_tree():
    assert git("status", "--porcelain").strip() == ""
