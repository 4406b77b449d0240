import GRDB

/// A player of a team: the record of ``PlayerRepository``.
public struct Player: Codable, Sendable, Equatable, Hashable, FetchableRecord, MutablePersistableRecord {
    /// The row id; nil until the player is inserted.
    public var id: Int64?
    /// The name, unique in a team (invariant `uniqueNamePerTeam`).
    public var name: String
    /// The score, never negative (invariant `nonNegativeScore`).
    public var score: Int
    /// The team, if any.
    public var team: String?

    /// A player, not inserted yet.
    public init(id: Int64? = nil, name: String, score: Int = 0, team: String? = nil) {
        self.id = id
        self.name = name
        self.score = score
        self.team = team
    }

    /// Sets ``id`` after an insert.
    public mutating func didInsert(_ inserted: InsertionSuccess) {
        id = inserted.rowID
    }
}
