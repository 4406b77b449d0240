import GRDB

/// A rule that a database must satisfy after every write transaction.
///
/// An invariant is SQL that must return no rows (each row returned is an
/// offending row), or a Swift check that returns descriptions of what is
/// wrong. Write it over the rows a transaction changed, and each write
/// pays for what it changed, not for the size of the table:
///
/// ```swift
/// // `changed_player` holds the rows of `player` that the transaction
/// // inserted or updated; in a full check, every row of `player`.
/// let nonNegativeScores = DatabaseInvariant.sql(
///     "nonNegativeScore", changedRowsOf: "player",
///     "SELECT id, name, score FROM changed_player WHERE score < 0")
///
/// let uniqueNames = DatabaseInvariant.sql(
///     "uniqueNamePerTeam", changedRowsOf: "player", """
///     SELECT c.team, c.name FROM changed_player AS c
///     WHERE EXISTS (
///         SELECT 1 FROM player AS p
///         WHERE p.team IS c.team AND p.name = c.name AND p.id <> c.id)
///     """)
///
/// // A rule over whole tables: run after every transaction that changed
/// // one of the tables it reads, over the whole table.
/// let teamSizes = DatabaseInvariant.sql("teamsOfAtMostFive", """
///     SELECT team FROM player GROUP BY team HAVING COUNT(*) > 5
///     """)
///
/// let swiftCheck = DatabaseInvariant.swift("noEmptyName", tables: ["player"]) { db in
///     try String.fetchAll(db, sql: "SELECT name FROM player WHERE name = '' LIMIT 1")
///         .map { _ in "a player has an empty name" }
/// }
/// ```
///
/// ## The two forms of a check
///
/// A ``RepositoryDatabase`` checks its invariants inside each checked
/// write, before the commit (the **incremental** check), and over the
/// whole database when it opens a file, after another connection wrote to
/// it, and in restores and imports (the **full** check):
///
/// - ``sql(_:changedRowsOf:_:)`` reads `changed_<table>` (one name per
///   table it lists): in the incremental check, the rows that the
///   transaction inserted or updated, found by rowid; in the full check,
///   every row. The invariant is not run at all when the transaction did
///   not change its tables. Its SQL must give the same answer for a set of
///   rows as for each of them: "no changed row breaks the rule", where the
///   rule may look up other rows (use an index for those lookups, or the
///   lookup is the table scan again).
/// - ``sql(_:_:)`` and ``swift(_:tables:_:)`` run their check as it is,
///   after every transaction that changed a table they read (the tables of
///   the SQL's statement; the `tables` of a Swift check, or every
///   transaction without them). Use them for rules over groups that a
///   deletion can break (a minimum team size, a total), which the rows
///   that remain can't tell.
///
/// Deleted rows are not in `changed_<table>`: a rule that only a deletion
/// can break needs the full form. The rows are found through SQLite's
/// update hook, which does not see `WITHOUT ROWID` tables: the full check
/// of such an invariant fails with an SQL error ("no such column: rowid"),
/// so that a repository that declares one does not open. Use the full form
/// for them.
///
/// ## Topics
///
/// ### Writing invariants
///
/// - ``sql(_:changedRowsOf:_:)``
/// - ``sql(_:changedRowsOfTables:_:)``
/// - ``sql(_:_:)``
/// - ``swift(_:tables:_:)``
///
/// ### Saying what to fix
///
/// - ``explained(_:)``
/// - ``explanation``
///
/// ### Broken invariants
///
/// - ``InvariantViolation``
public struct DatabaseInvariant: Sendable {
    /// The name reported in ``InvariantViolation``: for programs and logs.
    public var name: String

    /// What a person reads when a write breaks the invariant, reported in
    /// ``InvariantViolation/explanation``; nil unless set with
    /// ``explained(_:)``.
    public var explanation: String?

    /// The same invariant, with the sentence a person reads when a write
    /// breaks it: what to fix, in the application's words, where
    /// ``name`` is for programs.
    ///
    /// ```swift
    /// let invariant = DatabaseInvariant.sql(
    ///     "nonNegativeScore", changedRowsOf: "player",
    ///     "SELECT id, score FROM changed_player WHERE score < 0")
    ///     .explained("A score can't be negative.")
    /// ```
    public func explained(_ explanation: String) -> DatabaseInvariant {
        var invariant = self
        invariant.explanation = explanation
        return invariant
    }

    /// Runs the check: over every row when `changes` is nil, else over the
    /// rows of `changes` (returns nil when the check doesn't need to run).
    let check: @Sendable (Database, TransactionChanges?) throws -> [String]?

    /// An invariant over the rows of `tables` that each transaction
    /// inserted or updated. `sql` reads them from `changed_<table>` (for
    /// example `changed_player` for `player`), a table with the columns
    /// of `<table>`, and returns the offending rows. In a full check
    /// (opening, restores, imports, another connection's write),
    /// `changed_<table>` holds every row of the table.
    ///
    /// ```swift
    /// let invariant = DatabaseInvariant.sql(
    ///     "teamOfKnownClub", changedRowsOfTables: ["player", "club"], """
    ///     SELECT p.id FROM changed_player AS p
    ///     WHERE NOT EXISTS (SELECT 1 FROM club WHERE club.team IS p.team)
    ///     """)
    /// ```
    ///
    /// A transaction that changed none of `tables` does not run it.
    public static func sql(_ name: String, changedRowsOfTables tables: [String], _ sql: String) -> DatabaseInvariant {
        let limit = InvariantViolation.reportedRowLimit + 1
        func withChangedRows(_ source: (String) -> String) -> String {
            let definitions = tables.map { table in
                "\("changed_\(table)".quotedDatabaseIdentifier) AS (\(source(table)))"
            }
            return "WITH \(definitions.joined(separator: ", ")) SELECT * FROM (\(sql)) LIMIT \(limit)"
        }
        // `rowid` also makes a WITHOUT ROWID table, whose changes the
        // update hook never reports, fail the full check at open: never a
        // check that silently sees nothing.
        let full = withChangedRows { "SELECT * FROM \($0.quotedDatabaseIdentifier) WHERE rowid IS NOT NULL" }
        // One JSON array of rowids per table: one statement, one compile,
        // whatever the number of changed rows; `rowid IN` looks each up.
        let incremental = withChangedRows { table in
            "SELECT * FROM \(table.quotedDatabaseIdentifier) WHERE rowid IN (SELECT value FROM json_each(?))"
        }
        let keys = tables.map { $0.lowercased() }
        return DatabaseInvariant(name: name) { db, changes in
            guard let changes else {
                return try Row.fetchAll(db.cachedStatement(sql: full)).map(\.description)
            }
            guard keys.contains(where: { changes.rowIDs[$0] != nil }) else { return nil }
            let arguments = StatementArguments(keys.map { changes.jsonArrayOfRowIDs(in: $0) })
            return try Row.fetchAll(db.cachedStatement(sql: incremental), arguments: arguments).map(\.description)
        }
    }

    /// An invariant over the rows of `table` that each transaction
    /// inserted or updated, which `sql` reads from `changed_<table>`: see
    /// ``sql(_:changedRowsOfTables:_:)``.
    ///
    /// ```swift
    /// let invariant = DatabaseInvariant.sql(
    ///     "nonNegativeScore", changedRowsOf: "player",
    ///     "SELECT id, score FROM changed_player WHERE score < 0")
    /// ```
    public static func sql(_ name: String, changedRowsOf table: String, _ sql: String) -> DatabaseInvariant {
        self.sql(name, changedRowsOfTables: [table], sql)
    }

    /// An invariant that holds when `sql` returns no row. Each row returned
    /// is reported (the first few) as an offending row.
    ///
    /// ```swift
    /// let invariant = DatabaseInvariant.sql(
    ///     "teamsOfAtMostFive",
    ///     "SELECT team FROM player GROUP BY team HAVING COUNT(*) > 5")
    /// ```
    ///
    /// It runs over the whole of the tables it reads, after each
    /// transaction that changed one of them: when a rule can be checked
    /// row by row, ``sql(_:changedRowsOf:_:)`` costs what the transaction
    /// changed instead.
    public static func sql(_ name: String, _ sql: String) -> DatabaseInvariant {
        let limited = "SELECT * FROM (\(sql)) LIMIT \(InvariantViolation.reportedRowLimit + 1)"
        return DatabaseInvariant(name: name) { db, changes in
            // Cached: the check runs in every write transaction; compiling
            // the same SQL again in each one is wasted work.
            let statement = try db.cachedStatement(sql: limited)
            if let changes, !changes.touches(statement.databaseRegion) { return nil }
            return try Row.fetchAll(statement).map(\.description)
        }
    }

    /// An invariant checked by Swift code, which returns a description of
    /// each offense (empty when the invariant holds).
    ///
    /// ```swift
    /// let invariant = DatabaseInvariant.swift("atLeastOnePlayer", tables: ["player"]) { db in
    ///     try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM player") == 0 ? ["no player left"] : []
    /// }
    /// ```
    ///
    /// - parameter name: The name reported in ``InvariantViolation``.
    /// - parameter tables: The tables the check reads: a transaction that
    ///   changed none of them does not run it. Nil (the default) runs it
    ///   after every transaction.
    /// - parameter check: Returns a description of each offense, or none.
    public static func swift(
        _ name: String,
        tables: [String]? = nil,
        _ check: @escaping @Sendable (Database) throws -> [String]
    ) -> DatabaseInvariant {
        let keys = tables.map { $0.map { $0.lowercased() } }
        return DatabaseInvariant(name: name) { db, changes in
            if let changes, let keys, !keys.contains(where: { changes.rowIDs[$0] != nil }) { return nil }
            return try check(db)
        }
    }
}

/// The rows a transaction changed, by table: what the incremental check of
/// the invariants reads. Recorded by the writer's ``CommitPolicy``.
struct TransactionChanges: Sendable {
    /// Lowercased table name → rowids inserted, updated or deleted (a row
    /// changed twice appears twice: SQL's `IN` doesn't mind).
    var rowIDs: [String: [Int64]] = [:]

    var isEmpty: Bool { rowIDs.isEmpty }

    mutating func record(_ event: DatabaseEvent) {
        rowIDs[event.tableName.lowercased(), default: []].append(event.rowID)
    }

    func jsonArrayOfRowIDs(in table: String) -> String {
        guard let ids = rowIDs[table] else { return "[]" }
        return "[" + ids.lazy.map(String.init).joined(separator: ",") + "]"
    }

    /// Whether a table of `region` changed.
    func touches(_ region: DatabaseRegion) -> Bool {
        if region.isFullDatabase { return !rowIDs.isEmpty }
        // Insertions and deletions concern whole tables, whatever the
        // columns: asking with one of them tells whether the region reads
        // the table.
        return rowIDs.keys.contains { region.isModified(byEventsOfKind: .delete(tableName: $0)) }
    }
}

/// A write refused because it would break an invariant. Nothing of the
/// transaction was persisted.
public struct InvariantViolation: Error, CustomStringConvertible, Sendable, Equatable {
    static let reportedRowLimit = 5

    /// The name of the broken invariant.
    public var invariant: String

    /// What a person reads: the invariant's
    /// ``DatabaseInvariant/explanation``, nil when it has none.
    public var explanation: String?

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
    /// The violation of the first invariant that does not hold, or nil:
    /// over the whole database when `changes` is nil, else over the rows
    /// that `changes` lists. Reporting is the caller's job (see
    /// `CommitPolicy.checkInvariants`), so that events go to the
    /// database's own observer.
    func firstViolation(_ db: Database, database: String, changes: TransactionChanges? = nil) throws -> InvariantViolation? {
        for invariant in self {
            guard let offenses = try invariant.check(db, changes), !offenses.isEmpty else { continue }
            return InvariantViolation(
                invariant: invariant.name,
                explanation: invariant.explanation,
                database: database,
                offendingRows: [String](offenses.prefix(InvariantViolation.reportedRowLimit)),
                hasMoreOffendingRows: offenses.count > InvariantViolation.reportedRowLimit)
        }
        return nil
    }
}
