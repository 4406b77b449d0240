import Foundation
import GRDB
import GRDBSQLite
import Synchronization

/// The read-only connection of a database whose writer is a
/// `DatabaseQueue`, or whose observations must not run on its writer:
/// opened with `SQLITE_OPEN_READONLY` on the writer's file, on first use.
///
/// `PRAGMA query_only`, which GRDB's read-only accesses use on a writable
/// connection, is a switch that SQL can turn off: a read that runs
/// `PRAGMA query_only = 0` can then commit, and GRDB notifies no
/// transaction observer of a read-only access, so no commit check would
/// see it. A connection opened read-only can't be made writable by any SQL;
/// with `ATTACH` also refused (``lockDown(_:)``), a read-only access
/// writes no file at all, not even through `VACUUM INTO`.
///
/// One per managed database (or per read-write ``DatabaseContext``),
/// shared by all its read-only readers; closed with the database.
final class ReadOnlyConnection: Sendable {
    private enum State {
        case unopened
        /// Open, or closed by ``close()``: a closed queue stays, so that
        /// late accesses get GRDB's "connection is closed" error.
        case opened(DatabaseQueue)
        case failed(any Error)
    }

    private let writerPath: String
    private let writerConfiguration: Configuration
    private let state = Mutex(State.unopened)

    init(writer: any DatabaseReader) {
        self.writerPath = writer.path
        self.writerConfiguration = writer.configuration
    }

    /// The read-only connection, opened on first use.
    ///
    /// - throws: ``DatabaseContextError/noReadOnlyConnection(database:)``
    ///   for a private in-memory database, which no other connection can
    ///   open; the error of opening the file.
    func queue() throws -> DatabaseQueue {
        try state.withLock { state in
            switch state {
            case let .opened(queue): return queue
            case let .failed(error): throw error
            case .unopened: break
            }
            do {
                let queue = try open()
                state = .opened(queue)
                return queue
            } catch {
                state = .failed(error)
                throw error
            }
        }
    }

    /// Closes the connection, if open; later accesses through it throw.
    func close() {
        let queue: DatabaseQueue? = state.withLock { state in
            switch state {
            case let .opened(queue): return queue
            case .unopened:
                state = .failed(ManagedDatabaseError.closed(database: writerPath))
                return nil
            case .failed: return nil
            }
        }
        try? queue?.close()
    }

    private func open() throws -> DatabaseQueue {
        guard let path = Self.readOnlyPath(ofWriterAt: writerPath) else {
            throw DatabaseContextError.noReadOnlyConnection(database: writerPath)
        }
        var configuration = writerConfiguration
        configuration.readonly = true
        configuration.label = (writerConfiguration.label ?? "GRDBRegistry") + ".readOnly"
        if case .immediateError = configuration.busyMode {
            // A rollback-journal writer locks readers out while it commits.
            configuration.busyMode = .timeout(5)
        }
        configuration.prepareDatabase { db in
            Self.refuseAttach(db)
        }
        return try DatabaseQueue(path: path, configuration: configuration)
    }

    /// The path that opens the writer's database read-only, or nil for a
    /// private in-memory database (`DatabaseQueue()`, or a shared-cache
    /// one, whose connections share one writable btree).
    static func readOnlyPath(ofWriterAt path: String) -> String? {
        if path.isEmpty || path == ":memory:" { return nil }
        if path.hasPrefix("file:") {
            // An in-memory database of the memdb VFS
            // (``GRDB/DatabaseQueue/inMemoryWithReadOnlyAccess(configuration:)``):
            // its other connections are separate, and `mode=ro` makes one
            // read-only.
            guard path.contains("vfs=memdb") else { return nil }
            return path + "&mode=ro"
        }
        return path
    }

    /// Refuses `ATTACH` on the connection (so `VACUUM` and `VACUUM INTO`
    /// too, which attach their target): SQL can't raise the limit.
    static func refuseAttach(_ db: Database) {
        guard let connection = db.sqliteConnection else { return }
        sqlite3_limit(connection, SQLITE_LIMIT_ATTACHED, 0)
    }

    /// Drops the temporary tables, views and triggers that an access
    /// created, and tells whether there were any.
    ///
    /// A connection SQLite opened read-only still writes its `temp`
    /// schema: a `CREATE TEMP TABLE player` would shadow `main.player` for
    /// every later read on that connection, readers of other requests
    /// included. Read-only accesses create none, so any found is removed
    /// before the connection serves another read.
    static func dropTemporarySchema(_ db: Database) throws -> Bool {
        let objects = try Row.fetchAll(db.cachedStatement(sql: """
            SELECT type, name FROM sqlite_temp_master
            WHERE type IN ('trigger', 'view', 'table')
            ORDER BY CASE type WHEN 'trigger' THEN 0 WHEN 'view' THEN 1 ELSE 2 END
            """))
        if objects.isEmpty { return false }
        for object in objects {
            let type: String = object["type"]
            let name: String = object["name"]
            let keyword = type == "trigger" ? "TRIGGER" : type == "view" ? "VIEW" : "TABLE"
            try db.execute(sql: "DROP \(keyword) IF EXISTS temp.\(name.quotedDatabaseIdentifier)")
        }
        return true
    }

    /// Runs `access` with `ATTACH` refused, then restores the connection's
    /// limit: for the readers of a pool, which its owner's own code (a
    /// backup through `VACUUM INTO`) may use too.
    static func withAttachRefused<T>(_ db: Database, _ access: () throws -> T) rethrows -> T {
        guard let connection = db.sqliteConnection else { return try access() }
        let previous = sqlite3_limit(connection, SQLITE_LIMIT_ATTACHED, 0)
        defer { sqlite3_limit(connection, SQLITE_LIMIT_ATTACHED, previous) }
        return try access()
    }
}

extension DatabaseQueue {
    /// An in-memory database that read-only readers can read through a
    /// connection of their own: what ``RepositoryDatabase``'s read-only
    /// ``RepositoryDatabase/reader`` and ``DatabaseContext/readOnly()``
    /// need, for tests and previews. (A plain `DatabaseQueue()` has one
    /// connection, which can write: a read-only reader refuses it with
    /// ``DatabaseContextError/noReadOnlyConnection(database:)``.)
    ///
    /// ```swift
    /// let players = try RepositoryDatabase(
    ///     writer: DatabaseQueue.inMemoryWithReadOnlyAccess(),
    ///     migrator: migrator, invariants: invariants)
    /// ```
    ///
    /// The database lives until its last connection closes.
    public static func inMemoryWithReadOnlyAccess(configuration: Configuration = Configuration()) throws -> DatabaseQueue {
        // SQLite's memdb VFS: a name that starts with "/" is shared by the
        // connections of the process, each with its own pager (and so its
        // own read-only flag), unlike a shared-cache database.
        try DatabaseQueue(path: "file:/grdbregistry-\(UUID().uuidString)?vfs=memdb", configuration: configuration)
    }
}
