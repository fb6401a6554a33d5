import subprocess, sys, tempfile, os

def run(text):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(text)
    try:
        out = subprocess.run([sys.executable, "/app/stats.py", f.name],
                             capture_output=True, text=True, timeout=10)
    finally:
        os.unlink(f.name)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()

def test_example():
    assert run("4\n10.5\n\n-2\n") == "count=3 min=-2 max=10.5 mean=4.17"

def test_more_numbers():
    assert run("7\n3\n\n\n12\n1\n2\n") == "count=5 min=1 max=12 mean=5.00"

def test_single_value():
    assert run("-3.5\n") == "count=1 min=-3.5 max=-3.5 mean=-3.50"
