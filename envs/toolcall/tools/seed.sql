-- The state every bundled tool-call episode starts from (tasks may add rows with `setup_sql`).
-- "Today" is 2025-06-01 (a Sunday); the calendar holds the week of Monday 2025-06-02.

CREATE TABLE products (sku TEXT PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL,
                       price REAL NOT NULL, stock INTEGER NOT NULL);
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL, city TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
                     status TEXT NOT NULL, created TEXT NOT NULL);
CREATE TABLE order_items (order_id INTEGER NOT NULL REFERENCES orders(id), sku TEXT NOT NULL,
                          quantity INTEGER NOT NULL, unit_price REAL NOT NULL);
CREATE TABLE events (id INTEGER PRIMARY KEY, title TEXT NOT NULL, date TEXT NOT NULL, start TEXT NOT NULL,
                     "end" TEXT NOT NULL, location TEXT NOT NULL DEFAULT '');
CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT NOT NULL UNIQUE, body TEXT NOT NULL,
                    tags TEXT NOT NULL DEFAULT '');

INSERT INTO products VALUES
  ('KB-101', 'Mechanical Keyboard',        'peripherals', 89.00,  14),
  ('MS-210', 'Wireless Mouse',             'peripherals', 25.50,  40),
  ('WC-720', '1080p Webcam',               'peripherals', 64.00,   0),
  ('MN-270', '27-inch Monitor',            'displays',   249.99,   6),
  ('MN-240', '24-inch Monitor',            'displays',   179.00,   0),
  ('HD-300', 'Noise-Cancelling Headphones','audio',      199.00,   9),
  ('SP-120', 'Bluetooth Speaker',          'audio',       59.90,  22),
  ('EB-050', 'Wireless Earbuds',           'audio',       79.00,   3),
  ('CB-010', 'USB-C Cable (2 m)',          'accessories',  9.99, 150),
  ('HB-400', 'USB-C Hub',                  'accessories', 39.00,  12),
  ('LS-900', 'Laptop Stand',               'accessories', 34.50,  18),
  ('DK-500', 'Docking Station',            'accessories',159.00,   4);

INSERT INTO customers VALUES
  (1, 'Alice Moreau',   'alice@example.com', 'Lyon'),
  (2, 'Bruno Silva',    'bruno@example.com', 'Porto'),
  (3, 'Chen Wei',       'chen@example.com',  'Taipei'),
  (4, 'Dana Kowalski',  'dana@example.com',  'Krakow'),
  (5, 'Emeka Obi',      'emeka@example.com', 'Lagos'),
  (6, 'Farah Haddad',   'farah@example.com', 'Amman');

INSERT INTO orders VALUES
  (1, 1, 'shipped',   '2025-05-20'),
  (2, 2, 'pending',   '2025-05-26'),
  (3, 1, 'pending',   '2025-05-28'),
  (4, 4, 'cancelled', '2025-05-29'),
  (5, 3, 'pending',   '2025-05-30');

INSERT INTO order_items VALUES
  (1, 'KB-101', 1,  89.00), (1, 'CB-010', 2,   9.99),
  (2, 'MN-270', 1, 249.99),
  (3, 'HD-300', 1, 199.00), (3, 'SP-120', 2,  59.90),
  (4, 'EB-050', 1,  79.00),
  (5, 'MS-210', 3,  25.50), (5, 'HB-400', 1,  39.00);

INSERT INTO events VALUES
  (1, 'Team standup',        '2025-06-02', '09:00', '09:15', 'Room A'),
  (2, 'Design review',       '2025-06-02', '14:00', '15:00', 'Room B'),
  (3, 'Lunch with Priya',    '2025-06-03', '12:30', '13:30', 'Cafe Nord'),
  (4, 'Dentist',             '2025-06-04', '08:30', '09:30', 'Clinic'),
  (5, 'Team standup',        '2025-06-04', '09:00', '09:15', 'Room A'),
  (6, 'Quarterly planning',  '2025-06-05', '10:00', '12:00', 'Room C'),
  (7, '1:1 with Sam',        '2025-06-05', '15:00', '15:30', 'Room A'),
  (8, 'Gym',                 '2025-06-06', '18:00', '19:00', 'Gym');

INSERT INTO notes VALUES
  (1, 'Shopping list',         'milk, eggs, coffee',                                  'personal'),
  (2, 'Project Atlas kickoff', 'Kickoff on 2025-06-05. Owner: Sam. Budget: 12000 EUR.', 'work,atlas'),
  (3, 'Wifi',                  'Guest network: nextstate-guest',                      'home'),
  (4, 'Book ideas',            'Dune; The Left Hand of Darkness',                     'personal,reading'),
  (5, 'Atlas risks',           'Vendor delay; unclear scope',                         'work,atlas');
