import re
from pathlib import Path

def test_total():
    text = Path("/app/total.txt").read_text().strip()
    assert re.fullmatch(r"-?\d+\.\d{2}", text), text
    assert text == '3618.59'
