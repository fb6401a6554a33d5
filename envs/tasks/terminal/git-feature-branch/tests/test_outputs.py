REPO = "/app/repo"

import subprocess

def git(*args, repo=REPO):
    out = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout

def test_main_unchanged():
    assert git("log", "--format=%s", "main").splitlines() == ["Add app", "Add greeting"]
    assert git("show", "main:greeting.txt").strip() == "Hello!"

def test_feature_branch():
    assert git("rev-parse", "--verify", "refs/heads/feature/greeting").strip()
    assert git("show", "feature/greeting:greeting.txt").strip() == "Hello, world!"

def test_feature_based_on_main():
    main = git("rev-parse", "main").strip()
    feat = git("rev-parse", "feature/greeting").strip()
    assert main != feat
    subprocess.run(["git", "-C", REPO, "merge-base", "--is-ancestor", main, feat], check=True)

def test_clean_tree():
    assert git("status", "--porcelain", "--untracked-files=no").strip() == ""
