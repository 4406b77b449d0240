import CSQLCipherVFS
import Foundation
import GRDB

extension CipherDatabase {
    /// Opens a `DatabasePool` on the file at `path`: encrypted with `key`,
    /// or plain when `key` is nil. A new encrypted file is created with
    /// mode 0600. `pageSize` is SQLCipher's `cipher_page_size` (nil: the
    /// compatibility's default, 4096 for v4 and 1024 for v3).
    ///
    /// - throws: ``CipherError/missingKey(path:)`` (an encrypted file and no
    ///   key), ``CipherError/keyOnPlaintextDatabase(path:)``,
    ///   ``CipherError/wrongKey(path:)``, ``CipherError/pageGeometry(path:pageSize:reserve:foundPageSize:foundReserve:)``
    ///   (the file has another page size than `pageSize`).
    public static func pool(
        atPath path: String,
        key: CipherKey?,
        compatibility: CipherCompatibility = .v4,
        kdfIterations: Int? = nil,
        pageSize: Int? = nil,
        configuration: Configuration = Configuration()
    ) throws -> DatabasePool {
        try open(atPath: path, key: key, compatibility: compatibility, kdfIterations: kdfIterations, pageSize: pageSize,
                 configuration: configuration, DatabasePool.init(path:configuration:))
    }

    /// Opens a `DatabaseQueue` on the file at `path`: encrypted with `key`,
    /// or plain when `key` is nil. See ``pool(atPath:key:compatibility:kdfIterations:pageSize:configuration:)``.
    public static func queue(
        atPath path: String,
        key: CipherKey?,
        compatibility: CipherCompatibility = .v4,
        kdfIterations: Int? = nil,
        pageSize: Int? = nil,
        configuration: Configuration = Configuration()
    ) throws -> DatabaseQueue {
        try open(atPath: path, key: key, compatibility: compatibility, kdfIterations: kdfIterations, pageSize: pageSize,
                 configuration: configuration, DatabaseQueue.init(path:configuration:))
    }

    // MARK: - Private

    /// Opens a pool or a queue (`open`, one of their initialisers) on the
    /// file at `path`, once its key is checked against the file: the one
    /// body behind ``pool(atPath:key:compatibility:kdfIterations:pageSize:configuration:)``
    /// and ``queue(atPath:key:compatibility:kdfIterations:pageSize:configuration:)``.
    private static func open<Writer: DatabaseWriter>(
        atPath path: String,
        key: CipherKey?,
        compatibility: CipherCompatibility,
        kdfIterations: Int?,
        pageSize: Int?,
        configuration: Configuration,
        _ open: (_ path: String, _ configuration: Configuration) throws -> Writer
    ) throws -> Writer {
        try CipherVFS.register()
        // Refused before anything is created.
        try key?.checked()
        var configuration = configuration
        if configuration.label == nil { configuration.label = path }
        switch (isEncrypted(atPath: path), key) {
        case (true?, nil): throw CipherError.missingKey(path: path)
        case (false?, _?): throw CipherError.keyOnPlaintextDatabase(path: path)
        case (nil, _?):
            // A new encrypted database is readable by its owner only: its
            // ciphertext is enough to guess a passphrase offline. Journals
            // and WALs take the database's mode.
            let descriptor = Foundation.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            if descriptor >= 0 { close(descriptor) }
        default: break
        }
        if let key {
            try configuration.encrypt(with: key, compatibility: compatibility, kdfIterations: kdfIterations, pageSize: pageSize)
        }
        return try open(path, configuration)
    }
}
