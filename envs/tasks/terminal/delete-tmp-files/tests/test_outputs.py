from pathlib import Path

KEEP = ['notes.txt', 'a/report.csv', 'a/b/data.json', 'notes.tmp.txt', 'a/template.md', 'c/tmp/keep.log']
REMOVE = ['scratch.tmp', 'a/x.tmp', 'a/b/cache.tmp', 'c/tmp/old.tmp', 'c/.hidden.tmp']

def test_tmp_files_gone():
    left = [str(p) for p in Path("/app/work").rglob("*.tmp")]
    assert left == []
    for rel in REMOVE:
        assert not Path("/app/work", rel).exists(), rel

def test_other_files_kept():
    for rel in KEEP:
        p = Path("/app/work", rel)
        assert p.is_file(), rel
        assert p.read_text() == f"content of {rel}\n"

def test_dirs_kept():
    for rel in ("a", "a/b", "c", "c/tmp"):
        assert Path("/app/work", rel).is_dir(), rel
