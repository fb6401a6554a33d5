import os, stat

def test_mode_is_444():
    mode = stat.S_IMODE(os.stat("/app/report.txt").st_mode)
    assert mode == 0o444, oct(mode)

def test_content_unchanged():
    with open("/app/report.txt") as f:
        assert f.read() == 'Quarterly report\n================\nRevenue: 1,204,330\nCosts:     982,115\n'
