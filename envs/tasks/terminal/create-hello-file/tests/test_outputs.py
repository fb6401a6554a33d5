from pathlib import Path

def test_hello_file_exists():
    assert Path("/app/hello.txt").is_file()

def test_hello_file_content():
    text = Path("/app/hello.txt").read_text()
    assert text.strip() == "Hello, NextState!"
    assert len(text.strip().splitlines()) == 1
