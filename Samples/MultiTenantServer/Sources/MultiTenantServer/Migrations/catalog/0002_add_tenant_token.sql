-- Tenants sign in with a bearer token; the catalog keeps only its SHA-256
-- (hex), never the token. NULL: no token issued yet (the operator rotates one).
ALTER TABLE tenant ADD COLUMN tokenHash TEXT;
CREATE UNIQUE INDEX tenant_on_tokenHash ON tenant(tokenHash);
