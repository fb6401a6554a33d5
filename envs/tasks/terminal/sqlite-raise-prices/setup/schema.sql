CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL, price REAL NOT NULL, stock INTEGER NOT NULL);
INSERT INTO products VALUES (1, 'Dune', 'books', 9.99, 12);
INSERT INTO products VALUES (2, 'USB cable', 'electronics', 4.50, 0);
INSERT INTO products VALUES (3, 'Neuromancer', 'books', 12.40, 3);
INSERT INTO products VALUES (4, 'Desk lamp', 'home', 24.00, 7);
INSERT INTO products VALUES (5, 'Snow Crash', 'books', 15.20, 0);
INSERT INTO products VALUES (6, 'Headphones', 'electronics', 59.90, 4);
INSERT INTO products VALUES (7, 'Mug', 'home', 6.30, 0);
INSERT INTO products VALUES (8, 'Foundation', 'books', 8.80, 9);
