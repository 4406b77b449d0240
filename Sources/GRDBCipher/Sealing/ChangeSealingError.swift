/// Why a change could not be sealed or opened with a ``ChangeSealingKey``.
///
/// Opening fails closed: whatever the error, no byte of plaintext is
/// returned.
///
/// ```swift
/// do {
///     let changes = try key.open(sealed, tenant: "acme", epoch: 3, sequence: 42)
///     print(changes.count)
/// } catch ChangeSealingError.authenticationFailed {
///     // Wrong key, tenant, epoch or sequence, or modified bytes.
/// }
/// ```
public enum ChangeSealingError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The sealed change has `count` bytes, fewer than the 29 of an empty
    /// one (version, nonce and tag).
    case truncated(count: Int)
    /// The sealed change starts with a format version this code can't read.
    case unsupportedVersion(UInt8)
    /// The tag does not authenticate the sealed change under this key,
    /// tenant, epoch and sequence: it was sealed with another key or for
    /// another place, or its bytes were modified.
    case authenticationFailed
    /// libcrypto failed (no random bytes, an input too large for it); the
    /// reason is libcrypto's or names the input, never a key.
    case cryptography(String)

    public var description: String {
        switch self {
        case let .truncated(count):
            return "a sealed change has at least \(ChangeSealingKey.overhead) bytes (version, nonce and tag), not \(count)"
        case let .unsupportedVersion(version):
            return "a sealed change of format version \(version) can't be opened: this version reads format \(ChangeSealingKey.formatVersion)"
        case .authenticationFailed:
            return "the sealed change does not authenticate: another key, tenant, epoch or sequence sealed it, or its bytes were modified"
        case let .cryptography(reason):
            return "sealing failed in libcrypto: \(reason)"
        }
    }
}
