import Crypto
import Foundation

/// Bearer tokens: 32 random bytes, hex, with a prefix that tells a leaked
/// token apart in logs and secret scanners. The server stores and compares
/// only SHA-256 digests: a copy of the catalog signs nobody in.
enum Tokens {
    static let prefix = "mts_"

    /// A new random token.
    static func generate() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return prefix + hex(bytes)
    }

    /// The digest stored for `token`.
    static func hash(_ token: String) -> String {
        hex(Array(SHA256.hash(data: Array(token.utf8))))
    }

    /// Whether `token` is shaped like a token: the prefix then 64 lowercase
    /// hex digits. Anything else is refused before any lookup.
    static func isWellFormed(_ token: String) -> Bool {
        let utf8 = token.utf8
        guard utf8.count == prefix.utf8.count + 64, token.hasPrefix(prefix) else { return false }
        return utf8.dropFirst(prefix.utf8.count).allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// Compares two digests in time independent of where they differ.
    static func digestsEqual(_ lhs: String, _ rhs: String) -> Bool {
        bytesEqual(Array(lhs.utf8), rhs.utf8)
    }

    /// Compares bytes in time independent of where they differ (it depends
    /// only on the lengths).
    static func bytesEqual(_ lhs: [UInt8], _ rhs: String.UTF8View) -> Bool {
        guard lhs.count == rhs.count else { return false }
        // Over contiguous bytes when the string has them (a native string
        // does): this runs on every tenant request.
        if let equal = rhs.withContiguousStorageIfAvailable({ rhs in
            lhs.withUnsafeBufferPointer { lhs in
                var difference: UInt8 = 0
                for index in 0..<lhs.count { difference |= lhs[index] ^ rhs[index] }
                return difference == 0
            }
        }) {
            return equal
        }
        var difference: UInt8 = 0
        for (left, right) in zip(lhs, rhs) { difference |= left ^ right }
        return difference == 0
    }

    /// The first 16 hex digits of a well-formed token, as a number: a key
    /// to find a remembered token, never a proof of it. Nil for a token
    /// that is not well formed.
    static func lookupKey(_ token: String) -> UInt64? {
        guard isWellFormed(token) else { return nil }
        var key: UInt64 = 0
        for byte in token.utf8.dropFirst(prefix.utf8.count).prefix(16) {
            key = key << 4 | UInt64(byte <= 57 ? byte - 48 : byte - 87)
        }
        return key
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var result = [UInt8]()
        result.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            result.append(digits[Int(byte >> 4)])
            result.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: result, as: UTF8.self)
    }
}

/// The operator token, shared out of band: from `MTS_OPERATOR_TOKEN`, or
/// from `operator.token` in the data directory, created with a random
/// token on first start (mode 0600 from its first byte, see
/// ``SecretFiles``) so that the README's command works as is. It creates,
/// lists and rotates tenants, and in fleet mode places them; the server
/// only checks it (it keeps its SHA-256, never presents it anywhere). The
/// servers of a fleet share it: a request forwarded to the tenant's owner
/// keeps its `Authorization`, which the owner checks again.
///
/// ```swift
/// let token = try SharedToken.load(environment: ["MTS_OPERATOR_TOKEN": secret], keyFile: data.appendingPathComponent("operator.token"))
/// token.accepts(secret)    // true
/// ```
struct SharedToken: Sendable {
    static let variable = ServerVariable.operatorToken.rawValue

    let hash: String
    /// Where the token came from, for the startup message (never the token).
    let source: String

    /// The fewest characters of a token from the environment or a file:
    /// 32 (128 bits of hex, 192 of base64). Generated tokens are 68.
    static let minimumLength = 32

    static func load(environment: [String: String], keyFile: URL) throws -> SharedToken {
        if let token = environment[variable] {
            guard token.utf8.count >= minimumLength else {
                throw UsageError(message: "\(variable) is too short: use at least \(minimumLength) characters (e.g. `openssl rand -hex 32`)")
            }
            return SharedToken(token: token, source: "the environment variable \(variable)")
        }
        // Private from the first byte (SecretFiles), and refused when
        // others may read it.
        try SecretFiles.createUnlessPresent(at: keyFile) { Data((Tokens.generate() + "\n").utf8) }
        let contents = String(decoding: try SecretFiles.read(at: keyFile), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard contents.utf8.count >= minimumLength else {
            throw UsageError(message: "the operator token file \(keyFile.path) holds fewer than \(minimumLength) characters: delete it to get a new token")
        }
        return SharedToken(token: contents, source: "the file \(keyFile.path)")
    }

    private init(token: String, source: String) {
        self.hash = Tokens.hash(token)
        self.source = source
    }

    func accepts(_ token: String) -> Bool {
        Tokens.digestsEqual(Tokens.hash(token), hash)
    }
}
