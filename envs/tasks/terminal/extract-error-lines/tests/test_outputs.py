from pathlib import Path

EXPECTED = ['2024-03-14T10:00:04Z [ERROR] failed to parse payload', '2024-03-14T10:00:06Z [ERROR] database connection refused', '2024-03-14T10:00:09Z [ERROR] failed to parse payload', '2024-03-14T10:00:12Z [ERROR] null pointer in report generator', '2024-03-14T10:00:15Z [ERROR] timeout talking to auth service', '2024-03-14T10:00:17Z [ERROR] database connection refused', '2024-03-14T10:00:18Z [ERROR] database connection refused', '2024-03-14T10:00:20Z [ERROR] null pointer in report generator', '2024-03-14T10:00:26Z [ERROR] database connection refused', '2024-03-14T10:00:48Z [ERROR] timeout talking to auth service', '2024-03-14T10:00:50Z [ERROR] failed to parse payload', '2024-03-14T10:00:58Z [ERROR] null pointer in report generator', '2024-03-14T10:01:10Z [ERROR] timeout talking to auth service', '2024-03-14T10:01:15Z [ERROR] database connection refused']

def test_errors_extracted():
    p = Path("/app/errors.log")
    assert p.is_file()
    got = [l for l in p.read_text().splitlines() if l.strip()]
    assert got == EXPECTED
