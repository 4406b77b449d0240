import GRDB
import GRDBCipher

/// The sniff that decides whether a file may be handed to Litestream,
/// whose SQLite can't read SQLCipher pages and must never write into them.
///
/// A file is plain when its first bytes are a plain SQLite header
/// (``/GRDBCipher/CipherDatabase/isEncrypted(atPath:)`` says false) and a
/// plain read-only connection reads its schema. Any doubt (an empty file,
/// a header that lies, a file that vanished) answers no.
///
/// A file that is busy now is no doubt about what it is: the read waits
/// for the lock a while, then throws, so that the caller tries again
/// later. The replicator remembers a "no" until the file goes away, and a
/// tenant whose read met a checkpoint or a restarting Litestream was
/// refused replication for good (a full test run on 2 cores, once).
///
/// ```swift
/// if try PlainDatabaseFile.isPlain(atPath: path) { try control.register(path: path, replicaURL: url) }
/// ```
enum PlainDatabaseFile {
    /// Whether the file at `path` is a plain SQLite database. Blocking.
    ///
    /// - throws: The `DatabaseError` of a file that stayed locked
    ///   (`SQLITE_BUSY`, `SQLITE_LOCKED`, `SQLITE_PROTOCOL`) for
    ///   `busyTimeout`: no answer yet.
    static func isPlain(atPath path: String, busyTimeout: Double = 5) throws -> Bool {
        guard CipherDatabase.isEncrypted(atPath: path) == false else { return false }
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(busyTimeout)
        // The last connection to close would checkpoint: a parked tenant's
        // WAL stays as Litestream left it.
        configuration.leavingCheckpointsToLitestream()
        do {
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            defer { try? queue.close() }
            _ = try queue.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM sqlite_master") }
            return true
        } catch let error as DatabaseError where [.SQLITE_BUSY, .SQLITE_LOCKED, .SQLITE_PROTOCOL].contains(error.resultCode) {
            throw error
        } catch {
            return false
        }
    }
}
