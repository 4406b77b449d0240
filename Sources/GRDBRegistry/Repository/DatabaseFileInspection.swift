import Foundation
import GRDB

/// The look a repository takes at an existing database file before it
/// opens its writer there, so that a file it refuses stays byte for byte
/// what it was, with no file created beside it.
///
/// Opening the writer is not neutral: a `DatabasePool` switches a
/// rollback-journal file to WAL (bytes 18 and 19 of its header, through a
/// new `-wal`), and may commit into a new WAL before anything is read.
/// So every reason to refuse an existing file is looked for first,
/// through a read-only connection that creates nothing beside the file:
///
/// - A `-journal` beside the file (a rollback-journal transaction of
///   another process, or one a crash interrupted): `mode=ro`, which reads
///   under SQLite's locks. A hot journal (a crash) can only be rolled back
///   by a writer: the file is not inspected, and the checks run on the
///   writer after that recovery, as before.
/// - No `-wal` beside the file: `immutable=1`. SQLite reads the file as
///   read-only media: no lock, no `-wal`, `-shm` or `-journal`. Without
///   a WAL, the file alone is the whole database. (A transaction another
///   process would start in the meantime is not seen: the writer checks
///   the migrations again, and the first checked write the invariants.)
/// - A `-wal` and its `-shm`: `mode=ro&readonly_shm=1`. SQLite reads the
///   WAL (the committed transactions of the file may be there), and builds
///   its index in memory rather than writing read marks into the `-shm`.
/// - A `-wal` without a `-shm` (files copied after a crash): `mode=ro`.
///   SQLite cannot read a WAL without an index file: it creates the
///   `-shm`, an index of the WAL it can rebuild at any time, which the
///   writer would create anyway. The file and its WAL stay unchanged.
///
/// The caller's configuration is kept but for `readonly` (it carries the
/// encryption key of an encrypted file: the cipher VFS hands SQLite's URI
/// parameters down to the unix VFS, which honours them).
///
/// Other owners of a file read it the same way before they open a writer
/// on it (``read(atPath:configuration:_:)``):
///
/// ```swift
/// let tables = try DatabaseFileInspection.read(atPath: "catalog.sqlite") { db in
///     try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'")
/// }
/// ```
public struct DatabaseFileInspection: Sendable {
    /// The name of the database, for errors.
    let name: String
    /// The database file.
    let path: String
    let migrator: DatabaseMigrator?
    let policy: RepositoryDatabase.MigrationPolicy
    let invariants: [DatabaseInvariant]
    /// The caller's configuration: the key of an encrypted file, the
    /// preparations of every connection.
    let configuration: Configuration
    let onEvent: (@Sendable (ManagedDatabase.Event) -> Void)?

    /// What the inspection found in a file it does not refuse.
    enum Outcome: Equatable {
        /// No file: the writer creates it, and the checks run there.
        case noFile
        /// A hot journal (a crash in a rollback-journal transaction): only
        /// a writer can roll it back, and the checks run there, after.
        case hotJournal
        /// Every migration applied, and the invariants hold.
        case upToDate
        /// Migrations to apply, with the writer (under ``RepositoryDatabase/MigrationPolicy/apply``).
        case pending([String])
    }

    /// Throws the reason to refuse the file, without changing it:
    /// ``DatabaseRepositoryError/foreignDatabase(database:tables:)``,
    /// ``DatabaseRepositoryError/unknownMigrations(database:migrations:)``,
    /// ``DatabaseRepositoryError/pendingMigrations(database:migrations:)``
    /// under ``RepositoryDatabase/MigrationPolicy/refusePending``, an
    /// ``InvariantViolation``, or the error of reading it (a damaged file,
    /// a wrong key).
    func inspect() throws -> Outcome {
        guard FileManager.default.fileExists(atPath: path) else { return .noFile }
        do {
            return try Self.read(atPath: path, configuration: configuration) { db in
                let pending = try Self.pendingMigrations(db, database: name, migrator: migrator, policy: policy)
                guard pending.isEmpty else { return .pending(pending) }
                try checkInvariants(db)
                return .upToDate
            }
        } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_READONLY_ROLLBACK {
            return .hotJournal
        }
    }

    /// Reads the existing database file at `path` through a connection
    /// that leaves it as it was: no byte of the file or of its `-wal`
    /// changes, and no `-wal`, `-shm` or `-journal` is created beside it
    /// (but the `-shm` of a `-wal` that lost it, which SQLite needs to read
    /// the WAL, and rebuilds from it). A file with a hot journal (a crash
    /// in a rollback-journal transaction) throws `SQLITE_READONLY_ROLLBACK`:
    /// only a writer can recover it.
    ///
    /// ```swift
    /// let applied = try DatabaseFileInspection.read(atPath: path, configuration: configuration) { db in
    ///     try migrator.appliedIdentifiers(db)
    /// }
    /// ```
    ///
    /// - parameter path: An existing database file.
    /// - parameter configuration: The configuration of its connections
    ///   (an encryption key, for example); opened read-only.
    /// - parameter value: Reads the database, in a read transaction.
    /// - returns: What `value` returns.
    /// - throws: The error of opening or reading the file: SQLite's (a
    ///   missing or damaged file), or the encryption's (a wrong key).
    public static func read<T>(
        atPath path: String,
        configuration: Configuration = Configuration(),
        _ value: (Database) throws -> T
    ) throws -> T {
        let fileManager = FileManager.default
        let parameters: String
        if fileManager.fileExists(atPath: path + "-journal") {
            parameters = "mode=ro"
        } else if !fileManager.fileExists(atPath: path + "-wal") {
            parameters = "immutable=1"
        } else if fileManager.fileExists(atPath: path + "-shm") {
            parameters = "mode=ro&readonly_shm=1"
        } else {
            parameters = "mode=ro"
        }
        var configuration = configuration
        configuration.readonly = true
        let queue = try DatabaseQueue(path: uri(path, parameters), configuration: configuration)
        defer { try? queue.close() }
        return try queue.read(value)
    }

    /// The full check of the invariants, as the repository runs it at
    /// open: the one call to swap when the invariants' owner changes it.
    private func checkInvariants(_ db: Database) throws {
        try CommitPolicy(database: name, checks: [.invariants(invariants)], enforcing: false, onEvent: onEvent)
            .checkInvariants(db)
    }

    /// The migrations of `migrator` not applied to `db` yet, or the refusal
    /// of its migration state: one rule for the inspection and the writer.
    ///
    /// - A file with tables and none of the migrations is another
    ///   application's, or another schema: migrating it would write into it.
    /// - Under ``RepositoryDatabase/MigrationPolicy/apply``, where the
    ///   repository's migrator owns the schema, a file with applied
    ///   migrations the migrator does not have was migrated by a newer
    ///   version of the application: this one does not know its schema,
    ///   and its writes could break what the newer migrations expect.
    ///   (Under ``RepositoryDatabase/MigrationPolicy/refusePending``,
    ///   another tool migrates the file, and may run ahead of the
    ///   application, as a deployment that migrates first does.)
    static func pendingMigrations(
        _ db: Database,
        database name: String,
        migrator: DatabaseMigrator?,
        policy: RepositoryDatabase.MigrationPolicy
    ) throws -> [String] {
        guard let migrator else { return [] }
        let applied = try migrator.appliedIdentifiers(db)
        if applied.isEmpty {
            let tables = try String.fetchAll(db, sql: """
                SELECT name FROM sqlite_master
                WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_litestream\\_%' ESCAPE '\\' AND name <> 'grdb_migrations'
                ORDER BY name
                """)
            if !tables.isEmpty { throw DatabaseRepositoryError.foreignDatabase(database: name, tables: tables) }
        }
        let known = Set(migrator.migrations)
        let unknown = applied.filter { !known.contains($0) }.sorted()
        if !unknown.isEmpty, policy == .apply { throw DatabaseRepositoryError.unknownMigrations(database: name, migrations: unknown) }
        let pending = migrator.migrations.filter { !applied.contains($0) }
        if !pending.isEmpty, policy == .refusePending {
            throw DatabaseRepositoryError.pendingMigrations(database: name, migrations: pending)
        }
        return pending
    }

    /// `file:///absolute/path?parameters`, the path percent-encoded (SQLite
    /// decodes `%HH` in URI paths, and would read `?` or `#` in a file name
    /// as the start of the query or fragment).
    static func uri(_ path: String, _ parameters: String) -> String {
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        var encoded = ""
        for byte in absolute.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "/"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"):
                encoded.append(Character(Unicode.Scalar(byte)))
            default:
                encoded += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return "file://" + encoded + "?" + parameters
    }
}

extension String {
    fileprivate func leftPadded(to length: Int) -> String {
        count >= length ? self : String(repeating: "0", count: length - count) + self
    }
}
