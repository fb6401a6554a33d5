import subprocess, sys, tempfile, os

def run(csv_text):
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        f.write(csv_text)
    try:
        out = subprocess.run([sys.executable, "/app/total.py", f.name],
                             capture_output=True, text=True, timeout=10)
    finally:
        os.unlink(f.name)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()

def test_sample():
    assert run(open("/app/sample.csv").read()) == "140.49"

def test_other_column_order():
    text = "amount,status,note\n10.25,paid,a\n5,paid,\"b, with comma\"\n99,void,c\n0.10,paid,d\n"
    assert run(text) == "15.35"

def test_no_paid_rows():
    assert run("status,amount\npending,3.00\n") == "0.00"
