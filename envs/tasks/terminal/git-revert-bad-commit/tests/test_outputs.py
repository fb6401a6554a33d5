REPO = "/app/project"

import subprocess

def git(*args, repo=REPO):
    out = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout

import sys

ORIGINAL = ["Add divide", "Add README", "Optimize subtract", "Add multiply", "Initial calculator"]

def test_history_kept_and_extended():
    subjects = git("log", "--format=%s", "main").splitlines()
    assert len(subjects) == 6
    assert subjects[1:] == ORIGINAL

def test_calc_fixed_at_head():
    assert git("show", "main:calc.py") == '"""A tiny calculator module."""\n\n\ndef add(a, b):\n    return a + b\n\n\ndef subtract(a, b):\n    return a - b\n\n\ndef negate(a):\n    return -a\n\n\ndef square(a):\n    return a * a\n\n\ndef multiply(a, b):\n    return a * b\n\n\ndef divide(a, b):\n    return a / b\n'

def test_readme_kept():
    assert "tiny calculator" in git("show", "main:README.md")

def test_behaviour():
    code = "import calc; assert calc.subtract(5, 3) == 2; assert calc.divide(6, 3) == 2; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr

def test_clean_tree():
    assert git("status", "--porcelain", "--untracked-files=no").strip() == ""
