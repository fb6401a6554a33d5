from pathlib import Path

EXPECTED = [('2024-01', '1439.13'), ('2024-02', '3351.53'), ('2024-03', '2173.60'), ('2024-04', '0.00'), ('2024-05', '2410.26'), ('2024-06', '2469.24')]

def test_report():
    lines = [l.strip() for l in Path("/app/monthly_revenue.csv").read_text().splitlines() if l.strip()]
    assert lines[0].replace(" ", "") == "month,revenue"
    rows = [tuple(x.strip() for x in l.split(",")) for l in lines[1:]]
    assert rows == EXPECTED
