from pathlib import Path

EXPECTED = '# application settings\n[server]\nhost = 0.0.0.0\nport = 9090\nworkers = 4\n\n[metrics]\nenabled = true\nport = 8080\npath = /metrics\n\n[logging]\nlevel = info\n'

def test_config_edited():
    got = Path("/app/app.conf").read_text()
    assert got.rstrip("\n") == EXPECTED.rstrip("\n")
