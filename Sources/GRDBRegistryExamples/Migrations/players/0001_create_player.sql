-- Players of one tenant.
CREATE TABLE player (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    score INTEGER NOT NULL DEFAULT 0
);
