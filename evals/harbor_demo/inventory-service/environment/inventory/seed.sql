CREATE TABLE items (
    sku TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    stock INTEGER NOT NULL,
    reorder_level INTEGER NOT NULL
);
INSERT INTO items VALUES
    ('A-100', 'hex bolt M6', 420, 100),
    ('A-101', 'hex bolt M8', 35, 80),
    ('A-102', 'washer M6', 900, 200),
    ('A-103', 'washer M8', 150, 200),
    ('B-200', 'cable tie 200mm', 12, 50),
    ('B-201', 'cable tie 300mm', 75, 50),
    ('B-202', 'heat shrink 6mm', 50, 50),
    ('C-300', 'fuse 5A', 0, 20),
    ('C-301', 'fuse 10A', 44, 20),
    ('C-302', 'relay 12V', 7, 10),
    ('D-400', 'spring washer M6', 310, 100),
    ('D-401', 'lock nut M6', 99, 100),
    ('D-402', 'lock nut M8', 260, 100);
