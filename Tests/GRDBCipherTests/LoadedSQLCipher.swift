import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Why the in-process SQLCipher could not be used.
struct LoadedSQLCipherError: Error, CustomStringConvertible {
    let description: String
}

/// Debian's SQLCipher 3.4.1 (`libsqlcipher.so.0`, from the `libsqlcipher0`
/// package that scripts/bootstrap installs), loaded into the test process
/// next to the system SQLite that GRDB links.
///
/// Both libraries export the same `sqlite3_*` names. `RTLD_DEEPBIND` makes
/// SQLCipher resolve its own internal calls to its own copy of SQLite
/// (without it, SQLCipher's code would call into the system SQLite and crash),
/// and `RTLD_LOCAL` keeps its symbols out of the global namespace, so GRDB
/// keeps calling the system SQLite. Every function is looked up with `dlsym`
/// on SQLCipher's handle.
///
/// The library is never unloaded: `dlopen` of an already loaded library only
/// bumps a reference count, so each test may create its own instance.
final class LoadedSQLCipher {
    typealias Open = @convention(c) (UnsafePointer<CChar>?, UnsafeMutablePointer<OpaquePointer?>?, Int32, UnsafePointer<CChar>?) -> Int32
    typealias Key = @convention(c) (OpaquePointer?, UnsafeRawPointer?, Int32) -> Int32
    typealias Exec = @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, UnsafeRawPointer?, UnsafeMutableRawPointer?, UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32
    typealias Prepare = @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, Int32, UnsafeMutablePointer<OpaquePointer?>?, UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> Int32
    typealias StatementFunction = @convention(c) (OpaquePointer?) -> Int32
    typealias ColumnInt64 = @convention(c) (OpaquePointer?, Int32) -> Int64
    typealias ColumnText = @convention(c) (OpaquePointer?, Int32) -> UnsafePointer<UInt8>?
    typealias BindText = @convention(c) (OpaquePointer?, Int32, UnsafePointer<CChar>?, Int32, UnsafeRawPointer?) -> Int32
    typealias BindInt64 = @convention(c) (OpaquePointer?, Int32, Int64) -> Int32
    typealias ErrorMessage = @convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?
    typealias Version = @convention(c) () -> UnsafePointer<CChar>?

    static let libraryName = "libsqlcipher.so.0"

    let open: Open
    let key: Key
    let exec: Exec
    let prepare: Prepare
    let step: StatementFunction
    let reset: StatementFunction
    let finalize: StatementFunction
    let columnCount: StatementFunction
    let columnInt64: ColumnInt64
    let columnText: ColumnText
    let bindText: BindText
    let bindInt64: BindInt64
    let errorMessage: ErrorMessage
    let close: StatementFunction
    let libraryVersion: Version

    init() throws {
        guard let handle = dlopen(Self.libraryName, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND) else {
            let reason = dlerror().map { String(cString: $0) } ?? "unknown error"
            throw LoadedSQLCipherError(description: "Can't load \(Self.libraryName) (\(reason)): run scripts/bootstrap, which installs Debian's sqlcipher and libsqlcipher0.")
        }
        func symbol<T>(_ name: String, as type: T.Type) throws -> T {
            guard let pointer = dlsym(handle, name) else {
                throw LoadedSQLCipherError(description: "\(Self.libraryName) has no symbol \(name): is it SQLCipher 3.x?")
            }
            return unsafeBitCast(pointer, to: type)
        }
        open = try symbol("sqlite3_open_v2", as: Open.self)
        key = try symbol("sqlite3_key", as: Key.self)
        exec = try symbol("sqlite3_exec", as: Exec.self)
        prepare = try symbol("sqlite3_prepare_v2", as: Prepare.self)
        step = try symbol("sqlite3_step", as: StatementFunction.self)
        reset = try symbol("sqlite3_reset", as: StatementFunction.self)
        finalize = try symbol("sqlite3_finalize", as: StatementFunction.self)
        columnCount = try symbol("sqlite3_column_count", as: StatementFunction.self)
        columnInt64 = try symbol("sqlite3_column_int64", as: ColumnInt64.self)
        columnText = try symbol("sqlite3_column_text", as: ColumnText.self)
        bindText = try symbol("sqlite3_bind_text", as: BindText.self)
        bindInt64 = try symbol("sqlite3_bind_int64", as: BindInt64.self)
        errorMessage = try symbol("sqlite3_errmsg", as: ErrorMessage.self)
        close = try symbol("sqlite3_close_v2", as: StatementFunction.self)
        libraryVersion = try symbol("sqlite3_libversion", as: Version.self)
    }

    /// The version of the SQLite inside SQLCipher (3.15.2 for SQLCipher 3.4.1).
    var sqliteVersion: String {
        libraryVersion().map { String(cString: $0) } ?? ""
    }

    /// Opens (or creates) the database at `path`, and sets its key with
    /// `sqlite3_key`, which takes the same strings as `PRAGMA key`: a
    /// passphrase, or `x'<64 hex>'` / `x'<96 hex>'` for a raw key (and salt).
    func connection(atPath path: String, key: String) throws -> SQLCipherConnection {
        var db: OpaquePointer?
        let flags: Int32 = 0x2 | 0x4   // SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
        let rc = open(path, &db, flags, nil)
        let connection = SQLCipherConnection(library: self, db: db)
        guard rc == 0 else {
            let message = connection.lastErrorMessage
            connection.close()
            throw SQLCipherConnection.Failure(code: rc, message: "open \(path): \(message)")
        }
        let keyRC = key.withCString { self.key(db, $0, Int32(strlen($0))) }
        guard keyRC == 0 else {
            connection.close()
            throw SQLCipherConnection.Failure(code: keyRC, message: "sqlite3_key failed")
        }
        return connection
    }
}

/// One connection of the in-process SQLCipher.
final class SQLCipherConnection {
    /// An SQLite error from SQLCipher: its result code and message.
    struct Failure: Error, CustomStringConvertible {
        let code: Int32
        let message: String
        var description: String { "SQLCipher error \(code): \(message)" }
    }

    /// A value to bind to a statement parameter.
    enum Value {
        case integer(Int64)
        case text(String)
    }

    private let library: LoadedSQLCipher
    private var db: OpaquePointer?

    fileprivate init(library: LoadedSQLCipher, db: OpaquePointer?) {
        self.library = library
        self.db = db
    }

    deinit { close() }

    var lastErrorMessage: String {
        library.errorMessage(db).map { String(cString: $0) } ?? "unknown error"
    }

    /// Runs one or more statements that return no rows.
    func execute(_ sql: String) throws {
        let rc = library.exec(db, sql, nil, nil, nil)
        guard rc == 0 else { throw Failure(code: rc, message: lastErrorMessage) }
    }

    /// Runs one statement with `arguments`, and returns its rows as text
    /// (nil for NULL).
    @discardableResult
    func rows(_ sql: String, _ arguments: [Value] = []) throws -> [[String?]] {
        var statement: OpaquePointer?
        let rc = library.prepare(db, sql, -1, &statement, nil)
        guard rc == 0 else { throw Failure(code: rc, message: lastErrorMessage) }
        defer { _ = library.finalize(statement) }
        try bind(statement, arguments)
        var rows: [[String?]] = []
        let columns = library.columnCount(statement)
        while true {
            switch library.step(statement) {
            case 100:   // SQLITE_ROW
                rows.append((0..<columns).map { column in library.columnText(statement, column).map { String(cString: $0) } })
            case 101:   // SQLITE_DONE
                return rows
            case let code:
                throw Failure(code: code, message: lastErrorMessage)
            }
        }
    }

    /// The first column of the first row, as text.
    func string(_ sql: String, _ arguments: [Value] = []) throws -> String? {
        try rows(sql, arguments).first?.first ?? nil
    }

    /// Runs one statement many times, once per list of arguments, reusing
    /// one prepared statement.
    func executeMany(_ sql: String, _ argumentLists: [[Value]]) throws {
        var statement: OpaquePointer?
        let rc = library.prepare(db, sql, -1, &statement, nil)
        guard rc == 0 else { throw Failure(code: rc, message: lastErrorMessage) }
        defer { _ = library.finalize(statement) }
        for arguments in argumentLists {
            try bind(statement, arguments)
            let code = library.step(statement)
            guard code == 101 else { throw Failure(code: code, message: lastErrorMessage) }
            _ = library.reset(statement)
        }
    }

    /// Closes the connection (idempotent): its file is then free for the
    /// other SQLite library of the process.
    func close() {
        guard let db else { return }
        _ = library.close(db)
        self.db = nil
    }

    private func bind(_ statement: OpaquePointer?, _ arguments: [Value]) throws {
        // SQLITE_TRANSIENT: SQLite copies the text before the call returns.
        let transient = UnsafeRawPointer(bitPattern: -1)
        for (index, argument) in arguments.enumerated() {
            let position = Int32(index + 1)
            let rc: Int32
            switch argument {
            case let .integer(value):
                rc = library.bindInt64(statement, position, value)
            case let .text(value):
                rc = value.withCString { library.bindText(statement, position, $0, -1, transient) }
            }
            guard rc == 0 else { throw Failure(code: rc, message: lastErrorMessage) }
        }
    }
}
