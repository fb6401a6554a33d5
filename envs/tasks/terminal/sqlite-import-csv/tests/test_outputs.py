import sqlite3

EXPECTED = [(1, 'The Pragmatic Programmer', 'Hunt, Andrew', 1999), (2, 'Structure and Interpretation of Computer Programs', 'Abelson, Harold', 1985), (3, 'The C Programming Language', 'Kernighan, Brian', 1978), (4, 'Design Patterns', 'Gamma, Erich', 1994), (5, 'Refactoring', 'Fowler, Martin', 1999), (6, 'Clean Code', 'Martin, Robert', 2008), (7, 'Code Complete', 'McConnell, Steve', 1993), (8, 'The Mythical Man-Month', 'Brooks, Fred', 1975)]

def rows(sql):
    con = sqlite3.connect("file:/app/library.db?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()

def test_rows():
    assert [tuple(r) for r in rows("SELECT id, title, author, year FROM books ORDER BY id")] == EXPECTED

def test_types():
    assert rows("SELECT DISTINCT typeof(id), typeof(year) FROM books") == [("integer", "integer")]
