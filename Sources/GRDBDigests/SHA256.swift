import CLibCrypto
import Foundation

/// SHA-256 from libcrypto (OpenSSL): the one digest of the package (migration
/// checksums, backup files, replica store objects and request signatures).
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
    package static func digest(of bytes: some ContiguousBytes) -> [UInt8] {
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
    package static func hexDigest(of bytes: some ContiguousBytes) -> String {
        hex(digest(of: bytes))
    }

    /// Lowercase hexadecimal of `digest`.
    package static func hex(_ digest: [UInt8]) -> String {
        digest.map { hexDigits[Int($0 >> 4)] + hexDigits[Int($0 & 0xf)] }.joined()
    }

    /// An incremental digest, for data that comes in pieces (backup files
    /// are hashed while they are copied, never read whole into memory).
    ///
    /// ```swift
    /// let hasher = SHA256.Hasher()
    /// Array("CREATE TABLE t(a);".utf8).withUnsafeBytes { hasher.update($0) }
    /// print(hasher.finalizeHex())
    /// ```
    package final class Hasher {
        private let context: OpaquePointer

        package init() {
            // Like EVP_Digest above: these fail only when libcrypto can't
            // allocate, and then no digest can be trusted.
            guard let context = EVP_MD_CTX_new() else { preconditionFailure("libcrypto SHA-256 failed: out of memory") }
            precondition(EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1, "libcrypto SHA-256 failed")
            self.context = context
        }

        deinit { EVP_MD_CTX_free(context) }

        /// Adds `bytes` to the digest.
        package func update(_ bytes: UnsafeRawBufferPointer) {
            guard bytes.count > 0 else { return }
            precondition(EVP_DigestUpdate(context, bytes.baseAddress, bytes.count) == 1, "libcrypto SHA-256 failed")
        }

        /// The digest of everything added, in lowercase hexadecimal. Call once.
        package func finalizeHex() -> String {
            var output = [UInt8](repeating: 0, count: 32)
            var length: UInt32 = 0
            precondition(EVP_DigestFinal_ex(context, &output, &length) == 1 && length == 32, "libcrypto SHA-256 failed")
            return SHA256.hex(output)
        }
    }

    private static let hexDigits = (0..<16).map { String($0, radix: 16) }
}
