from pathlib import Path

def test_report():
    lines = [l.strip() for l in Path("/app/mem_report.txt").read_text().splitlines() if l.strip()]
    assert lines == ["top_pid=1388", "postgres_rss_kib=395812"]
