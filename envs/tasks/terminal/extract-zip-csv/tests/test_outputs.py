from pathlib import Path

def test_csv_dir_contents():
    d = Path("/app/csv")
    assert d.is_dir()
    assert sorted(p.name for p in d.iterdir()) == ["emea.csv", "sales.csv"]

def test_csv_content():
    assert Path("/app/csv/sales.csv").read_text() == 'month,total\njan,100\nfeb,120\n'
    assert Path("/app/csv/emea.csv").read_text() == 'country,total\nde,40\nfr,35\n'
