import GRDB

/// An SQLite error of a ``RepositoryDatabase``, naming the database: a
/// write that failed (a full disk, an I/O error, a constraint), or a file
/// that can't be opened (damaged, not a database, locked).
///
/// GRDB's `DatabaseError` does not say which database failed; a process
/// that holds many (one per tenant) must. The SQLite error stays available,
/// for callers who switch on its code:
///
/// ```swift
/// do {
///     try await players.add(name: "Arthur")
/// } catch let error as RepositoryOperationError where error.resultCode == .SQLITE_FULL {
///     logger.error("disk full", metadata: ["database": "\(error.database)"])
/// }
/// ```
public struct RepositoryOperationError: Error, CustomStringConvertible, Sendable {
    /// What the repository was doing.
    public enum Operation: String, Sendable {
        /// Opening the file, migrating it, and checking its invariants.
        case open
        /// A write transaction.
        case write
    }

    /// The database's name (its repository's name, or path).
    public var database: String
    /// What the repository was doing.
    public var operation: Operation
    /// The error of SQLite, as GRDB reported it.
    public var underlying: DatabaseError

    /// Names `database` in the SQLite error `underlying`.
    public init(database: String, operation: Operation, underlying: DatabaseError) {
        self.database = database
        self.operation = operation
        self.underlying = underlying
    }

    /// The primary result code of the SQLite error (`SQLITE_FULL`, …).
    public var resultCode: ResultCode { underlying.resultCode }
    /// The extended result code of the SQLite error (`SQLITE_IOERR_FSYNC`, …).
    public var extendedResultCode: ResultCode { underlying.extendedResultCode }

    /// Whether SQLite found the file damaged or not a database at all: it
    /// needs an operator (restore from a backup), not a retry.
    public var isDamagedFile: Bool {
        resultCode == .SQLITE_CORRUPT || resultCode == .SQLITE_NOTADB
    }

    public var description: String {
        let advice: String
        switch resultCode {
        case .SQLITE_FULL:
            advice = "The disk (or the file size limit) is full: free space, then retry. Committed data is intact."
        case .SQLITE_IOERR:
            advice = "The storage failed: check the disk, then retry. Committed data is intact unless the disk lost it."
        case .SQLITE_CORRUPT, .SQLITE_NOTADB:
            advice = "The file is damaged or is not this database: it was left untouched. Restore it from a backup, or check it with `registryctl verify`."
        case .SQLITE_BUSY, .SQLITE_LOCKED:
            advice = "Another connection holds the database: retry later."
        case .SQLITE_READONLY, .SQLITE_PERM, .SQLITE_CANTOPEN:
            advice = "The file can't be opened or written: check its path and permissions."
        default:
            advice = operation == .write ? "The transaction was rolled back." : "Nothing was changed."
        }
        let verb = operation == .write ? "A write to" : "Opening"
        return "\(verb) \(database) failed: \(underlying). \(advice)"
    }
}

extension RepositoryOperationError {
    /// Runs `body`, and names the database in its SQLite errors.
    static func naming<T>(_ database: String, _ operation: Operation, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as DatabaseError {
            throw RepositoryOperationError(database: database, operation: operation, underlying: error)
        }
    }

    /// Runs `body`, and names the database in its SQLite errors.
    static func naming<T>(_ database: String, _ operation: Operation, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as DatabaseError {
            throw RepositoryOperationError(database: database, operation: operation, underlying: error)
        }
    }
}
