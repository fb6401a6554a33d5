import tarfile
from pathlib import Path

KEPT = {'site/index.html': '<h1>Home</h1>\n', 'site/css/main.css': 'h1 { color: teal }\n', 'site/js/app.js': 'export const x = 1;\n', 'site/logs/README.txt': 'logs go here\n', 'site/changelog.md': '- v1\n'}

def members():
    with tarfile.open("/app/backup.tar.gz", "r:gz") as tf:
        out = {}
        for m in tf.getmembers():
            if m.isfile():
                name = m.name[2:] if m.name.startswith("./") else m.name
                out[name] = tf.extractfile(m).read().decode()
        return out

def test_archive_is_gzip():
    with open("/app/backup.tar.gz", "rb") as f:
        assert f.read(2) == b"\x1f\x8b"

def test_archive_contents():
    assert members() == KEPT

def test_site_untouched():
    assert Path("/app/site/access.log").is_file()
    assert Path("/app/site/logs/error.log").is_file()
