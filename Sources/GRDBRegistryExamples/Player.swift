import GRDB

/// A player of a team: the record of ``PlayerRepository``.
public struct Player: Codable, Sendable, Equatable, Hashable, FetchableRecord, MutablePersistableRecord {
    public var id: Int64?
    public var name: String
    public var score: Int
    public var team: String?

    public init(id: Int64? = nil, name: String, score: Int = 0, team: String? = nil) {
        self.id = id
        self.name = name
        self.score = score
        self.team = team
    }

    public mutating func didInsert(_ inserted: InsertionSuccess) {
        id = inserted.rowID
    }
}
