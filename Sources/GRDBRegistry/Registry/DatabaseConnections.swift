import Foundation
import GRDB
import Synchronization

/// The process-wide set of open database connections, one per file.
///
/// GRDB's rule is to connect to each database file only once per process:
/// two `DatabasePool`s on one file break `ValueObservation` (a write through
/// one is not seen by observations of the other) and cause `SQLITE_BUSY`.
/// `DatabaseConnections` enforces it: asking twice for the same file, even
/// through another relative path or a symbolic link, returns the same
/// connection for as long as someone uses it.
///
/// ```swift
/// let pool = try DatabaseConnections.shared.pool(atPath: "data/players.sqlite")
/// let same = try DatabaseConnections.shared.pool(atPath: "./data/../data/players.sqlite")
/// assert(pool === same)
/// ```
///
/// The configuration of the first opening wins: later calls for the same
/// file return the open connection, whatever configuration they pass.
/// Asking for a `DatabaseQueue` on a file that is open as a `DatabasePool`
/// (or the reverse) throws ``DatabaseConnectionsError/connectionKindMismatch(path:open:requested:)``.
///
/// ## One file, one set
///
/// The rule holds across sets: a file open in one set (``shared``, the
/// set of a `DatabaseService`, one you created) is refused by every other
/// set of the process with ``DatabaseConnectionsError/openInAnotherSet(path:)``,
/// until it closes. Sharing the connection instead would hand a second
/// owner a writer whose commit checks, drain and close belong to the
/// first: open the file through the set, or the object, that holds it
/// (for a database a `DatabaseService` configures, the service's
/// `writer(named:)`, or the repository it opens for a name declared with
/// `declareRepository(named:migrator:invariants:)`).
/// ``isOpenInAnySet(atPath:)`` tells whether some set holds a file.
///
/// ## File modes
///
/// A database file that does not exist is created with ``fileMode``
/// (0600: readable and writable by its owner only) before SQLite opens it,
/// and SQLite gives its journal, WAL and WAL index the same mode. Folders
/// that ``TenantDirectory`` creates get ``directoryMode`` (0700). Processes
/// of another user that need access (a group of operators, a backup agent)
/// get it through a group:
///
/// ```swift
/// let connections = DatabaseConnections(fileMode: 0o660)    // folders 0770
/// let tenants = try TenantDirectory<PlayerRepository>(root: root, connections: connections)
/// ```
///
/// Existing files and folders keep their mode.
public final class DatabaseConnections: Sendable {
    /// The connections of the process.
    public static let shared = DatabaseConnections()

    /// An open connection, and the set that opened it.
    private struct OpenWriter {
        weak var writer: (any DatabaseWriter)?
        weak var owner: DatabaseConnections?
    }

    private struct State {
        var writers: [String: OpenWriter] = [:]
        /// Files being opened, and what their other callers wait on.
        var opening: [String: DispatchGroup] = [:]
    }

    /// The files open in every set of the process: one table, so that two
    /// sets never open one file.
    private static let state = Mutex(State())

    /// The permission bits of the database files this creates (0600 by
    /// default); see "File modes" above.
    public let fileMode: mode_t

    /// Creates an independent set of connections. Most apps use ``shared``.
    ///
    /// - parameter fileMode: The permission bits of new database files
    ///   (0600 by default: the owner only); 0660 gives the file's group
    ///   access too. Only read and write bits are allowed: setuid, setgid,
    ///   sticky and execute bits have no place on a database.
    public init(fileMode: mode_t = 0o600) {
        precondition(fileMode & ~0o666 == 0 && fileMode & 0o600 == 0o600,
                     "fileMode must give its owner read and write, and only read and write bits (0600, 0640, 0660)")
        self.fileMode = fileMode
    }

    /// Returns the `DatabasePool` open on the file at `path`, opening it
    /// if needed.
    ///
    /// ```swift
    /// let pool = try DatabaseConnections.shared.pool(atPath: "/var/lib/app/players.sqlite")
    /// ```
    public func pool(atPath path: String, configuration: Configuration = Configuration()) throws -> DatabasePool {
        try connection(atPath: path, kind: "DatabasePool") {
            if !configuration.readonly { createDatabaseFile(atPath: $0) }
            return try DatabasePool(path: $0, configuration: configuration)
        }
    }

    /// Returns the `DatabaseQueue` open on the file at `path`, opening it
    /// if needed.
    ///
    /// ```swift
    /// let queue = try DatabaseConnections.shared.queue(atPath: "/var/lib/app/settings.sqlite")
    /// ```
    public func queue(atPath path: String, configuration: Configuration = Configuration()) throws -> DatabaseQueue {
        try connection(atPath: path, kind: "DatabaseQueue") {
            if !configuration.readonly { createDatabaseFile(atPath: $0) }
            return try DatabaseQueue(path: $0, configuration: configuration)
        }
    }

    /// The canonical paths of the files that currently have an open
    /// connection in this set, sorted.
    public var openPaths: [String] {
        Self.state.withLock { state in
            state.writers.filter { $0.value.writer != nil && $0.value.owner === self }.map(\.key).sorted()
        }
    }

    /// Whether a connection is open on the file at `path` in this set.
    ///
    /// ```swift
    /// if DatabaseConnections.shared.isOpen(atPath: "players.sqlite") { ... }
    /// ```
    public func isOpen(atPath path: String) -> Bool {
        guard let key = try? Self.canonicalPath(path) else { return false }
        return Self.state.withLock { state in
            guard let open = state.writers[key], open.writer != nil else { return false }
            return open.owner === self
        }
    }

    /// Whether a connection is open on the file at `path` in any set of
    /// the process: whether a set would refuse to open it with
    /// ``DatabaseConnectionsError/openInAnotherSet(path:)``, unless it is
    /// the one that holds it.
    ///
    /// ```swift
    /// if DatabaseConnections.isOpenInAnySet(atPath: "players.sqlite") { ... }
    /// ```
    public static func isOpenInAnySet(atPath path: String) -> Bool {
        guard let key = try? canonicalPath(path) else { return false }
        return Self.state.withLock { $0.writers[key]?.writer != nil }
    }

    /// Closes `writer`, and forgets it: the next request for its file
    /// opens a new connection.
    ///
    /// ```swift
    /// try DatabaseConnections.shared.close(pool)
    /// ```
    public func close(_ writer: any DatabaseWriter) throws {
        Self.state.withLock { state in
            state.writers = state.writers.filter { $0.value.writer.map { $0 !== writer } ?? false }
        }
        try writer.close()
    }

    private enum OpenStep {
        case found(any DatabaseWriter)
        case elsewhere
        case wait(DispatchGroup)
        case open(DispatchGroup)
    }

    private func connection<Writer: DatabaseWriter>(
        atPath path: String,
        kind: String,
        open: (String) throws -> Writer
    ) throws -> Writer {
        let key = try Self.canonicalPath(path)
        while true {
            // Concurrent first uses of a file open it once: the first caller
            // opens, outside the lock (opening is I/O), and the others wait
            // for it. Other files open meanwhile.
            let step = Self.state.withLock { state -> OpenStep in
                if let open = state.writers[key], let existing = open.writer {
                    return open.owner === self ? .found(existing) : .elsewhere
                }
                // Another set's opening may fail: wait for it, then look again.
                if let group = state.opening[key] { return .wait(group) }
                let group = DispatchGroup()
                group.enter()
                state.opening[key] = group
                return .open(group)
            }
            switch step {
            case let .found(existing):
                guard let writer = existing as? Writer else {
                    throw DatabaseConnectionsError.connectionKindMismatch(
                        path: key, open: String(describing: type(of: existing)), requested: kind)
                }
                return writer
            case .elsewhere:
                throw DatabaseConnectionsError.openInAnotherSet(path: key)
            case let .wait(group):
                group.wait()
            case let .open(group):
                defer { group.leave() }
                let result = Result { try open(key) }
                Self.state.withLock { state in
                    state.opening[key] = nil
                    if case let .success(writer) = result {
                        state.writers[key] = OpenWriter(writer: writer, owner: self)
                        if state.writers.count > 64 {
                            state.writers = state.writers.filter { $0.value.writer != nil }
                        }
                    }
                }
                return try result.get()
            }
        }
    }

    /// Resolves `.`, `..` and symbolic links of the directory, so that every
    /// spelling of a file gives one key. The file itself may not exist yet.
    static func canonicalPath(_ path: String) throws -> String {
        guard !path.isEmpty, path != ":memory:" else {
            throw DatabaseConnectionsError.invalidPath(path)
        }
        let url = URL(fileURLWithPath: path)
        let directory = url.deletingLastPathComponent().standardizedFileURL.resolvingSymlinksInPath()
        let fileURL = directory.appendingPathComponent(url.lastPathComponent)
        // A symbolic link to the database file itself maps to its target.
        if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: fileURL.path) {
            return URL(fileURLWithPath: target, relativeTo: directory).standardizedFileURL.resolvingSymlinksInPath().path
        }
        return fileURL.path
    }
}

/// An error thrown by ``DatabaseConnections``.
public enum DatabaseConnectionsError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The file is already open with another kind of connection.
    case connectionKindMismatch(path: String, open: String, requested: String)

    /// The path does not name a database file.
    case invalidPath(String)

    /// A folder could not be created.
    case cannotCreate(path: String, reason: String)

    /// The file is open in another ``DatabaseConnections`` set of this
    /// process (see "One file, one set" in ``DatabaseConnections``).
    case openInAnotherSet(path: String)

    public var description: String {
        switch self {
        case let .connectionKindMismatch(path, open, requested):
            return "\(path) is already open as a \(open) in this process; a \(requested) can't be opened on it. Use the same kind of connection for every registration of this file."
        case let .invalidPath(path):
            return "\(String(reflecting: path)) is not a database file path: in-memory databases can't be shared, create them with DatabaseQueue() directly."
        case let .cannotCreate(path, reason):
            return "can't create the folder \(path): \(reason). Create it, or give this process the right to write its parent."
        case let .openInAnotherSet(path):
            return "\(path) is already open in another connection set of this process (DatabaseConnections.shared, a DatabaseService's, or one of yours): a file has one connection per process. Open it through the set or the object that holds it (for a database of a DatabaseService's configuration, DatabaseService.declareRepository(named:migrator:invariants:) then repository(named:), or writer(named:))."
        }
    }
}
