from pathlib import Path

def test_dirs():
    for name in ("src", "tests", "docs"):
        assert Path("/app/project", name).is_dir(), name

def test_readme():
    p = Path("/app/project/README.md")
    assert p.is_file()
    assert p.read_text().strip() == ""
