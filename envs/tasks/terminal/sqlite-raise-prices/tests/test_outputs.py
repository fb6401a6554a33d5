import sqlite3

EXPECTED = [(1, 'Dune', 'books', 10.99, 12), (3, 'Neuromancer', 'books', 13.64, 3), (4, 'Desk lamp', 'home', 24.0, 7), (5, 'Snow Crash', 'books', 16.72, 0), (6, 'Headphones', 'electronics', 59.9, 4), (8, 'Foundation', 'books', 9.68, 9)]

def test_products():
    con = sqlite3.connect("file:/app/shop.db?mode=ro", uri=True)
    got = con.execute("SELECT id, name, category, price, stock FROM products ORDER BY id").fetchall()
    con.close()
    assert [r[0] for r in got] == [r[0] for r in EXPECTED]
    for g, e in zip(got, EXPECTED):
        assert g[1:3] == e[1:3] and g[4] == e[4], g
        assert abs(g[3] - e[3]) < 0.0001, (g, e)
