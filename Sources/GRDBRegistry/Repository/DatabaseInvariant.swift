import GRDB

/// A rule that a database must satisfy after every write transaction.
///
/// An invariant is either SQL that must return no rows (each row returned
/// is an offending row), or a Swift check that returns descriptions of
/// what is wrong:
///
/// ```swift
/// let nonNegativeScores = DatabaseInvariant.sql(
///     "nonNegativeScore",
///     "SELECT id, name, score FROM player WHERE score < 0")
///
/// let teamSizes = DatabaseInvariant.swift("teamsOfAtMostFive") { db in
///     try String.fetchAll(db, sql: "SELECT team FROM player GROUP BY team HAVING COUNT(*) > 5")
///         .map { "team \($0) has more than five players" }
/// }
/// ```
///
/// A ``RepositoryDatabase`` checks its invariants before each commit, and
/// once when it opens a database.
public struct DatabaseInvariant: Sendable {
    /// The name reported in ``InvariantViolation``.
    public var name: String

    let check: @Sendable (Database) throws -> [String]

    /// An invariant that holds when `sql` returns no row. Each row returned
    /// is reported (the first few) as an offending row.
    public static func sql(_ name: String, _ sql: String) -> DatabaseInvariant {
        let limited = "SELECT * FROM (\(sql)) LIMIT \(InvariantViolation.reportedRowLimit + 1)"
        return DatabaseInvariant(name: name) { db in
            // Cached: the check runs in every write transaction; compiling
            // the same SQL again in each one is wasted work.
            let rows = try Row.fetchAll(db.cachedStatement(sql: limited))
            return rows.map { $0.description }
        }
    }

    /// An invariant checked by Swift code, which returns a description of
    /// each offense (empty when the invariant holds).
    public static func swift(_ name: String, _ check: @escaping @Sendable (Database) throws -> [String]) -> DatabaseInvariant {
        DatabaseInvariant(name: name, check: check)
    }
}

/// A write refused because it would break an invariant. Nothing of the
/// transaction was persisted.
public struct InvariantViolation: Error, CustomStringConvertible, Sendable, Equatable {
    static let reportedRowLimit = 5

    /// The name of the broken invariant.
    public var invariant: String

    /// The database, for messages (its repository's name, or path).
    public var database: String

    /// The first few offending rows (or descriptions).
    public var offendingRows: [String]

    /// Whether more rows offend than ``offendingRows`` lists.
    public var hasMoreOffendingRows: Bool

    public var description: String {
        let more = hasMoreOffendingRows ? " (and more)" : ""
        return "Invariant \(invariant) of \(database) violated by \(offendingRows.joined(separator: "; "))\(more). The transaction was rolled back."
    }
}

extension [DatabaseInvariant] {
    /// The violation of the first invariant that does not hold, or nil.
    /// Reporting is the caller's job (see `CommitPolicy.checkInvariants`),
    /// so that events go to the database's own observer.
    func firstViolation(_ db: Database, database: String) throws -> InvariantViolation? {
        for invariant in self {
            let offenses = try invariant.check(db)
            if !offenses.isEmpty {
                return InvariantViolation(
                    invariant: invariant.name,
                    database: database,
                    offendingRows: [String](offenses.prefix(InvariantViolation.reportedRowLimit)),
                    hasMoreOffendingRows: offenses.count > InvariantViolation.reportedRowLimit)
            }
        }
        return nil
    }
}
