/// Why a committed write was not acknowledged: the error its
/// ``WriteAcknowledgement`` threw, carried by
/// ``ManagedDatabaseError/notAcknowledged(database:cause:)``.
///
/// ```swift
/// do {
///     try await notes.write { db in try db.execute(sql: "INSERT INTO note DEFAULT VALUES") }
/// } catch let ManagedDatabaseError.notAcknowledged(database, cause) {
///     // Committed here, not acknowledged: read before retrying.
///     print("\(database): not acknowledged (\(cause.error))")
/// }
/// ```
///
/// Two failures are equal when their errors describe themselves alike:
/// errors need not be `Equatable`, and a failure is reported in words.
public struct AcknowledgementFailure: Error, CustomStringConvertible, Sendable, Equatable {
    /// The error of ``WriteAcknowledgement/acknowledge(_:change:)``.
    public let error: any Error

    /// The failure whose cause is `error`.
    public init(_ error: any Error) {
        self.error = error
    }

    public var description: String { "\(error)" }

    public static func == (lhs: AcknowledgementFailure, rhs: AcknowledgementFailure) -> Bool {
        lhs.description == rhs.description
    }
}
