import subprocess
from pathlib import Path

def test_repo_exists():
    assert Path("/app/myrepo").is_dir()
    assert Path("/app/myrepo/.git").is_dir()

def test_is_git_work_tree():
    out = subprocess.run(["git", "-C", "/app/myrepo", "rev-parse", "--show-toplevel"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "/app/myrepo"
