from pathlib import Path

def test_top_customer():
    line = Path("/app/top_customer.txt").read_text().strip()
    name, amount = line.rsplit(",", 1)
    assert name.strip() == 'Umbrella'
    assert amount.strip() == '6925.52'
