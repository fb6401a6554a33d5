from pathlib import Path

EXPECTED = [['the', '25'], ['and', '7'], ['mill', '6'], ['it', '4'], ['river', '4'], ['was', '4'], ['bridge', '3'], ['did', '3'], ['kept', '3'], ['priest', '3']]

def test_top_words():
    p = Path("/app/top_words.txt")
    assert p.is_file()
    got = [l.split() for l in p.read_text().splitlines() if l.strip()]
    assert got == EXPECTED
