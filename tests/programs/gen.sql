-- Program 3 of tests/programs: the database the sqlite3 shell queries.
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer INTEGER REFERENCES customers(id),
                     amount INTEGER, note TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000)
INSERT INTO customers SELECT x, 'customer-' || x, 'city-' || (x % 23) FROM c;
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 8000)
INSERT INTO orders SELECT x, 1 + (x * 7919) % 3000, (x * 104729) % 1000, printf('note %08d', x) FROM c;
CREATE INDEX orders_customer ON orders(customer);
