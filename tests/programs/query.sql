-- Program 3 of tests/programs: a join, aggregates, a temporary table.
.mode list
SELECT count(*), sum(amount) FROM orders;
SELECT c.city, count(o.id), sum(o.amount), max(o.note)
  FROM customers c JOIN orders o ON o.customer = c.id
  GROUP BY c.city ORDER BY sum(o.amount) DESC LIMIT 10;
CREATE TEMP TABLE top AS
  SELECT c.name, sum(o.amount) AS total FROM customers c JOIN orders o ON o.customer = c.id
  GROUP BY c.id ORDER BY total DESC, c.name LIMIT 100;
SELECT count(*), min(total), max(total), group_concat(name, ',') FROM (SELECT * FROM top LIMIT 5);
