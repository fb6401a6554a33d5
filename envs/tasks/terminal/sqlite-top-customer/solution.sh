#!/bin/bash
sqlite3 /app/store.db "SELECT c.name || ',' || printf('%.2f', SUM(o.amount_cents) / 100.0)
  FROM orders o JOIN customers c ON c.id = o.customer_id
  WHERE o.status = 'complete'
  GROUP BY c.id ORDER BY SUM(o.amount_cents) DESC LIMIT 1;" > /app/top_customer.txt
