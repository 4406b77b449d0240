/// What ``ChangeReplay/apply(_:to:)`` did.
///
/// ```swift
/// let report = try dbQueue.write { db in try ChangeReplay.apply(changes, to: db) }
/// print("skipped \(report.skipped), applied \(report.applied), now at \(report.sequence)")
/// ```
public struct ChangeReplayReport: Sendable, Equatable {
    /// Changes the database already held (sequence at or below its own).
    public let skipped: Int
    /// Changes applied.
    public let applied: Int
    /// The database's ``ChangeSequence`` after the replay.
    public let sequence: UInt64
}
