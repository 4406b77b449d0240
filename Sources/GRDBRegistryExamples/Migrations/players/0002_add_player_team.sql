-- Teams came later; existing players have none.
ALTER TABLE player ADD COLUMN team TEXT;
