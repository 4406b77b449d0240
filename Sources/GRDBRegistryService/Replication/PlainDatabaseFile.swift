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
/// ```swift
/// if PlainDatabaseFile.isPlain(atPath: path) { try control.register(path: path, replicaURL: url) }
/// ```
enum PlainDatabaseFile {
    /// Whether the file at `path` is a plain SQLite database. Blocking.
    static func isPlain(atPath path: String) -> Bool {
        guard CipherDatabase.isEncrypted(atPath: path) == false else { return false }
        var configuration = Configuration()
        configuration.readonly = true
        do {
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            defer { try? queue.close() }
            _ = try queue.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM sqlite_master") }
            return true
        } catch {
            return false
        }
    }
}
