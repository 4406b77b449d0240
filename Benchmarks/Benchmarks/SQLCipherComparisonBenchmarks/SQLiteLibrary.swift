import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Why a library or a statement failed.
struct SQLiteFailure: Error, CustomStringConvertible {
    let description: String
}

/// The C functions of one SQLite library of the process, looked up with
/// `dlsym`, so that both sides of a comparison run the same Swift code and
/// pay the same (indirect) call costs.
///
/// - ``system()``: the system SQLite 3.40 that GRDB links, where GRDBCipher
///   registers its VFS (already loaded: `RTLD_NOLOAD`).
/// - ``sqlcipher()``: Debian's SQLCipher 3.4.1 (SQLite 3.15.2). It exports
///   the same `sqlite3_*` names: `RTLD_DEEPBIND` binds its internal calls to
///   its own copy of SQLite, `RTLD_LOCAL` keeps its names out of the global
///   namespace (where GRDB would otherwise find them).
struct SQLiteLibrary {
    typealias Open = @convention(c) (UnsafePointer<CChar>?, UnsafeMutablePointer<OpaquePointer?>?, Int32, UnsafePointer<CChar>?) -> Int32
    typealias Key = @convention(c) (OpaquePointer?, UnsafeRawPointer?, Int32) -> Int32
    typealias Prepare = @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, Int32, UnsafeMutablePointer<OpaquePointer?>?, UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> Int32
    typealias StatementFunction = @convention(c) (OpaquePointer?) -> Int32
    typealias ColumnInt64 = @convention(c) (OpaquePointer?, Int32) -> Int64
    typealias BindText = @convention(c) (OpaquePointer?, Int32, UnsafePointer<CChar>?, Int32, UnsafeRawPointer?) -> Int32
    typealias ErrorMessage = @convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?
    typealias Version = @convention(c) () -> UnsafePointer<CChar>?

    let name: String
    let open: Open
    let key: Key?
    let prepare: Prepare
    let step: StatementFunction
    let reset: StatementFunction
    let finalize: StatementFunction
    let columnInt64: ColumnInt64
    let bindText: BindText
    let errorMessage: ErrorMessage
    let close: StatementFunction
    let version: String

    static func system() throws -> SQLiteLibrary {
        guard let handle = dlopen("libsqlite3.so.0", RTLD_NOW | RTLD_NOLOAD) else {
            throw SQLiteFailure(description: "libsqlite3.so.0 is not loaded: GRDB should link it")
        }
        return try SQLiteLibrary(name: "system SQLite", handle: handle, needsKey: false)
    }

    static func sqlcipher() throws -> SQLiteLibrary {
        guard let handle = dlopen("libsqlcipher.so.0", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND) else {
            let reason = dlerror().map { String(cString: $0) } ?? "unknown error"
            throw SQLiteFailure(description: "Can't load libsqlcipher.so.0 (\(reason)): run scripts/bootstrap (Debian's libsqlcipher0)")
        }
        return try SQLiteLibrary(name: "SQLCipher", handle: handle, needsKey: true)
    }

    private init(name: String, handle: UnsafeMutableRawPointer, needsKey: Bool) throws {
        func symbol<T>(_ symbol: String, as type: T.Type) throws -> T {
            guard let pointer = dlsym(handle, symbol) else {
                throw SQLiteFailure(description: "\(name) has no symbol \(symbol)")
            }
            return unsafeBitCast(pointer, to: type)
        }
        self.name = name
        open = try symbol("sqlite3_open_v2", as: Open.self)
        key = needsKey ? try symbol("sqlite3_key", as: Key.self) : nil
        prepare = try symbol("sqlite3_prepare_v2", as: Prepare.self)
        step = try symbol("sqlite3_step", as: StatementFunction.self)
        reset = try symbol("sqlite3_reset", as: StatementFunction.self)
        finalize = try symbol("sqlite3_finalize", as: StatementFunction.self)
        columnInt64 = try symbol("sqlite3_column_int64", as: ColumnInt64.self)
        bindText = try symbol("sqlite3_bind_text", as: BindText.self)
        errorMessage = try symbol("sqlite3_errmsg", as: ErrorMessage.self)
        close = try symbol("sqlite3_close_v2", as: StatementFunction.self)
        let libversion = try symbol("sqlite3_libversion", as: Version.self)
        version = libversion().map { String(cString: $0) } ?? "?"
    }

    /// Opens (or creates) `path` with SQLCipher and keys it with
    /// `sqlite3_key` (what `PRAGMA key` calls). The key is derived at the
    /// first read, which this method performs.
    func openKeyed(_ path: String, passphrase: String) throws -> SQLiteConnection {
        guard let key else { throw SQLiteFailure(description: "\(name) has no sqlite3_key") }
        var db: OpaquePointer?
        let rc = open(path, &db, 0x2 | 0x4, nil)   // SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
        let connection = SQLiteConnection(library: self, db: db)
        guard rc == 0 else {
            let message = connection.lastErrorMessage
            connection.close()
            throw SQLiteFailure(description: "open \(path): \(message)")
        }
        let keyRC = passphrase.withCString { key(db, $0, Int32(strlen($0))) }
        guard keyRC == 0 else {
            connection.close()
            throw SQLiteFailure(description: "sqlite3_key failed (\(keyRC))")
        }
        _ = try connection.int64("SELECT COUNT(*) FROM sqlite_master")
        return connection
    }
}

/// A connection of one of the two libraries. For ours, it borrows the
/// connection of a GRDB `Database` (`db.sqliteConnection`), which GRDBCipher
/// keyed; ``close()`` is then not called.
struct SQLiteConnection {
    let library: SQLiteLibrary
    let db: OpaquePointer?

    var lastErrorMessage: String {
        library.errorMessage(db).map { String(cString: $0) } ?? "unknown error"
    }

    /// Runs one statement to completion (rows are ignored).
    func execute(_ sql: String) throws {
        let statement = try prepare(sql)
        defer { _ = library.finalize(statement) }
        while true {
            let rc = library.step(statement)
            if rc == 101 { return }   // SQLITE_DONE
            if rc != 100 { throw SQLiteFailure(description: "\(sql): \(lastErrorMessage) (\(rc))") }
        }
    }

    /// The first column of the first row of one statement.
    func int64(_ sql: String) throws -> Int64 {
        let statement = try prepare(sql)
        defer { _ = library.finalize(statement) }
        let rc = library.step(statement)
        guard rc == 100 else { throw SQLiteFailure(description: "\(sql): \(lastErrorMessage) (\(rc))") }
        return library.columnInt64(statement, 0)
    }

    func prepare(_ sql: String) throws -> OpaquePointer? {
        var statement: OpaquePointer?
        let rc = library.prepare(db, sql, -1, &statement, nil)
        guard rc == 0 else { throw SQLiteFailure(description: "\(sql): \(lastErrorMessage) (\(rc))") }
        return statement
    }

    func close() {
        _ = library.close(db)
    }
}
