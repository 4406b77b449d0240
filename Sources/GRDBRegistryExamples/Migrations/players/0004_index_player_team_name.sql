-- The uniqueNamePerTeam invariant looks each changed player's name up in
-- its team: without this index, every write would scan the table.
CREATE INDEX player_on_team_name ON player(team, name);
