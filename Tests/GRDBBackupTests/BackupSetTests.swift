import Foundation
import GRDB
import GRDBBackup
import Testing

/// A backup set takes each database once, under a name that is a plain
/// file name, and nothing once its manifest is written; a directory that
/// already holds files is not a new backup.
@Suite struct BackupSetTests {
    @Test func aBackupSetTakesEachDatabaseOnceAndNothingAfterItsManifest() throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.path("catalog.sqlite"))
        try queue.write { db in try db.execute(sql: "CREATE TABLE t(x); INSERT INTO t VALUES (1)") }
        let backup = try BackupSet(creatingAt: directory.url("backup"), logger: testLogger)
        let entry = try backup.add(.database, named: "catalog", from: queue)
        #expect(entry.path == "databases/catalog.sqlite" && entry.encryption == nil && entry.migrations == [])
        #expect(throws: BackupError.duplicateEntry(name: "database catalog")) { try backup.add(.database, named: "catalog", from: queue) }
        for name in ["../escape", ".hidden", "a/b", ""] {
            #expect(throws: BackupError.invalidName(name)) { try backup.add(.database, named: name, from: queue) }
        }
        #expect(throws: BackupError.invalidName("Acme")) { try backup.add(.tenant, named: "Acme", from: queue) }
        #expect(throws: BackupError.copyFailed(database: "database missing", reason: "\(directory.path("missing.sqlite")) does not exist")) {
            try backup.add(.database, named: "missing", databaseAt: directory.path("missing.sqlite"))
        }
        #expect(FileManager.default.fileExists(atPath: directory.path("missing.sqlite")) == false, "a backup created the database it could not find")
        let manifest = try backup.finish()
        #expect(manifest.files == [entry])
        #expect(try BackupManifest.read(fromDirectory: directory.url("backup")) == manifest)
        #expect(throws: BackupError.setFinished(directory: directory.path("backup"))) { try backup.add(.database, named: "other", from: queue) }
        #expect(throws: BackupError.setFinished(directory: directory.path("backup"))) { try backup.finish() }
        #expect(throws: BackupError.directoryNotEmpty(path: directory.path("backup"))) {
            try BackupSet(creatingAt: directory.url("backup"), logger: testLogger)
        }
        try queue.close()
    }
}
