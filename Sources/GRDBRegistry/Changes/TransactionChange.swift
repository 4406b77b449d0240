import Foundation

/// One write transaction's change: the sequence number the transaction gave
/// the database, and SQLite's changeset of it.
///
/// A ``ChangeRecorder`` makes one; ``ChangeReplay`` applies a list of them to
/// another copy of the database. The changeset carries the update of the
/// ``ChangeSequence`` row from `sequence - 1` to `sequence`, so a replay onto
/// a database that is not exactly at `sequence - 1` conflicts instead of
/// applying out of turn.
///
/// ```swift
/// let change = try dbQueue.write { db -> TransactionChange? in
///     let recorder = try ChangeRecorder(db)
///     try db.execute(sql: "UPDATE player SET score = 10 WHERE id = 1")
///     return try recorder.finish(db)
/// }
/// if let change {
///     print(change.sequence, change.changeset.count, change.schemaVersion)
/// }
/// ```
public struct TransactionChange: Sendable, Hashable {
    /// The database's ``ChangeSequence`` after the transaction.
    public let sequence: UInt64
    /// SQLite's changeset (session extension format) of the transaction.
    public let changeset: Data
    /// The version of the application's schema the changeset describes
    /// (``ChangeSequence/schemaVersion(_:)``: a digest that only a
    /// migration changes).
    public let schemaVersion: Int32

    /// A change, for instance read back from where it was stored.
    public init(sequence: UInt64, changeset: Data, schemaVersion: Int32) {
        self.sequence = sequence
        self.changeset = changeset
        self.schemaVersion = schemaVersion
    }
}
