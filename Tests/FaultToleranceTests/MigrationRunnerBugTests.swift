import Foundation
import GRDB
import GRDBMigrations
import Testing

/// Bugs the fault matrix found in other modules, reproduced without the
/// fault VFS. Each is a known issue until the owning module fixes it.
@Suite struct MigrationRunnerBugTests {
    /// A checksum table that holds a NULL (a foreign file, another tool's
    /// table of the same name, or a page that a faulty disk returned half
    /// zeroed, as the fault matrix's short read does) crashes the process in
    /// `ChecksumStore.storedChecksums` (Row subscript decoding a
    /// non-optional String), where a runner should fail with a typed error.
    @Test(.bug(id: 15, "found by the fault matrix: ChecksumStore.storedChecksums crashes on a NULL identifier or checksum"))
    func aNullChecksumRowFailsWithATypedErrorNotACrash() async {
        await withKnownIssue("GRDBMigrations crashes: found by the fault matrix, reported to the lead") {
            await #expect(processExitsWith: .success) {
                let directory = FileManager.default.temporaryDirectory.appendingPathComponent("null-checksum-\(UUID().uuidString)")
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                defer { try? FileManager.default.removeItem(at: directory) }
                let path = directory.appendingPathComponent("db.sqlite").path
                let queue = try DatabaseQueue(path: path)
                try queue.write { db in
                    try db.execute(sql: """
                        CREATE TABLE \(ChecksumStore.tableName) (identifier, checksum, recordedAt);
                        INSERT INTO \(ChecksumStore.tableName) VALUES (NULL, NULL, NULL);
                        """)
                }
                try queue.close()
                let set = try MigrationSet(name: "items", sqlFiles: [
                    SQLMigrationFile(identifier: "0001_create_item.sql", sql: "CREATE TABLE item(id INTEGER PRIMARY KEY);"),
                ])
                do {
                    try DatabaseMigrationRunner(set: set).migrate(databaseAt: path)
                } catch is MigrationError {
                    // The expected outcome: refused, with a typed error.
                }
            }
        }
    }
}
