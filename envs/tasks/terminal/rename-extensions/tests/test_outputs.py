from pathlib import Path

FINAL = ['IMG_0042.jpg', 'beach.jpg', 'cat.jpg', 'city at night.jpg', 'jpeg-guide.pdf', 'notes.txt', 'old.jpeg.bak']
RENAMED = {'beach.jpeg': 'beach.jpg', 'city at night.jpeg': 'city at night.jpg', 'IMG_0042.jpeg': 'IMG_0042.jpg'}

def test_names():
    got = sorted(p.name for p in Path("/app/photos").iterdir())
    assert got == FINAL

def test_contents_preserved():
    for old, new in RENAMED.items():
        assert Path("/app/photos", new).read_text() == f"bytes of {old}\n"
    assert Path("/app/photos/old.jpeg.bak").read_text() == "bytes of old.jpeg.bak\n"
