-- The catalog lists tenants; each tenant has its own database.
CREATE TABLE tenant (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    encrypted BOOLEAN NOT NULL DEFAULT 0,
    createdAt DATETIME
);
