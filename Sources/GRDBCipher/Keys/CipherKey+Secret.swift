import Foundation

extension CipherKey {
    /// The key a ``DatabaseSecret`` holds: a raw key when the secret is
    /// written `x'<64 hex digits>'` (or `x'<64 hex digits><32 hex digits>'`
    /// with the salt), a passphrase otherwise, as SQLCipher's `PRAGMA key`
    /// reads it. The daemon and `registryctl` both read keys this way.
    ///
    /// ```swift
    /// let key = try CipherKey(KeySource.file("secrets/players.key").read())
    /// ```
    ///
    /// - throws: ``CipherError/invalidKey(_:)`` when the secret holds a NUL
    ///   byte or bytes that are not UTF-8 (a binary key file): such a key
    ///   would be cut short or altered on its way to SQLite, so it is refused.
    public init(_ secret: DatabaseSecret) throws {
        guard let text = secret.text else {
            throw CipherError.invalidKey(
                "the key is not text (it has a NUL byte or is not UTF-8). A key is a passphrase, "
                + "or a raw key written x'<64 hex digits>': convert a binary key file with "
                + "`printf \"x'%s'\" $(xxd -p -c 64 key.bin) > key.txt`")
        }
        self = .passphrase(text)
    }
}
