from pathlib import Path

def test_active_users():
    got = [l.strip() for l in Path("/app/active_users.txt").read_text().splitlines() if l.strip()]
    assert got == ['ada', 'grace', 'barbara', 'dennis', 'guido', 'bjarne']
