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
public final class DatabaseConnections: Sendable {
    /// The connections of the process.
    public static let shared = DatabaseConnections()

    private struct WeakWriter {
        weak var writer: (any DatabaseWriter)?
    }

    private let writers = Mutex<[String: WeakWriter]>([:])

    /// Creates an independent set of connections. Most apps use ``shared``.
    public init() { }

    /// Returns the `DatabasePool` open on the file at `path`, opening it
    /// if needed.
    ///
    /// ```swift
    /// let pool = try DatabaseConnections.shared.pool(atPath: "/var/lib/app/players.sqlite")
    /// ```
    public func pool(atPath path: String, configuration: Configuration = Configuration()) throws -> DatabasePool {
        try connection(atPath: path, kind: "DatabasePool") {
            try DatabasePool(path: $0, configuration: configuration)
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
            try DatabaseQueue(path: $0, configuration: configuration)
        }
    }

    /// The canonical paths of the files that currently have an open
    /// connection, sorted.
    public var openPaths: [String] {
        writers.withLock { writers in
            writers.filter { $0.value.writer != nil }.map(\.key).sorted()
        }
    }

    /// Whether a connection is open on the file at `path`.
    ///
    /// ```swift
    /// if DatabaseConnections.shared.isOpen(atPath: "players.sqlite") { ... }
    /// ```
    public func isOpen(atPath path: String) -> Bool {
        guard let key = try? Self.canonicalPath(path) else { return false }
        return writers.withLock { $0[key]?.writer != nil }
    }

    /// Closes `writer`, and forgets it: the next request for its file
    /// opens a new connection.
    ///
    /// ```swift
    /// try DatabaseConnections.shared.close(pool)
    /// ```
    public func close(_ writer: any DatabaseWriter) throws {
        writers.withLock { writers in
            writers = writers.filter { $0.value.writer.map { $0 !== writer } ?? false }
        }
        try writer.close()
    }

    private func connection<Writer: DatabaseWriter>(
        atPath path: String,
        kind: String,
        open: (String) throws -> Writer
    ) throws -> Writer {
        let key = try Self.canonicalPath(path)
        // Opening under the lock makes concurrent first uses of a file open
        // it once. Opening is fast (no I/O beyond the file header), and
        // independent files rarely open at the same instant.
        return try writers.withLock { writers in
            if let existing = writers[key]?.writer {
                guard let writer = existing as? Writer else {
                    throw DatabaseConnectionsError.connectionKindMismatch(
                        path: key, open: String(describing: type(of: existing)), requested: kind)
                }
                return writer
            }
            let writer = try open(key)
            writers[key] = WeakWriter(writer: writer)
            if writers.count > 64 {
                writers = writers.filter { $0.value.writer != nil }
            }
            return writer
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

    public var description: String {
        switch self {
        case let .connectionKindMismatch(path, open, requested):
            return "\(path) is already open as a \(open) in this process; a \(requested) can't be opened on it. Use the same kind of connection for every registration of this file."
        case let .invalidPath(path):
            return "\(String(reflecting: path)) is not a database file path: in-memory databases can't be shared, create them with DatabaseQueue() directly."
        }
    }
}
