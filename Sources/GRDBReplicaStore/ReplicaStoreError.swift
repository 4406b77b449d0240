import Foundation

/// Why a replica store refused or failed an operation. Each case names the
/// object or setting at fault and says what to do.
public enum ReplicaStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No object has this key.
    case notFound(key: String)
    /// A key that is empty, absolute, or holds `.`/`..` components or
    /// characters a store can't keep.
    case invalidKey(String, reason: String)
    /// The store's location or settings can't be used (a malformed
    /// `s3://` URL, a missing credential, a credentials file readable by
    /// others, …).
    case invalidConfiguration(reason: String)
    /// The store could not be reached or kept failing after its retries.
    case unavailable(store: String, reason: String)
    /// An object or a listing came back different from what was stored
    /// (short body, checksum mismatch, a listing cut short).
    case corrupt(key: String, reason: String)
    /// The store answered with an error that retrying won't fix (access
    /// denied, no such bucket, …).
    case refused(key: String, status: Int, code: String, message: String)
    /// A local file could not be read or written.
    case localFile(path: String, reason: String)

    public var description: String {
        switch self {
        case .notFound(let key):
            "the replica store has no object \(key)"
        case .invalidKey(let key, let reason):
            "invalid replica store key \"\(key)\": \(reason)"
        case .invalidConfiguration(let reason):
            "the replica store can't be used: \(reason)"
        case .unavailable(let store, let reason):
            "the replica store \(store) is unavailable: \(reason). Check that it is reachable; nothing was changed by the failed request"
        case .corrupt(let key, let reason):
            "the replica store returned a damaged \(key): \(reason)"
        case .refused(let key, let status, let code, let message):
            "the replica store refused \(key): HTTP \(status) \(code) \(message)"
        case .localFile(let path, let reason):
            "\(path): \(reason)"
        }
    }
}
