#!/bin/bash
sqlite3 /app/shop.db "UPDATE products SET price = ROUND(price * 1.1, 2) WHERE category = 'books';
DELETE FROM products WHERE stock = 0 AND category <> 'books';"
