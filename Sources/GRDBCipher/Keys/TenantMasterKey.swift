import Foundation

/// The master key from which every tenant's database key is derived
/// (``CipherKey/tenantKey(master:tenant:salt:)``): 32 random bytes.
///
/// It is written as 64 hexadecimal digits (`openssl rand -hex 32`) or as
/// base64 (`openssl rand -base64 32`), never as a passphrase: a tenant key
/// is a raw key, with no PBKDF2 to slow down guesses, so a master key a
/// human chose could be found offline from one tenant file.
///
/// ```swift
/// let master = try TenantMasterKey(KeySource.environment("TENANT_MASTER_KEY").read())
/// ```
///
/// ## Topics
///
/// ### Reading a master key
///
/// - ``init(_:)``
/// - ``KeySource``
///
/// ### Using it
///
/// - ``TenantEncryption``
/// - ``CipherKey/tenantKey(master:tenant:salt:)``
public struct TenantMasterKey: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    let bytes: Data

    /// Reads a master key from its text form (hex or base64).
    ///
    /// - throws: ``CipherError/invalidKey(_:)``, saying how to make a valid one.
    public init(_ secret: DatabaseSecret) throws {
        let help = "a tenant master key is 32 random bytes written as 64 hex digits (openssl rand -hex 32) or in base64 (openssl rand -base64 32)"
        guard var text = secret.text?.trimmingCharacters(in: .whitespacesAndNewlines) else {
            throw CipherError.invalidKey("the master key is not text; \(help)")
        }
        if text.hasPrefix("x'"), text.hasSuffix("'"), text.count >= 3 {
            text = String(text.dropFirst(2).dropLast())
        }
        if let bytes = Self.hexBytes(text) ?? Data(base64Encoded: text), bytes.count == 32 {
            self.bytes = bytes
        } else {
            throw CipherError.invalidKey(help)
        }
    }

    private static func hexBytes(_ text: String) -> Data? {
        let digits = Array(text.utf8)
        guard digits.count == 64 else { return nil }
        var bytes = Data(capacity: 32)
        var index = 0
        while index < digits.count {
            guard let high = hexValue(digits[index]), let low = hexValue(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return digit - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "TenantMasterKey(<redacted>)" }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
