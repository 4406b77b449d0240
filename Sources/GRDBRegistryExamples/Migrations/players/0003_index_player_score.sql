-- Leaderboards sort by score.
CREATE INDEX player_on_score ON player(score);
