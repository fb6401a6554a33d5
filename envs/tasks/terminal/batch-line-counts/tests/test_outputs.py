from pathlib import Path

EXPECTED = [('alpha.txt', 3), ('beta.txt', 1), ('delta.txt', 0), ('gamma notes.txt', 5)]

def test_csv():
    lines = [l.strip() for l in Path("/app/line_counts.csv").read_text().splitlines() if l.strip()]
    assert lines[0] == "file,lines"
    rows = []
    for l in lines[1:]:
        name, n = l.rsplit(",", 1)
        rows.append((name, int(n)))
    assert rows == EXPECTED
