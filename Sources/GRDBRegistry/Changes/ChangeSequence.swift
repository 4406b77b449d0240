import Foundation
import GRDB

/// The sequence row: one table,
/// `grdbregistry_sequence(id INTEGER PRIMARY KEY CHECK (id = 1), sequence INTEGER NOT NULL CHECK (sequence >= 0))`
/// with one row.
///
/// Each transaction a ``ChangeRecorder`` records increments it, so the
/// sequence numbers the changes of a database in order, and
/// ``ChangeReplay`` knows which changes a copy already holds.
///
/// ```swift
/// let dbQueue = try DatabaseQueue(path: path)
/// try dbQueue.write { db in try ChangeSequence.prepare(db) }
/// let sequence = try dbQueue.read { db in try ChangeSequence.current(db) } // 0
/// ```
///
/// ## Topics
///
/// ### The table
/// - ``tableName``
/// - ``prepare(_:)``
///
/// ### Reading
/// - ``current(_:)``
public enum ChangeSequence {
    /// `"grdbregistry_sequence"`.
    public static let tableName = "grdbregistry_sequence"

    /// Creates the table and its row (sequence 0) when missing; does nothing
    /// when present (a malformed table throws
    /// ``ChangeRecordingError/malformedSequence(_:)``).
    ///
    /// This is DDL: call it outside recorded transactions, for instance when
    /// opening the database.
    public static func prepare(_ db: Database) throws {
        if try read(db) != nil { return }
        // Unqualified, a CREATE TABLE goes to `main`; SQLite keeps its text
        // as written, which read(_:) then recognizes.
        try db.execute(sql: definition)
        try db.execute(sql: "INSERT INTO main.\(tableName) (id, sequence) VALUES (1, 0)")
    }

    /// The table's definition, as ``prepare(_:)`` creates it and SQLite
    /// keeps it in `sqlite_master` (this text, to the byte, is the one of
    /// every release so far).
    static let definition = """
        CREATE TABLE \(tableName) (
          id INTEGER PRIMARY KEY CHECK (id = 1),
          sequence INTEGER NOT NULL CHECK (sequence >= 0))
        """

    /// The version of the database's own schema, the one recorded changes
    /// carry (``TransactionChange/schemaVersion``): a digest of the schema's
    /// SQL, without the entries of SQLite (`sqlite_%`) and of Litestream
    /// (`_litestream_%`, which it creates when it starts replicating a
    /// file). Only a change of the database's schema (a migration, this
    /// table's creation) changes it, unlike `PRAGMA schema_version`, which
    /// every start of Litestream's replication of a restored file bumps.
    ///
    /// ```swift
    /// let version = try dbQueue.read { db in try ChangeSequence.schemaVersion(db) }
    /// ```
    public static func schemaVersion(_ db: Database) throws -> Int32 {
        // Every recorded transaction reads it: a cached statement, and the
        // text's bytes hashed where SQLite holds them (no String made).
        let entries = try Row.fetchCursor(db.cachedStatement(sql: """
            SELECT type, name, tbl_name, sql FROM main.sqlite_master
            WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_litestream\\_%' ESCAPE '\\'
            ORDER BY type, name
            """))
        // FNV-1a: a collision would only skip a catch-up of the replica,
        // and the replay of a change onto a base of another schema fails
        // on the tables it touches (ChangeReplayError.schemaMismatch).
        var hash: UInt32 = 2_166_136_261
        while let row = try entries.next() {
            for index in 0..<4 {
                try row.withUnsafeData(atIndex: index) { data in
                    guard let data else { return }
                    for byte in data { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
                }
                hash = (hash ^ 0) &* 16_777_619
            }
        }
        return Int32(bitPattern: hash)
    }

    /// The database's sequence: 0 when the table is missing.
    ///
    /// A malformed table or row (other columns, no row or several,
    /// a negative or non-integer sequence) throws
    /// ``ChangeRecordingError/malformedSequence(_:)``.
    public static func current(_ db: Database) throws -> UInt64 {
        try read(db) ?? 0
    }

    /// The sequence, or nil when the table is missing.
    static func read(_ db: Database) throws -> UInt64? {
        // Every recorded transaction reads it twice (at its start and in
        // its increment): cached statements, and the table's shape read
        // from its definition. A definition of another text (created by
        // hand) has its columns checked one by one: pragma_table_info
        // compiles a PRAGMA at each run.
        let entry = try Row.fetchOne(db.cachedStatement(sql: """
            SELECT sql FROM main.sqlite_master WHERE type = 'table' AND name = '\(tableName)' COLLATE NOCASE
            """))
        guard let entry else { return nil }
        if entry[0] as String? != definition {
            let columns = try Row.fetchAll(db, sql: """
                SELECT name, pk FROM pragma_table_info(?, 'main') ORDER BY cid
                """, arguments: [tableName]).map { "\($0[0] as String? ?? "?")\(($0[1] as Int? ?? 0) > 0 ? " PRIMARY KEY" : "")" }
            guard columns == ["id PRIMARY KEY", "sequence"] else {
                throw ChangeRecordingError.malformedSequence("columns are \(columns), expected [id PRIMARY KEY, sequence]")
            }
        }
        let rows = try Row.fetchAll(db.cachedStatement(sql: "SELECT id, sequence, typeof(sequence) AS type FROM main.\(tableName) LIMIT 2"))
        guard rows.count == 1, let row = rows.first else {
            throw ChangeRecordingError.malformedSequence(rows.isEmpty ? "the table has no row" : "the table has several rows")
        }
        // Int64.fromDatabaseValue, not `row[...] as Int64?`: GRDB's
        // subscript stops the process on a value of another type.
        guard Int64.fromDatabaseValue(row["id"]) == 1 else {
            throw ChangeRecordingError.malformedSequence("the row's id is \(row["id"] as DatabaseValue), expected 1")
        }
        guard String.fromDatabaseValue(row["type"]) == "integer", let value = Int64.fromDatabaseValue(row["sequence"]), value >= 0 else {
            throw ChangeRecordingError.malformedSequence("the sequence is \(row["sequence"] as DatabaseValue), expected an integer >= 0")
        }
        return UInt64(value)
    }
}
