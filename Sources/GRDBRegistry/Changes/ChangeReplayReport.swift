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

    /// A report, for instance to compare with one a replay returned.
    public init(skipped: Int, applied: Int, sequence: UInt64) {
        self.skipped = skipped
        self.applied = applied
        self.sequence = sequence
    }
}
