SELECT c.name AS name, SUM(o.total_cents) AS spent
FROM customers AS c
JOIN orders AS o ON o.customer_id = c.id
WHERE o.status = 'paid' AND o.placed_on >= '2024-01-01' AND o.placed_on < '2025-01-01'
GROUP BY c.id
ORDER BY spent DESC, name;
