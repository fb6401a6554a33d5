import os, pwd, grp, stat
from pathlib import Path

WWW_UID = pwd.getpwnam("www-data").pw_uid
WWW_GID = grp.getgrnam("www-data").gr_gid

def all_paths():
    root = Path("/app/site")
    return [root] + sorted(root.rglob("*"))

def test_tree_intact():
    files = sorted(str(p) for p in Path("/app/site").rglob("*") if p.is_file())
    assert files == ["/app/site/about/index.html", "/app/site/assets/app.js",
                     "/app/site/assets/img/logo.svg", "/app/site/index.html"]

def test_ownership():
    for p in all_paths():
        st = os.lstat(p)
        assert (st.st_uid, st.st_gid) == (WWW_UID, WWW_GID), p

def test_modes():
    for p in all_paths():
        m = stat.S_IMODE(os.lstat(p).st_mode)
        assert m == (0o755 if p.is_dir() else 0o644), (p, oct(m))
