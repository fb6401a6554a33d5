import os, stat
from pathlib import Path

def mode(p):
    return stat.S_IMODE(os.stat(p).st_mode)

def test_secrets_dir():
    assert mode("/app/deploy/secrets") == 0o700

def test_secret_files():
    files = sorted(Path("/app/deploy/secrets").iterdir())
    assert len(files) == 3
    for f in files:
        assert mode(f) == 0o600, (f, oct(mode(f)))

def test_public_dir():
    assert mode("/app/deploy/public") == 0o755

def test_public_files():
    expected = {"index.html": 0o644, "style.css": 0o644, "deploy.sh": 0o755, "rollback.sh": 0o755}
    got = {p.name: mode(p) for p in Path("/app/deploy/public").iterdir()}
    assert got == expected, {k: oct(v) for k, v in got.items()}

def test_contents_unchanged():
    assert Path("/app/deploy/secrets/db_password").read_text() == "hunter2\n"
    assert Path("/app/deploy/public/deploy.sh").read_text() == "#!/bin/bash\necho deploying\n"
