import CLibCrypto

/// SHA-256 of migration files, from libcrypto (OpenSSL).
///
/// The runner stores the digest of each applied SQL file, and compares it with
/// the file on disk to report edited migrations:
///
/// ```swift
/// let digest = SHA256.hexDigest(of: Array("CREATE TABLE t(a);".utf8))
/// ```
///
/// The digest detects accidental edits; it is not used for any security
/// decision.
package enum SHA256 {
    /// Returns the 32-byte digest of `bytes`.
    package static func digest(of bytes: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let ok = bytes.withUnsafeBytes { input in
            EVP_Digest(input.baseAddress, input.count, &output, &length, EVP_sha256(), nil)
        }
        // EVP_Digest only fails when libcrypto can't allocate a context: the
        // process is out of memory, and no checksum can be trusted.
        precondition(ok == 1 && length == 32, "libcrypto SHA-256 failed")
        return output
    }

    /// Returns the digest of `bytes` in lowercase hexadecimal.
    package static func hexDigest(of bytes: [UInt8]) -> String {
        digest(of: bytes).map { hexDigits[Int($0 >> 4)] + hexDigits[Int($0 & 0xf)] }.joined()
    }

    private static let hexDigits = (0..<16).map { String($0, radix: 16) }
}
