import gzip, os, subprocess, tempfile
from pathlib import Path

def run(d):
    return subprocess.run(["bash", "/app/archive_logs.sh", str(d)], capture_output=True,
                          text=True, timeout=10)

def test_compresses_and_counts():
    with tempfile.TemporaryDirectory() as t:
        d = Path(t, "my logs")
        d.mkdir()
        (d / "app.log").write_text("a\n")
        (d / "web server.log").write_text("b\n")
        (d / "keep.txt").write_text("c\n")
        (d / "notes.log.txt").write_text("d\n")
        out = run(d)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "Archived 2 files"
        assert sorted(p.name for p in d.iterdir()) == [
            "app.log.gz", "keep.txt", "notes.log.txt", "web server.log.gz"]
        assert gzip.decompress((d / "web server.log.gz").read_bytes()) == b"b\n"

def test_no_logs():
    with tempfile.TemporaryDirectory() as t:
        (Path(t) / "readme.md").write_text("x\n")
        out = run(t)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "Archived 0 files"
        assert sorted(p.name for p in Path(t).iterdir()) == ["readme.md"]
