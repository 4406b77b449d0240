import CSQLCipherVFS
import Foundation
import GRDB

extension Configuration {
    /// Makes every connection of this configuration use the SQLCipher file
    /// format with `key`.
    ///
    /// ```swift
    /// var configuration = Configuration()
    /// try configuration.encrypt(with: .passphrase("secret"))
    /// let pool = try DatabasePool(path: "players.sqlite", configuration: configuration)
    /// ```
    ///
    /// Opening fails with a ``CipherError`` (wrong key, key on a plaintext
    /// database) before anything is written. Every GRDB feature keeps
    /// working: pools, WAL, observation, migrations. Temporary files are
    /// kept in memory (`temp_store = MEMORY`), and any that SQLite still
    /// writes are encrypted with an ephemeral key.
    ///
    /// - parameter key: The key of every database opened with this
    ///   configuration.
    /// - parameter compatibility: The SQLCipher format version: ``CipherCompatibility/v4``
    ///   (the default) or ``CipherCompatibility/v3``.
    /// - parameter kdfIterations: PBKDF2 iterations; the default is the
    ///   compatibility's (v4: 256,000; v3: 64,000). Lower values weaken a
    ///   passphrase: use them for tests only.
    /// - parameter plaintextHeader: Leaves the start of the file readable
    ///   as an ordinary SQLite header, with the salt kept outside the file
    ///   (see ``CipherPlaintextHeader``). Default: none, as SQLCipher.
    /// - parameter pageSize: SQLCipher's `cipher_page_size`, a power of two
    ///   from 1024 to 65536 (``CipherFileFormat/isValidPageSize(_:)``); the
    ///   default is the compatibility's (v4: 4096, v3: 1024). A file keeps
    ///   the page size it was created with, and opens only with that one (``CipherError/pageGeometry(path:pageSize:reserve:foundPageSize:foundReserve:)``
    ///   otherwise); to change it, re-encrypt the file with
    ///   ``CipherDatabase/rekey(atPath:from:to:compatibility:kdfIterations:pageSize:newPageSize:)``.
    public mutating func encrypt(
        with key: CipherKey,
        compatibility: CipherCompatibility = .v4,
        kdfIterations: Int? = nil,
        plaintextHeader: CipherPlaintextHeader? = nil,
        pageSize: Int? = nil
    ) throws {
        try key.checked()
        try encrypt(compatibility: compatibility, kdfIterations: kdfIterations, plaintextHeader: plaintextHeader, pageSize: pageSize) { _ in key }
    }

    /// Makes every connection of this configuration use the SQLCipher file
    /// format with the key that `keyProvider` returns for the database,
    /// asked each time a connection opens: keys can come from a secret
    /// store, or be derived per database from a master key.
    ///
    /// ```swift
    /// let tenants = TenantEncryption(masterKey: try TenantMasterKey(KeySource.environment("TENANT_MASTER_KEY").read()))
    /// var configuration = Configuration()
    /// try configuration.encrypt { path in
    ///     // The key of the tenant named by the file, with the file's salt
    ///     // (or a new one for a new file).
    ///     let tenant = URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent
    ///     guard let key = try tenants.key(forTenant: tenant, atPath: path) else {
    ///         throw TenantEncryptionError.plaintextTenant(tenant: tenant, path: path)
    ///     }
    ///     return key
    /// }
    /// let pool = try DatabasePool(path: "tenants/acme.sqlite", configuration: configuration)
    /// ```
    ///
    /// The provider receives the absolute path of the database file. An
    /// error it throws fails the opening of the connection, as is. A pool
    /// asks once per connection (the writer, then each reader), so a
    /// provider that can be slow should cache.
    public mutating func encrypt(
        compatibility: CipherCompatibility = .v4,
        kdfIterations: Int? = nil,
        plaintextHeader: CipherPlaintextHeader? = nil,
        pageSize: Int? = nil,
        keyProvider: @escaping @Sendable (_ path: String) throws -> CipherKey
    ) throws {
        try CipherVFS.register()
        let iterations = Int32(kdfIterations ?? 0)
        let pageSize = pageSize ?? compatibility.defaultPageSize
        try CipherVFS.validate(pageSize: pageSize, compatibility: compatibility, plaintextHeader: plaintextHeader)
        prepareDatabase { db in
            let connection = db.sqliteConnection
            let path = sqlite3_db_filename(connection, "main").map { String(cString: $0) } ?? ""
            let rc = try keyProvider(path).withBytes { pointer, count in
                grdbcipher_set_key(connection, pointer, count, compatibility.rawValue, iterations)
            }
            guard rc == SQLITE_OK else { throw CipherError.invalidKey("SQLite error \(rc)") }
            // Before anything reads the file. The VFS gives a new database
            // the format's page size and reserved bytes, and checks an
            // existing one's against them.
            if pageSize != compatibility.defaultPageSize {
                try db.execute(sql: "PRAGMA cipher_page_size = \(pageSize)")
            }
            if let plaintextHeader {
                try db.execute(sql: "PRAGMA cipher_plaintext_header_size = \(plaintextHeader.size)")
                try db.execute(sql: "PRAGMA cipher_salt = \(plaintextHeader.saltLiteral)")
            }
            try db.execute(sql: "PRAGMA temp_store = MEMORY")
            try CipherVFS.checkReadable(db)
        }
    }
}
