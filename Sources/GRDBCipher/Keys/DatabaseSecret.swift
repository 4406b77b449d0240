import Foundation

/// A key, passphrase or master key, as read from its ``KeySource``: bytes
/// that never print.
///
/// Its description is `<redacted>`, and it has no reflected children, so
/// that a secret interpolated in a log message, an error or a metric label,
/// or passed to `dump()`, by mistake does not leak.
///
/// ```swift
/// let secret = try KeySource.environment("PLAYERS_KEY").read()
/// print(secret)                  // <redacted>
/// let key = try CipherKey(secret) // a passphrase, or a raw x'<hex>' key
/// ```
public struct DatabaseSecret: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The secret, byte for byte. Hand it to the code that opens the
    /// database, and nowhere else.
    public let bytes: Data

    /// A secret made of the UTF-8 bytes of `text`.
    public init(_ text: String) {
        bytes = Data(text.utf8)
    }

    /// A secret made of `bytes`, unchanged.
    public init(bytes: Data) {
        self.bytes = bytes
    }

    /// The secret as text: UTF-8 without NUL bytes, or nil. Keys travel
    /// through C strings in SQLite: a NUL would cut them short, and bytes
    /// that are not UTF-8 would be replaced, so both are refused.
    public var text: String? {
        guard !bytes.contains(0), let text = String(data: bytes, encoding: .utf8) else { return nil }
        return text
    }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "DatabaseSecret(<redacted>)" }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
