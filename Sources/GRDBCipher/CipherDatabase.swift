import GRDB

/// Opening, re-keying, encrypting and decrypting database files in the
/// SQLCipher format.
///
/// ```swift
/// let pool = try CipherDatabase.pool(atPath: path, key: .passphrase("secret"))
/// try CipherDatabase.rekey(atPath: path, from: .passphrase("secret"), to: .passphrase("new secret"))
/// ```
///
/// Each operation checks the file first, so that a wrong, missing or
/// superfluous key is a ``CipherError`` raised at open, the file untouched.
///
/// ## Topics
///
/// ### Opening a database
///
/// - ``pool(atPath:key:compatibility:kdfIterations:pageSize:configuration:)``
/// - ``queue(atPath:key:compatibility:kdfIterations:pageSize:configuration:)``
///
/// ### Changing the key or the encryption of a file
///
/// - ``rekey(atPath:from:to:compatibility:kdfIterations:pageSize:newPageSize:)``
/// - ``rekey(_:to:)``
/// - ``encrypt(atPath:with:compatibility:kdfIterations:pageSize:)``
/// - ``encryptedCopy(ofPlaintextAt:to:with:compatibility:kdfIterations:pageSize:)``
/// - ``exportPlaintext(atPath:key:to:compatibility:kdfIterations:pageSize:)``
///
/// ### Inspecting a file
///
/// - ``isEncrypted(atPath:)``
/// - ``verify(atPath:key:compatibility:kdfIterations:pageSize:)``
/// - ``inspect(atPath:key:compatibility:kdfIterations:pageSize:)``
/// - ``CipherInspection``
/// - ``cipherError(in:)``
///
/// ### Process-wide switches
///
/// These change C state that every encrypted database of the process
/// shares, whichever module or registry opened it.
///
/// - ``setKeyCacheEnabled(_:)``
/// - ``clearKeyCache()``
/// - ``keyDerivationCount``
/// - ``setReadAheadEnabled(_:)``
/// - ``readAheadPageCount(in:)``
public enum CipherDatabase {}
