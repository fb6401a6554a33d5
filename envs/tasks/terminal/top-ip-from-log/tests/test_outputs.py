from pathlib import Path

def test_top_ip():
    parts = Path("/app/top_ip.txt").read_text().split()
    assert parts == ['10.0.0.7', '80']
