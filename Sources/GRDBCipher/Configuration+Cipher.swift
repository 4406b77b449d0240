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
    /// - parameter kdfIterations: PBKDF2 iterations; the default is the
    ///   compatibility's (v4: 256,000; v3: 64,000). Lower values weaken a
    ///   passphrase: use them for tests only.
    /// - parameter plaintextHeader: Leaves the start of the file readable
    ///   as an ordinary SQLite header, with the salt kept outside the file
    ///   (see ``CipherPlaintextHeader``). Default: none, as SQLCipher.
    public mutating func encrypt(
        with key: CipherKey,
        compatibility: CipherCompatibility = .v4,
        kdfIterations: Int? = nil,
        plaintextHeader: CipherPlaintextHeader? = nil
    ) throws {
        try encrypt(compatibility: compatibility, kdfIterations: kdfIterations, plaintextHeader: plaintextHeader) { _ in key }
    }

    /// Makes every connection of this configuration use the SQLCipher file
    /// format with the key that `keyProvider` returns for the database,
    /// asked each time a connection opens: keys can come from a secret
    /// store, or be derived per database from a master key.
    ///
    /// ```swift
    /// var configuration = Configuration()
    /// try configuration.encrypt { path in
    ///     try CipherKey.derived(fromMasterKey: master, info: URL(fileURLWithPath: path).lastPathComponent)
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
        keyProvider: @escaping @Sendable (_ path: String) throws -> CipherKey
    ) throws {
        try CipherVFS.register()
        let iterations = Int32(kdfIterations ?? 0)
        prepareDatabase { db in
            let connection = db.sqliteConnection
            let path = sqlite3_db_filename(connection, "main").map { String(cString: $0) } ?? ""
            let value = try keyProvider(path).sqlcipherValue
            let rc = value.withCString { pointer in
                grdbcipher_set_key(connection, pointer, Int32(strlen(pointer)), compatibility.rawValue, iterations)
            }
            guard rc == SQLITE_OK else { throw CipherError.invalidKey("SQLite error \(rc)") }
            if let plaintextHeader {
                // Before anything reads the file.
                try db.execute(sql: "PRAGMA cipher_plaintext_header_size = \(plaintextHeader.size)")
                try db.execute(sql: "PRAGMA cipher_salt = \(plaintextHeader.saltLiteral)")
            }
            // New databases get the page size and reserved bytes of the
            // format; existing ones keep theirs (SQLite ignores both then).
            try db.execute(sql: "PRAGMA page_size = \(compatibility.pageSize)")
            var reserve = compatibility.reserveBytes
            _ = sqlite3_file_control(connection, "main", SQLITE_FCNTL_RESERVE_BYTES, &reserve)
            try db.execute(sql: "PRAGMA temp_store = MEMORY")
            try CipherVFS.checkReadable(db)
        }
    }
}

/// The encryption VFS, and the checks of opened connections.
enum CipherVFS {
    static func register() throws {
        let rc = grdbcipher_register()
        guard rc == SQLITE_OK else { throw CipherError.unavailable(code: rc) }
    }

    /// Reads the schema, and turns a failure into a ``CipherError``.
    static func checkReadable(_ db: Database) throws {
        do {
            _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master")
        } catch let error as DatabaseError {
            if let cipherError = cipherError(db) { throw cipherError }
            throw error
        }
    }

    static func cipherError(_ db: Database) -> CipherError? {
        let connection = db.sqliteConnection
        let filename = sqlite3_db_filename(connection, "main").map { String(cString: $0) } ?? ""
        let path = filename.isEmpty ? (db.configuration.label ?? "database") : filename
        switch grdbcipher_state(connection) {
        case GRDBCIPHER_STATE_KEY_ON_PLAINTEXT: return .keyOnPlaintextDatabase(path: path)
        case GRDBCIPHER_STATE_ENCRYPTED_WITHOUT_KEY: return .missingKey(path: path)
        case GRDBCIPHER_STATE_WRONG_KEY: return .wrongKey(path: path)
        case GRDBCIPHER_STATE_CORRUPT_PAGE: return .corruptPage(path: path, page: Int(grdbcipher_failed_page(connection)))
        case GRDBCIPHER_STATE_MISSING_SALT: return .missingSalt(path: path)
        default: return nil
        }
    }
}
