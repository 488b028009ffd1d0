CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT NOT NULL);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    placed_on TEXT NOT NULL,  -- ISO date
    status TEXT NOT NULL,     -- 'paid', 'refunded' or 'pending'
    total_cents INTEGER NOT NULL
);
