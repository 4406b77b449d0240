import GRDB

extension PlayerRepository {
    /// Changes the name and/or the score of a player in one checked
    /// transaction; returns nil if there is no such player.
    ///
    /// Both changes commit together or not at all: when the new values break
    /// an invariant, nothing changes, not even the field that was valid.
    ///
    /// ```swift
    /// let players = try PlayerRepository(path: "data/players.sqlite")
    /// let arthur = try await players.add(name: "Arthur", score: 10)
    /// try await players.update(arthur.id!, name: "Arthur II", score: 20)
    /// ```
    ///
    /// - throws: ``InvariantViolation`` (`nonNegativeScore`, `uniqueNamePerTeam`).
    @discardableResult
    public func update(_ id: Int64, name: String? = nil, score: Int? = nil) async throws -> Player? {
        try await database.write { db in
            guard var player = try Player.fetchOne(db, key: id) else { return nil }
            if let name { player.name = name }
            if let score { player.score = score }
            try player.update(db)
            return player
        }
    }
}
