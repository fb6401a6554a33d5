import json, subprocess, sys, tempfile, os

def run(text):
    with tempfile.NamedTemporaryFile("w", suffix=".env", delete=False) as f:
        f.write(text)
    try:
        out = subprocess.run([sys.executable, "/app/parse_env.py", f.name],
                             capture_output=True, text=True, timeout=10)
    finally:
        os.unlink(f.name)
    assert out.returncode == 0, out.stderr
    return out.stdout

def test_realistic_file():
    text = ("# database\n"
            "DB_URL = postgres://u:p@h/db?sslmode=require\n"
            "\n"
            "   # indented comment\n"
            "NAME=\"My App\"\n"
            "TOKEN='a=b=c'\n"
            "EMPTY=\n"
            "  DEBUG  =  true  \n")
    out = run(text)
    data = json.loads(out)
    assert data == {"DB_URL": "postgres://u:p@h/db?sslmode=require", "NAME": "My App",
                    "TOKEN": "a=b=c", "EMPTY": "", "DEBUG": "true"}
    assert list(json.loads(out)) == sorted(data)

def test_quotes_only_stripped_when_matching():
    data = json.loads(run("A=\"half\nB='x\"\nC=\"\"\n"))
    assert data == {"A": "\"half", "B": "'x\"", "C": ""}
