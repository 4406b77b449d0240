import CSQLiteSession
import Foundation
import GRDB
import GRDBSQLite

/// Records the change of one write transaction, with SQLite's session
/// extension.
///
/// Create it inside the transaction before the updates run, and finish it
/// after them, before the commit. ``finish(_:)`` increments the
/// ``ChangeSequence`` row inside the recording, so the changeset carries the
/// old and new sequence and a replay checks continuity.
///
/// ```swift
/// try dbQueue.write { db in try ChangeSequence.prepare(db) }
/// let change = try dbQueue.write { db -> TransactionChange? in
///     let recorder = try ChangeRecorder(db)
///     try db.execute(sql: "INSERT INTO player (id, name, score) VALUES (1, 'Arthur', 100)")
///     return try recorder.finish(db)
/// }
/// // change?.sequence == 1; store change?.changeset elsewhere.
/// ```
///
/// Schema changes and tables without an explicit PRIMARY KEY make
/// ``finish(_:)`` throw (SQLite 3.40's session would silently leave them
/// out of the changeset): let the error leave the write so that GRDB rolls
/// the transaction back.
///
/// Not `Sendable`: it belongs to the connection's writer queue, for one
/// transaction.
///
/// ## Topics
///
/// ### Recording
/// - ``init(_:)``
/// - ``finish(_:)``
/// - ``TransactionChange``
/// - ``ChangeRecordingError``
public final class ChangeRecorder {
    /// The C recording (session and the names of the tables it saw change),
    /// nil once finished.
    private var recording: UnsafeMutableRawPointer?
    /// The connection the session records: `finish(_:)` must get it again.
    private let connection: SQLiteConnection
    private let schemaVersion: Int32
    /// The database's sequence when the recording started: the
    /// transaction can't write it (``finish(_:)`` refuses that), so the
    /// change's is this one plus the increment.
    private let sequence: UInt64

    /// Starts recording the changes of database `main`, all its tables.
    ///
    /// Throws ``ChangeRecordingError/sequenceMissing`` when the database has
    /// no sequence table (see ``ChangeSequence/prepare(_:)``), and
    /// ``ChangeRecordingError/session(code:message:)`` with `SQLITE_MISUSE`
    /// outside a transaction (each statement would then commit apart from
    /// the sequence increment).
    public init(_ db: Database) throws {
        guard db.isInsideTransaction else {
            throw ChangeRecordingError.session(
                code: SQLITE_MISUSE, message: "a ChangeRecorder needs an open write transaction: create it inside writer.write { }")
        }
        guard let sequence = try ChangeSequence.read(db) else { throw ChangeRecordingError.sequenceMissing }
        self.sequence = sequence
        guard let connection = db.sqliteConnection else {
            throw ChangeRecordingError.session(code: SQLITE_MISUSE, message: "the connection is closed")
        }
        self.connection = connection
        schemaVersion = try db.schemaVersion()
        var recording: UnsafeMutableRawPointer?
        let code = grdbregistry_recording_start(UnsafeMutableRawPointer(connection), &recording)
        guard code == SQLITE_OK, let recording else { throw ChangeRecordingError.session(code: code) }
        self.recording = recording
    }

    deinit {
        grdbregistry_recording_end(recording)
    }

    /// Ends the recording and returns the transaction's change, or nil when
    /// the transaction changed nothing (the sequence is then left as is).
    ///
    /// When something changed, increments the sequence row first. A
    /// transaction that wrote the sequence row itself throws
    /// ``ChangeRecordingError/malformedSequence(_:)``. Throws
    /// ``ChangeRecordingError/schemaChanged(from:to:)`` when the
    /// transaction ran DDL, and
    /// ``ChangeRecordingError/tableWithoutPrimaryKey(table:)`` when it
    /// changed a table without an explicit PRIMARY KEY; the caller rolls
    /// back. The session is deleted in every case; a second call, or a call
    /// with another connection than the recorder's, throws
    /// ``ChangeRecordingError/session(code:message:)`` (`SQLITE_MISUSE`).
    public func finish(_ db: Database) throws -> TransactionChange? {
        guard let recording else {
            throw ChangeRecordingError.session(code: SQLITE_MISUSE, message: "finish(_:) was already called")
        }
        defer {
            grdbregistry_recording_end(recording)
            self.recording = nil
        }
        guard db.sqliteConnection == connection else {
            throw ChangeRecordingError.session(
                code: SQLITE_MISUSE, message: "finish(_:) got another connection than the one the recorder was created on")
        }
        let status = grdbregistry_recording_status(recording)
        guard status == SQLITE_OK else { throw ChangeRecordingError.session(code: status) }

        let newSchemaVersion = try db.schemaVersion()
        guard newSchemaVersion == schemaVersion else {
            throw ChangeRecordingError.schemaChanged(from: schemaVersion, to: newSchemaVersion)
        }
        var changedTables: [String] = []
        for index in 0..<grdbregistry_recording_table_count(recording) {
            guard let name = grdbregistry_recording_table_name(recording, index) else { continue }
            let table = String(cString: name)
            // Only the increment below may write the sequence: a transaction
            // that sets it would break the continuity replays check.
            guard table != ChangeSequence.tableName else {
                throw ChangeRecordingError.malformedSequence("the transaction wrote \(table) itself; only ChangeRecorder.finish(_:) may")
            }
            changedTables.append(table)
        }

        guard grdbregistry_recording_is_empty(recording) == 0 else {
            try Self.checkPrimaryKeys(of: changedTables, db)
            return nil
        }
        // Increment first and make the changeset once (its generation reads
        // every changed row again, so it is the costly step). Changes that
        // cancel out (an UPDATE to the same values, a row inserted then
        // deleted) leave the increment alone in it: then undo the increment.
        let bump = try db.cachedStatement(sql: "UPDATE main.\(ChangeSequence.tableName) SET sequence = sequence + ? WHERE id = 1")
        try bump.execute(arguments: [1])
        let changeset = try Self.changeset(of: recording)
        let tables: [ChangesetTable]
        do {
            tables = try ChangesetTable.tables(in: changeset)
        } catch {
            throw ChangeRecordingError.session(code: error.code)
        }
        // A table in the changeset has a primary key (the session records
        // no other); a changed table missing from it either has none, or
        // its changes cancelled out: only those are looked up.
        let described = Set(tables.map { $0.name.lowercased() })
        try Self.checkPrimaryKeys(of: changedTables.filter { !described.contains($0.lowercased()) }, db)
        guard tables.contains(where: { $0.name != ChangeSequence.tableName }) else {
            try bump.execute(arguments: [-1])
            return nil
        }
        // `sequence` comes from an SQLite integer, below UInt64.max.
        return TransactionChange(sequence: sequence + 1, changeset: changeset, schemaVersion: try ChangeSequence.schemaVersion(db))
    }

    /// Throws ``ChangeRecordingError/tableWithoutPrimaryKey(table:)`` for
    /// the first of `tables` without an explicit PRIMARY KEY.
    private static func checkPrimaryKeys(of tables: [String], _ db: Database) throws {
        for table in tables {
            let keyColumns = try Int.fetchOne(
                db.cachedStatement(sql: "SELECT count(*) FROM pragma_table_info(?, 'main') WHERE pk > 0"), arguments: [table]) ?? 0
            guard keyColumns > 0 else { throw ChangeRecordingError.tableWithoutPrimaryKey(table: table) }
        }
    }

    private static func changeset(of recording: UnsafeMutableRawPointer) throws -> Data {
        var size: Int32 = 0
        var bytes: UnsafeMutableRawPointer?
        let code = grdbregistry_recording_changeset(recording, &size, &bytes)
        defer { grdbregistry_free(bytes) }
        guard code == SQLITE_OK else { throw ChangeRecordingError.session(code: code) }
        guard let bytes, size > 0 else { return Data() }
        return Data(bytes: bytes, count: Int(size))
    }
}
