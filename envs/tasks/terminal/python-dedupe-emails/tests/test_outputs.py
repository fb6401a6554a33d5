import subprocess, sys

def run(text):
    out = subprocess.run([sys.executable, "/app/dedupe.py"], input=text,
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    return [l for l in out.stdout.splitlines()]

def test_example():
    assert run("Bob@x.org\n  alice@y.com\nbob@X.org\n") == ["bob@x.org", "alice@y.com"]

def test_blank_lines_and_order():
    text = "\n z@a.io \nY@b.io\n\n   \nz@A.IO\nx@c.io\ny@b.io\t\n"
    assert run(text) == ["z@a.io", "y@b.io", "x@c.io"]

def test_empty_input():
    assert run("") == []
