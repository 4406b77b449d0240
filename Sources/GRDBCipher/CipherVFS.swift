import CSQLCipherVFS
import GRDB

/// The encryption VFS, and the checks of opened connections.
enum CipherVFS {
    static func register() throws {
        let rc = grdbcipher_register()
        guard rc == SQLITE_OK else { throw CipherError.unavailable(code: rc) }
    }

    /// Throws ``CipherError/invalidPageSize(_:)`` unless SQLCipher accepts
    /// `pageSize` with this compatibility and plaintext header.
    static func validate(pageSize: Int, compatibility: CipherCompatibility, plaintextHeader: CipherPlaintextHeader?) throws {
        guard CipherFileFormat.isValidPageSize(pageSize),
              (plaintextHeader?.size ?? 0) < pageSize - Int(compatibility.reserveBytes)
        else { throw CipherError.invalidPageSize(pageSize) }
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
        case GRDBCIPHER_STATE_GEOMETRY:
            var pageSize: Int32 = 0, reserve: Int32 = 0, foundPageSize: Int32 = 0, foundReserve: Int32 = 0
            _ = grdbcipher_format(connection, nil, &pageSize, &reserve, nil, nil, &foundPageSize, &foundReserve)
            return .pageGeometry(path: path, pageSize: Int(pageSize), reserve: Int(reserve), foundPageSize: Int(foundPageSize), foundReserve: Int(foundReserve))
        default: return nil
        }
    }
}
