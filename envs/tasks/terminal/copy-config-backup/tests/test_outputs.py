from pathlib import Path

EXPECTED = '; service configuration\n[database]\nhost = db.internal\nport = 5432\nuser = svc_reader\n\n[cache]\nenabled = true\nttl_seconds = 300\n'

def test_original_kept():
    assert Path("/app/config.ini").read_text() == EXPECTED

def test_backup_identical():
    assert Path("/app/config.ini.bak").is_file()
    assert Path("/app/config.ini.bak").read_text() == EXPECTED
