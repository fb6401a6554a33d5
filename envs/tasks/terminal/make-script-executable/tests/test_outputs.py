import os, stat, subprocess

def test_owner_can_execute():
    mode = os.stat("/app/run.sh").st_mode
    assert mode & stat.S_IXUSR, oct(mode)

def test_script_runs():
    out = subprocess.run(["/app/run.sh"], capture_output=True, text=True)
    assert out.returncode == 0
    assert out.stdout.strip() == "run.sh: ok"
