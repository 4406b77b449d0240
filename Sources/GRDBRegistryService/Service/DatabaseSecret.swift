/// A key or passphrase, which never prints.
///
/// Its description is `<redacted>`, so that a secret interpolated in a log
/// message, an error or a metric label by mistake does not leak.
///
/// ```swift
/// let secret = DatabaseSecret("correct horse battery staple")
/// print(secret)   // <redacted>
/// ```
public struct DatabaseSecret: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The secret itself. Hand it to the code that opens the database, and
    /// nowhere else.
    public let value: String

    public init(_ value: String) {
        self.value = value
    }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "DatabaseSecret(<redacted>)" }
}
