import Foundation
import GRDB
import GRDBCipher

/// Why a key did not open a file, when the likely cause is the format and
/// not the key: a SQLCipher 3 file opened as 4 fails with a page-geometry
/// or wrong-key error that does not say so.
enum CipherFormatHint {
    /// When `error` came from opening `path` as `compatibility`, and the
    /// file opens with the same key as the other version (at its default
    /// page size), an error that says so, and `remedy` (given that
    /// version) says what to do; otherwise
    /// `error` as it is.
    ///
    /// ```swift
    /// do { try CipherDatabase.inspect(atPath: path, key: key) }
    /// catch { throw CipherFormatHint.explain(error, path: path, key: key, compatibility: .v4) { "pass --compatibility \($0)" } }
    /// ```
    static func explain(_ error: any Error, path: String, key: CipherKey, compatibility: CipherCompatibility, remedy: (Int) -> String) -> any Error {
        let other: CipherCompatibility = compatibility == .v4 ? .v3 : .v4
        guard opens(path, key: key, compatibility: other) else { return error }
        let version = other == .v3 ? 3 : 4
        return CipherCommandError(message:
            "\(error)\nThe likely cause: \(path) is a SQLCipher \(version) file, and it was opened as SQLCipher \(version == 3 ? 4 : 3). "
                + "\(remedy(version)).")
    }

    /// Whether `path` opens with `key` as `compatibility`, read-only: its
    /// schema can be read.
    private static func opens(_ path: String, key: CipherKey, compatibility: CipherCompatibility) -> Bool {
        var configuration = Configuration()
        configuration.readonly = true
        configuration.distrustSchema()
        guard let queue = try? CipherDatabase.queue(atPath: path, key: key, compatibility: compatibility, configuration: configuration) else {
            return false
        }
        defer { try? queue.close() }
        return (try? queue.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM sqlite_master") }) != nil
    }
}
