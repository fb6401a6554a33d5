from pathlib import Path

def test_report_decompressed():
    p = Path("/app/report.txt")
    assert p.is_file()
    assert p.read_text() == 'region,units\nnorth,253\nsouth,616\neast,567\nwest,143\ncentral,388\n'
