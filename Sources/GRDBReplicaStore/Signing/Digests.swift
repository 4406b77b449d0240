import CLibCrypto
import Foundation

/// SHA-256 and HMAC-SHA256 from libcrypto (OpenSSL), for request signing
/// and object checksums.
///
/// GRDBMigrations has a `package` SHA-256 of its own, but it lives in a
/// module above GRDB: depending on it would pull GRDB into the replica
/// store. These stay internal so the two never meet in one namespace.
enum Digests {
    /// The 32-byte SHA-256 of `bytes`.
    static func sha256(_ bytes: some ContiguousBytes) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let ok = bytes.withUnsafeBytes { input in
            EVP_Digest(input.baseAddress, input.count, &output, &length, EVP_sha256(), nil)
        }
        // EVP_Digest fails only when libcrypto can't allocate a context:
        // the process is out of memory and no checksum can be trusted.
        precondition(ok == 1 && length == 32, "libcrypto SHA-256 failed")
        return output
    }

    /// The SHA-256 of `bytes` in lowercase hexadecimal.
    static func sha256Hex(_ bytes: some ContiguousBytes) -> String {
        hex(sha256(bytes))
    }

    /// The SHA-256 (lowercase hexadecimal) of the file at `path`, read in
    /// pieces so that a large file is never in memory whole.
    ///
    /// - throws: ``ReplicaStoreError/localFile(path:reason:)`` when the file
    ///   can't be read.
    static func sha256Hex(ofFileAt path: String) throws -> String {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw ReplicaStoreError.localFile(path: path, reason: "can't be read: \(String(cString: strerror(errno)))")
        }
        defer { try? handle.close() }
        // EVP_MD_CTX_new fails only when libcrypto can't allocate: no
        // checksum can be trusted then.
        guard let context = EVP_MD_CTX_new() else { preconditionFailure("libcrypto SHA-256 failed: out of memory") }
        defer { EVP_MD_CTX_free(context) }
        precondition(EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1, "libcrypto SHA-256 failed")
        while true {
            let chunk: Data
            do {
                chunk = try handle.read(upToCount: 1 << 20) ?? Data()
            } catch {
                throw ReplicaStoreError.localFile(path: path, reason: "can't be read: \(error.localizedDescription)")
            }
            if chunk.isEmpty { break }
            chunk.withUnsafeBytes { bytes in
                precondition(EVP_DigestUpdate(context, bytes.baseAddress, bytes.count) == 1, "libcrypto SHA-256 failed")
            }
        }
        var output = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        precondition(EVP_DigestFinal_ex(context, &output, &length) == 1 && length == 32, "libcrypto SHA-256 failed")
        return hex(output)
    }

    /// HMAC-SHA256 of `message` under `key`.
    static func hmacSHA256(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let result = key.withUnsafeBytes { keyBytes in
            message.withUnsafeBytes { messageBytes in
                // A zero-length message has no base address: HMAC reads no
                // byte of it, but wants a non-null pointer.
                HMAC(
                    EVP_sha256(), keyBytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(key.count),
                    messageBytes.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? UnsafePointer(bitPattern: 1), message.count,
                    &output, &length)
            }
        }
        // Like EVP_Digest above: HMAC fails only when libcrypto can't allocate.
        precondition(result != nil && length == 32, "libcrypto HMAC-SHA256 failed")
        return output
    }

    /// Lowercase hexadecimal of `bytes`.
    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0xf)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
