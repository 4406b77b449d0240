import Foundation
import GRDB
import GRDBBackup
import GRDBCipher

extension FaultScenario {
    /// `DatabaseBackup.backUp`: an online copy of a database (ciphertext
    /// under the same key when encrypted), written under a temporary name,
    /// checked, then linked to its final name. Under a fault the source
    /// must stay exactly as it was, and the destination must be either
    /// absent (the backup failed, no temporary file left) or a complete,
    /// sound copy (the backup succeeded).
    ///
    /// Plain sources leave out the mid-file short read, as the migration
    /// scenarios do: SQLite reads SQLITE_IOERR_SHORT_READ as zeros past the
    /// end of the file, and `VACUUM INTO` copies them. Measured: 6 of 111
    /// plain runs published a backup whose overflow payloads were zeroed and
    /// that still passed `integrity_check`. That is a disk that lies, which
    /// plain SQLite can't detect; encrypted sources keep the fault, and the
    /// page HMAC refuses the zeros.
    static func backup(encrypted: Bool) -> FaultScenario {
        FaultScenario(name: "DatabaseBackup.backUp", encrypted: encrypted, namesTheDatabase: true, prepare: { directory in
            let path = directory + "/db.sqlite"
            let destinationDirectory = directory + "/backup"
            let destination = destinationDirectory + "/db.sqlite"
            try FileManager.default.createDirectory(atPath: destinationDirectory, withIntermediateDirectories: true)
            let expected = (1...6).map { payload($0, count: 3000) }
            do {
                let queue = try freshQueue(path, encrypted: encrypted)
                try queue.write { db in
                    try db.execute(sql: "CREATE TABLE item(id INTEGER PRIMARY KEY, payload BLOB NOT NULL)")
                    for (index, data) in expected.enumerated() {
                        try db.execute(sql: "INSERT INTO item VALUES (?, ?)", arguments: [index + 1, data])
                    }
                }
                try queue.close()
            }
            let source = try DatabaseQueue(path: path, configuration: encryptedConfiguration(encrypted))
            let encryption = encrypted ? BackupEncryption(key: faultKey, kdfIterations: faultIterations) : nil
            return PreparedOperation(
                run: { _ = try DatabaseBackup.backUp(source, to: URL(fileURLWithPath: destination), encryption: encryption, name: "catalog") },
                close: { try? source.close() },
                check: { succeeded in
                    // The source: every row, as before.
                    let queue = try freshQueue(path, encrypted: encrypted)
                    let rows = try queue.read { try Data.fetchAll($0, sql: "SELECT payload FROM item ORDER BY id") }
                    try queue.close()
                    guard rows == expected else { return .lostAcknowledged("the source lost or changed rows: \(rows.count) of 6 left") }
                    // No temporary file outlives the operation.
                    let leftovers = try FileManager.default.contentsOfDirectory(atPath: destinationDirectory).filter { $0 != "db.sqlite" }
                    guard leftovers.isEmpty else { return .inconsistent("files left in the backup directory: \(leftovers)") }
                    let exists = FileManager.default.fileExists(atPath: destination)
                    if exists {
                        // A backup under its final name is whole and sound.
                        if let problem = integrityProblem(destination, key: encrypted ? faultKey : nil) {
                            return .inconsistent("the backup is published but damaged: \(problem)")
                        }
                        guard CipherDatabase.isEncrypted(atPath: destination) == encrypted else {
                            return .inconsistent("the backup is published \(encrypted ? "in plaintext" : "encrypted")")
                        }
                        let copy = try freshQueue(destination, encrypted: encrypted)
                        defer { try? copy.close() }
                        let copied = try copy.read { try Data.fetchAll($0, sql: "SELECT payload FROM item ORDER BY id") }
                        guard copied == expected else { return .inconsistent("the backup is published with \(copied.count) of 6 rows") }
                    }
                    switch (exists, succeeded) {
                    case (true, true), (false, false): return .acknowledged
                    case (true, false): return .failedButDurable
                    case (false, true): return .lostAcknowledged("the backup succeeded, but no file is under its name")
                    }
                },
                path: path,
                key: { encrypted ? faultKey : nil },
                databaseName: "catalog")
        }, excludedKinds: encrypted ? [] : ["short read"])
    }
}
