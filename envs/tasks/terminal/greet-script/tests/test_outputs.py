import os, subprocess

def run(*args):
    return subprocess.run(["/app/greet.sh", *args], capture_output=True, text=True, timeout=10)

def test_executable():
    assert os.access("/app/greet.sh", os.X_OK)

def test_greets():
    for name in ("Ada", "Grace Hopper", "x-9"):
        out = run(name)
        assert out.returncode == 0
        assert out.stdout.strip() == f"Hello, {name}!"

def test_usage_error():
    out = run()
    assert out.returncode == 1
    assert out.stdout.strip() == ""
    assert "Usage: greet.sh NAME" in out.stderr
