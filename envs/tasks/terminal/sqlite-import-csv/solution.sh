#!/bin/bash
python3 - <<'EOF'
import csv, sqlite3
con = sqlite3.connect("/app/library.db")
con.execute("CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT NOT NULL, "
            "author TEXT NOT NULL, year INTEGER NOT NULL)")
with open("/app/books.csv", newline="") as f:
    con.executemany("INSERT INTO books VALUES (?, ?, ?, ?)",
                    [(int(r["id"]), r["title"], r["author"], int(r["year"])) for r in csv.DictReader(f)])
con.commit()
con.close()
EOF
