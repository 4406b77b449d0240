-- Tenants move between servers (POST /admin/tenants/{id}/move). On the
-- source, moveState is 'moving' while the tenant's writes are frozen, then
-- 'moved' once the target acknowledged it, and moveTarget is the target's
-- base URL; on the target, an imported tenant is 'imported'. moveID names
-- the move, so that a retried or resumed move is recognised.
ALTER TABLE tenant ADD COLUMN moveID TEXT;
ALTER TABLE tenant ADD COLUMN moveState TEXT CHECK (moveState IN ('moving', 'moved', 'imported'));
ALTER TABLE tenant ADD COLUMN moveTarget TEXT;
