/// The validated identifier of a tenant, safe to use as a file name.
///
/// 1 to 64 characters among lowercase ASCII letters, digits, `-` and `_`,
/// starting with a letter or a digit. That excludes path separators, `..`,
/// hidden files, control characters, spaces, and names that differ only by
/// case (which collide on case-insensitive file systems).
///
/// ```swift
/// let id = try TenantID("acme")
/// try TenantID("../etc")   // throws TenantIDError.invalidCharacter
/// ```
public struct TenantID: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The maximum length of an identifier.
    public static let maximumLength = 64

    /// The identifier.
    public let rawValue: String

    /// Validates `rawValue`.
    ///
    /// - throws: ``TenantIDError``, which says what is wrong.
    public init(_ rawValue: String) throws(TenantIDError) {
        guard !rawValue.isEmpty else { throw .empty }
        guard rawValue.unicodeScalars.count <= Self.maximumLength else {
            throw .tooLong(length: rawValue.unicodeScalars.count)
        }
        for scalar in rawValue.unicodeScalars where !Self.isAllowed(scalar) {
            throw .invalidCharacter(rawValue.debugDescription, character: scalar.escaped(asASCII: true))
        }
        guard let first = rawValue.unicodeScalars.first, first != "-", first != "_" else {
            throw .invalidFirstCharacter(rawValue)
        }
        self.rawValue = rawValue
    }

    private static func isAllowed(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case "a"..."z", "0"..."9", "-", "_": return true
        default: return false
        }
    }

    public var description: String { rawValue }

    public static func < (lhs: TenantID, rhs: TenantID) -> Bool {
        lhs.rawValue < rhs.rawValue
    }
}

/// Why a string is not a valid ``TenantID``.
public enum TenantIDError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The string is empty.
    case empty
    /// The string has more than ``TenantID/maximumLength`` characters.
    case tooLong(length: Int)
    /// The string contains a character other than lowercase ASCII
    /// letters, digits, `-` and `_`.
    case invalidCharacter(String, character: String)
    /// The string starts with `-` or `_`.
    case invalidFirstCharacter(String)

    public var description: String {
        switch self {
        case .empty:
            return "A tenant id can't be empty."
        case let .tooLong(length):
            return "A tenant id has at most \(TenantID.maximumLength) characters, not \(length)."
        case let .invalidCharacter(id, character):
            return "Tenant id \(id) contains \(character): use lowercase letters, digits, '-' and '_'."
        case let .invalidFirstCharacter(id):
            return "Tenant id \(id) must start with a lowercase letter or a digit."
        }
    }
}
