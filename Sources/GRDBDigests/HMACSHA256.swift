import CLibCrypto

/// HMAC-SHA256 from libcrypto (OpenSSL): the signing keys and signatures of
/// S3 requests (AWS Signature Version 4).
///
/// ```swift
/// let mac = HMACSHA256.authenticationCode(key: Array("key".utf8), Array("message".utf8))
/// ```
package enum HMACSHA256 {
    /// HMAC-SHA256 of `message` under `key`.
    package static func authenticationCode(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
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
        // HMAC fails only when libcrypto can't allocate: no signature can be
        // trusted then.
        precondition(result != nil && length == 32, "libcrypto HMAC-SHA256 failed")
        return output
    }
}
