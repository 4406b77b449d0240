/// A step of every write of a ``ManagedDatabase``: a claim taken before
/// the transaction, and an acknowledgement awaited after its commit,
/// before ``ManagedDatabase/write(_:)-6ft3j`` returns.
///
/// A database that must not answer a write before something outside it
/// has the write (a replica, for durable acknowledgements) is opened with
/// one (``ManagedDatabase/init(path:name:connection:configuration:connections:checks:acknowledgement:checkpointOnClose:onEvent:tracer:)``,
/// ``TenantOpening/acknowledgement``): every write then waits for it, and
/// no caller can forget to.
///
/// ```swift
/// /// Answers a write once a copy of the database has it.
/// struct CopiedWrites: WriteAcknowledgement {
///     let copies: BackupSchedule
///
///     func claim() async throws -> Int {
///         // Refuse before anything is written: the copies are stopped.
///         guard copies.isRunning else { throw CopyError.stopped }
///         return copies.generation
///     }
///
///     func acknowledge(_ generation: Int, change: TransactionChange?) async throws {
///         try await copies.waitForCopy(after: generation)
///     }
/// }
///
/// let notes = try ManagedDatabase(path: "notes.sqlite", acknowledgement: CopiedWrites(copies: schedule))
/// try await notes.write { db in try db.execute(sql: "INSERT INTO note DEFAULT VALUES") }
/// // Returns once the copy has the note.
/// ```
///
/// - **Before the transaction**, ``claim()`` may refuse the write by
///   throwing: nothing is written, and the write throws that error as is.
/// - **After the commit**, ``acknowledge(_:change:)`` gets the claim back. When it
///   throws, the write throws
///   ``ManagedDatabaseError/notAcknowledged(database:cause:)``: the
///   transaction committed, but is not acknowledged; its outcome is
///   unknown to the caller, who must read before retrying. A write never
///   returns unacknowledged.
/// - A transaction that rolls back (its error, an invariant, a refusal at
///   commit) is not acknowledged: its claim is dropped.
/// - The synchronous `write` of a ``ManagedDatabase`` can't wait: a
///   database with an acknowledgement refuses it with
///   ``ManagedDatabaseError/synchronousWriteRefused(database:)``, before
///   anything is written. Its commits must go through its writes: one
///   made on ``ManagedDatabase/writer`` directly is rolled back with
///   ``DatabaseRepositoryError/uncheckedWrite(database:)``.
///
/// - **Recording changes.** An acknowledgement that must hand the change
///   itself to durable storage (a durable tail: a few bytes per write
///   instead of a copy of the database) says so with ``recordsChanges``.
///   Each write transaction then records its change with a
///   ``ChangeRecorder``, gives the database its next sequence number
///   (``ChangeSequence``), and ``acknowledge(_:change:)`` gets the
///   ``TransactionChange``; nil for a transaction that changed nothing. A
///   transaction whose change can't be recorded (a schema change, a table
///   without a primary key) rolls back with its
///   ``ChangeRecordingError``: nothing a recorded database acknowledges
///   is missing from its changes.
///
/// Both methods run on the writing task, outside the writer's queue:
/// while one waits, other writes of the database go on, and a
/// ``ManagedDatabase/freezeWrites(timeout:)`` does not wait for it.
///
/// ## Topics
///
/// ### Acknowledging writes
///
/// - ``claim()``
/// - ``acknowledge(_:change:)``
/// - ``Claim``
///
/// ### Recording each transaction's change
///
/// - ``recordsChanges``
/// - ``TransactionChange``
/// - ``AcknowledgementFailure``
public protocol WriteAcknowledgement: Sendable {
    /// What a write takes before its transaction, and hands back to
    /// ``acknowledge(_:change:)`` once it committed.
    associatedtype Claim: Sendable

    /// Whether each write transaction records its change for
    /// ``acknowledge(_:change:)``; false unless an acknowledgement says so.
    /// Read at every write.
    var recordsChanges: Bool { get }

    /// Called before each write's transaction: throw to refuse the write
    /// (nothing is written; the write throws this error).
    func claim() async throws -> Claim

    /// Called after each write's commit, with the claim it took: returns
    /// once the write is acknowledged. Throw when it can't be: the write
    /// throws ``ManagedDatabaseError/notAcknowledged(database:cause:)``.
    ///
    /// - parameter claim: What ``claim()`` returned before the transaction.
    /// - parameter change: With ``recordsChanges``, the committed
    ///   transaction's change, nil when it changed nothing; always nil
    ///   otherwise.
    func acknowledge(_ claim: Claim, change: TransactionChange?) async throws
}

extension WriteAcknowledgement {
    /// False: no change is recorded.
    public var recordsChanges: Bool { false }
}
