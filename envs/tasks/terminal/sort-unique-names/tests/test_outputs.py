from pathlib import Path

EXPECTED = ['Amelia', 'Ava', 'Ethan', 'Felix', 'Grace', 'Harper', 'Hazel', 'Isla', 'Jack', 'Leo', 'Liam', 'Lucas', 'Mia', 'Noah', 'Nora', 'Oliver', 'Oscar', 'Ruby', 'Theo', 'Zoe']

def test_unique_sorted():
    p = Path("/app/unique_names.txt")
    assert p.is_file()
    got = [l.strip() for l in p.read_text().splitlines() if l.strip()]
    assert got == EXPECTED
