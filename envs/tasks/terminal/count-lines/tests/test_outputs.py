from pathlib import Path

def test_count_file():
    assert Path("/app/count.txt").is_file()
    assert Path("/app/count.txt").read_text().strip() == "137"
