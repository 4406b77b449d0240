import CSQLCipherVFS
import Foundation
import GRDB
@testable import GRDBCipher
import Testing

/// The security review's reproductions (../shared/reviews/cipher-security),
/// driven from Swift: page geometry, plaintext in journals and WALs, wrong
/// keys and hot journals, VACUUM INTO and ATTACH targets. Every bad input
/// is a typed error and leaves every file byte-for-byte unchanged.
@Suite struct FailClosedTests {
    let key = CipherKey.passphrase("fail closed")

    /// Every file of the directory and its bytes.
    private func snapshot(_ directory: TemporaryDirectory) throws -> [String: Data] {
        var files: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.url.path) {
            files[name] = try Data(contentsOf: directory.url.appendingPathComponent(name))
        }
        return files
    }

    /// A plaintext database made by the real `sqlite3` tool, with `rows`
    /// rows holding `marker`.
    private func sqlite3Database(_ path: String, pageSize: Int? = nil, rows: Int = 300, marker: String = "SECRET_ROW") async throws {
        let pragma = pageSize.map { "PRAGMA page_size = \($0);" } ?? ""
        let script = """
            \(pragma)
            CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);
            WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < \(rows))
            INSERT INTO t SELECT i, '\(marker)-' || i || '-' || hex(randomblob(20)) FROM c;
            """
        let sqlite3 = try await runChildProcess("/usr/bin/sqlite3", [path], input: script)
        #expect(sqlite3.status == 0, "\(sqlite3.output)")
    }

    private func rowCount(_ writer: some DatabaseReader) throws -> Int? {
        try writer.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") }
    }

    // MARK: - The issue's two user-visible failures, against the real oracles

    /// `registryctl encrypt --compatibility 3` of a database made by the
    /// sqlite3 tool (4096-byte pages) gave a corrupt copy.
    @Test func aV3CopyOfASqlite3DatabaseWith4096BytePagesOpensInSQLCipher341() async throws {
        let directory = try TemporaryDirectory()
        let plain = directory.path("plain.sqlite"), encrypted = directory.path("v3.sqlite")
        try await sqlite3Database(plain)
        try CipherDatabase.encryptedCopy(ofPlaintextAt: plain, to: encrypted, with: key, compatibility: .v3, kdfIterations: fastIterations)
        let result = try await sqlcipher(encrypted, """
            PRAGMA key = 'fail closed';
            PRAGMA kdf_iter = \(fastIterations);
            SELECT count(*), sum(v LIKE 'SECRET_ROW-%') FROM t;
            PRAGMA integrity_check;
            """)
        #expect(result.output == "300|300\nok\n", "\(result.output)")
        #expect(try CipherDatabase.verify(atPath: encrypted, key: key, compatibility: .v3, kdfIterations: fastIterations) == nil)
        #expect(try directory.filesContaining("SECRET_ROW").sorted() == ["plain.sqlite"])
    }

    /// `--compatibility 4` of a database of 1024-byte pages passed our
    /// verify and failed SQLCipher 4.19's HMAC check.
    @Test func aV4CopyOfADatabaseWith1024BytePagesOpensInSQLCipher4() async throws {
        let directory = try TemporaryDirectory()
        let plain = directory.path("plain.sqlite"), encrypted = directory.path("v4.sqlite")
        try await sqlite3Database(plain, pageSize: 1024)
        try CipherDatabase.encryptedCopy(ofPlaintextAt: plain, to: encrypted, with: key, kdfIterations: fastIterations)
        let result = try await sqlcipher4Python("""
            import sqlcipher3
            c = sqlcipher3.connect('\(encrypted)')
            c.execute("PRAGMA key = 'fail closed'")
            c.execute("PRAGMA kdf_iter = \(fastIterations)")
            print(c.execute("SELECT count(*), sum(v LIKE 'SECRET_ROW-%') FROM t").fetchone())
            print(c.execute('PRAGMA cipher_integrity_check').fetchall())
            print(c.execute('PRAGMA page_size').fetchone()[0])
            """)
        #expect(result.output == "(300, 300)\n[]\n4096\n", "\(result.output)")
    }

    // MARK: - Finding 1: no plaintext in journals and WALs

    /// `PRAGMA page_size = 8192; VACUUM` used to leave rows in clear in the
    /// next journal or WAL: refused, with a message that says what to do.
    @Test(arguments: ["delete", "wal"])
    func changingThePageSizeOfAnEncryptedDatabaseIsRefusedAndLeavesNoPlaintext(journalMode: String) throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let queue = try CipherDatabase.queue(atPath: path, key: key, kdfIterations: fastIterations)
        try queue.writeWithoutTransaction { db in
            _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = \(journalMode)")
            try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t(v) VALUES ('SECRET_ROW_ONE')")
        }
        let error = #expect(throws: DatabaseError.self) {
            try queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA page_size = 8192; VACUUM") }
        }
        #expect(error?.message?.contains("cipher_page_size") == true, "\(String(describing: error))")
        try queue.write { db in try db.execute(sql: "INSERT INTO t(v) VALUES ('SECRET_ROW_TWO')") }
        #expect(try queue.read { db in try Int.fetchOne(db, sql: "PRAGMA page_size") } == 4096)
        #expect(try directory.filesContaining("SECRET_ROW") == [])
        try queue.close()
        #expect(try CipherDatabase.verify(atPath: path, key: key, kdfIterations: fastIterations) == nil)
    }

    /// An application's own `PRAGMA page_size` after `encrypt()` made every
    /// WAL frame plaintext: now refused before anything is written.
    @Test func anApplicationPageSizeUnlikeTheCipherPageSizeFailsBeforeWriting() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        var configuration = Configuration()
        try configuration.encrypt(with: key, kdfIterations: fastIterations)
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA page_size = 16384") }
        #expect(throws: DatabaseError.self) { _ = try DatabaseQueue(path: path, configuration: configuration) }
        #expect(try directory.filesContaining("SQLite format 3") == [])
    }

    /// SQLCipher-style SQL only, on a new file: cipher_compatibility = 3
    /// and PRAGMA key, no Configuration.encrypt. SQLite's default page size
    /// (4096) used to meet the v3 codec's 1024 and leave rows in the WAL.
    @Test func sqlOnlyKeyingOfANewV3DatabaseUsesTheCodecGeometry() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        try CipherVFS.register()
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA cipher_compatibility = 3")
            try db.execute(sql: "PRAGMA key = 'fail closed'")
        }
        // The v3 default of 64,000 KDF iterations, on both sides.
        let pool = try DatabasePool(path: path, configuration: configuration)
        try await pool.write { db in
            try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
            for index in 0..<200 { try db.execute(sql: "INSERT INTO t(v) VALUES (?)", arguments: ["SECRET_ROW-\(index)"]) }
        }
        #expect(try directory.filesContaining("SECRET_ROW") == [])
        await #expect(try pool.read { db in try Int.fetchOne(db, sql: "PRAGMA page_size") } == 1024)
        try pool.close()
        let result = try await sqlcipher(path, "PRAGMA key = 'fail closed';\nSELECT count(*) FROM t;\nPRAGMA integrity_check;\n")
        #expect(result.output == "200\nok\n", "\(result.output)")
    }

    /// A keyless attacker changes the page size in a plaintext header (not
    /// covered by the HMAC) and pads the file: the next schema write used to
    /// journal decrypted pages. Now the open fails, naming the geometry,
    /// and nothing is written.
    @Test(arguments: ["delete", "wal"])
    func aTamperedPlaintextHeaderGeometryIsRefusedAndNothingIsWritten(journalMode: String) throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let salt = Data((0..<16).map { UInt8($0) })
        var configuration = Configuration()
        try configuration.encrypt(with: key, kdfIterations: fastIterations, plaintextHeader: CipherPlaintextHeader(salt: salt))
        do {
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            try queue.writeWithoutTransaction { db in
                _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = \(journalMode)")
                try db.execute(sql: "CREATE TABLE t(v); INSERT INTO t VALUES ('SECRET_EXISTING_ROW')")
            }
            try queue.close()
        }
        var file = try Data(contentsOf: URL(fileURLWithPath: path))
        file[16] = 0x20; file[17] = 0x00                   // 8192-byte pages
        file[28] = 0; file[29] = 0; file[30] = 0; file[31] = 2
        file.append(Data(count: 8192))
        try file.write(to: URL(fileURLWithPath: path))
        let before = try snapshot(directory)
        let error = #expect(throws: CipherError.self) {
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            try queue.write { db in try db.execute(sql: "CREATE TABLE IF NOT EXISTS audit(x)") }
        }
        #expect(error == .pageGeometry(path: path, pageSize: 4096, reserve: 80, foundPageSize: 8192, foundReserve: 80))
        #expect(try snapshot(directory) == before)
        #expect(try directory.filesContaining("SECRET_EXISTING_ROW") == [])
    }

    // MARK: - Finding 2: the reserve never overwrites row bytes

    /// A keyless attacker sets the reserved-space byte of a plaintext
    /// header (not covered by the HMAC) to 0: the next rows used to be
    /// written over by IVs and HMACs, silently. Now the open fails and
    /// nothing is written.
    @Test func aReserveUnlikeTheCodecsIsRefusedInsteadOfOverwritingRows() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        var configuration = Configuration()
        try configuration.encrypt(with: key, kdfIterations: fastIterations, plaintextHeader: CipherPlaintextHeader(salt: Data(count: 16)))
        do {
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            try queue.write { db in try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t VALUES (1, 'first row')") }
            try queue.close()
        }
        var file = try Data(contentsOf: URL(fileURLWithPath: path))
        file[20] = 0
        try file.write(to: URL(fileURLWithPath: path))
        let before = try snapshot(directory)
        #expect(throws: CipherError.pageGeometry(path: path, pageSize: 4096, reserve: 80, foundPageSize: 4096, foundReserve: 0)) {
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            try queue.write { db in try db.execute(sql: "INSERT INTO t(v) VALUES ('second row')") }
        }
        #expect(try snapshot(directory) == before)
    }

    // MARK: - Finding 3: a wrong key touches nothing

    /// A crash image in the middle of an UPDATE that spilled: a hot journal.
    /// One open with a wrong key used to delete it, leaving a torn update.
    @Test func aWrongKeyLeavesAHotJournalAndTheDatabaseUntouched() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite"), image = directory.path("image.sqlite")
        let queue = try CipherDatabase.queue(atPath: path, key: key, kdfIterations: fastIterations)
        try queue.writeWithoutTransaction { db in
            _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = DELETE")
            try db.execute(sql: """
                CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);
                WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 3000)
                INSERT INTO t SELECT i, printf('original-%06d', i) FROM c;
                PRAGMA cache_size = 2;
                BEGIN;
                UPDATE t SET v = 'HALF-DONE-UPDATE';
                """)
            // The crash image: the database with spilled pages, and its journal.
            for suffix in ["", "-journal"] {
                try FileManager.default.copyItem(atPath: path + suffix, toPath: image + suffix)
            }
            try db.execute(sql: "ROLLBACK")
        }
        try queue.close()
        let before = try snapshot(directory)
        #expect(before["image.sqlite-journal"] != nil)
        #expect(throws: CipherError.wrongKey(path: image)) {
            _ = try CipherDatabase.queue(atPath: image, key: .passphrase("wrong"), kdfIterations: fastIterations)
        }
        let after = try snapshot(directory)
        #expect(after == before, "changed: \(after.keys.filter { after[$0] != before[$0] }.sorted()), \(before.keys.sorted()) -> \(after.keys.sorted())")
        let recovered = try CipherDatabase.queue(atPath: image, key: key, kdfIterations: fastIterations)
        #expect(try recovered.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t WHERE v LIKE 'original-%'") } == 3000)
        #expect(try recovered.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") } == "ok")
    }

    /// A hot WAL and a wrong key: the WAL is neither checkpointed nor deleted.
    @Test func aWrongKeyLeavesAHotWALAndTheDatabaseUntouched() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite"), image = directory.path("image.sqlite")
        let pool = try CipherDatabase.pool(atPath: path, key: key, kdfIterations: fastIterations)
        try pool.write { db in
            try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
            for index in 0..<500 { try db.execute(sql: "INSERT INTO t(v) VALUES (?)", arguments: ["row-\(index)"]) }
        }
        for suffix in ["", "-wal"] { try FileManager.default.copyItem(atPath: path + suffix, toPath: image + suffix) }
        try pool.close()
        let before = try snapshot(directory)
        #expect(throws: CipherError.wrongKey(path: image)) {
            _ = try CipherDatabase.pool(atPath: image, key: .passphrase("wrong"), kdfIterations: fastIterations)
        }
        var after = try snapshot(directory)
        after["image.sqlite-shm"] = nil    // the WAL index, rebuilt from the WAL
        #expect(after == before)
        let recovered = try CipherDatabase.queue(atPath: image, key: key, kdfIterations: fastIterations)
        #expect(try rowCount(recovered) == 500)
    }

    // MARK: - Finding 4: VACUUM INTO and ATTACH targets

    /// A backup with VACUUM INTO, or a table copied to an attached new
    /// file, used to be plaintext: they take the connection's key.
    @Test func vacuumIntoAndAttachTargetsOfAnEncryptedConnectionAreEncrypted() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite"), backup = directory.path("backup.sqlite"), attached = directory.path("attached.sqlite")
        let queue = try CipherDatabase.queue(atPath: path, key: key, kdfIterations: fastIterations)
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t(v) VALUES ('SECRET_VALUE')")
            try db.execute(sql: "VACUUM INTO ?", arguments: [backup])
            try db.execute(sql: "ATTACH ? AS aux", arguments: [attached])
            try db.execute(sql: "CREATE TABLE aux.copy AS SELECT * FROM main.t")
            try db.execute(sql: "DETACH aux")
        }
        try queue.close()
        #expect(CipherDatabase.isEncrypted(atPath: backup) == true)
        #expect(CipherDatabase.isEncrypted(atPath: attached) == true)
        #expect(try directory.filesContaining("SECRET_VALUE") == [])
        #expect(try rowCount(CipherDatabase.queue(atPath: backup, key: key, kdfIterations: fastIterations)) == 1)
        let copy = try CipherDatabase.queue(atPath: attached, key: key, kdfIterations: fastIterations)
        #expect(try copy.read { db in try String.fetchOne(db, sql: "SELECT v FROM copy") } == "SECRET_VALUE")
    }

    /// Pending keys were matched by exact path: through a symbolic link to
    /// the directory, or a dangling link as the destination, the copy was
    /// plaintext.
    @Test func encryptedCopiesThroughSymbolicLinksAreEncrypted() async throws {
        let directory = try TemporaryDirectory()
        let plain = directory.path("plain.sqlite")
        try await sqlite3Database(plain)
        try FileManager.default.createDirectory(atPath: directory.path("real"), withIntermediateDirectories: false)
        try FileManager.default.createSymbolicLink(atPath: directory.path("link"), withDestinationPath: directory.path("real"))
        try FileManager.default.createSymbolicLink(atPath: directory.path("dangling.sqlite"), withDestinationPath: directory.path("real/target.sqlite"))
        try CipherDatabase.encryptedCopy(ofPlaintextAt: plain, to: directory.path("link/copy.sqlite"), with: key, kdfIterations: fastIterations)
        #expect(CipherDatabase.isEncrypted(atPath: directory.path("real/copy.sqlite")) == true)
        #expect(throws: CipherError.destinationExists(path: directory.path("dangling.sqlite"))) {
            // O_EXCL refuses a symbolic link, dangling or not.
            try CipherDatabase.encryptedCopy(ofPlaintextAt: plain, to: directory.path("dangling.sqlite"), with: key, kdfIterations: fastIterations)
        }
        #expect(FileManager.default.fileExists(atPath: directory.path("real/target.sqlite")) == false)
        // In place, through a link to the directory.
        try CipherDatabase.encrypt(atPath: directory.path("link/../plain.sqlite"), with: key, kdfIterations: fastIterations)
        #expect(CipherDatabase.isEncrypted(atPath: plain) == true)
        for file in ["plain.sqlite", "real/copy.sqlite"] {
            #expect(try Data(contentsOf: URL(fileURLWithPath: directory.path(file))).range(of: Data("SECRET_ROW".utf8)) == nil)
        }
    }

    /// encrypt(atPath:) and rekey(atPath:) keep the original's mode; new
    /// encrypted databases and plaintext exports are 0600.
    @Test func filesAreCreatedOwnerOnlyAndReplacementsKeepTheOriginalsMode() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite"), export = directory.path("export.sqlite"), created = directory.path("new.sqlite")
        func mode(_ path: String) throws -> Int {
            try (FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? -1
        }
        try await sqlite3Database(path)
        #expect(chmod(path, 0o640) == 0)
        try CipherDatabase.encrypt(atPath: path, with: key, kdfIterations: fastIterations)
        #expect(try mode(path) == 0o640)
        try CipherDatabase.rekey(atPath: path, from: key, to: .passphrase("other"), kdfIterations: fastIterations)
        #expect(try mode(path) == 0o640)
        try CipherDatabase.exportPlaintext(atPath: path, key: .passphrase("other"), to: export, kdfIterations: fastIterations)
        #expect(try mode(export) == 0o600)
        let queue = try CipherDatabase.queue(atPath: created, key: key, kdfIterations: fastIterations)
        try await queue.write { db in try db.execute(sql: "CREATE TABLE t(x)") }
        #expect(try mode(created) == 0o600)
        // Through a Configuration (as DatabaseService does): SQLite creates
        // the file, the VFS restricts it when the key is set; its WAL follows.
        var configuration = Configuration()
        try configuration.encrypt(with: key, kdfIterations: fastIterations)
        let pool = try DatabasePool(path: directory.path("pool.sqlite"), configuration: configuration)
        try await pool.write { db in try db.execute(sql: "CREATE TABLE t(x)") }
        #expect(try mode(directory.path("pool.sqlite")) == 0o600)
        #expect(try mode(directory.path("pool.sqlite-wal")) == 0o600)
    }

    /// Page sizes convert both ways: encrypt to a page size, re-encrypt to
    /// another, export.
    @Test func rekeyConvertsThePageSizeAndTheResultOpensInSQLCipher() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite"), export = directory.path("export.sqlite")
        try await sqlite3Database(path, pageSize: 65536)
        try CipherDatabase.encrypt(atPath: path, with: key, compatibility: .v3, kdfIterations: fastIterations, pageSize: 4096)
        // As in SQLCipher, page 1's HMAC covers one page: the wrong page
        // size reads as a wrong key.
        #expect(throws: CipherError.wrongKey(path: path)) {
            _ = try CipherDatabase.queue(atPath: path, key: key, compatibility: .v3, kdfIterations: fastIterations)
        }
        try CipherDatabase.rekey(atPath: path, from: key, to: key, compatibility: .v3, kdfIterations: fastIterations, pageSize: 4096, newPageSize: 1024)
        let result = try await sqlcipher(path, "PRAGMA key = 'fail closed';\nPRAGMA kdf_iter = \(fastIterations);\nSELECT count(*) FROM t;\nPRAGMA integrity_check;\n")
        #expect(result.output == "300\nok\n", "\(result.output)")
        try CipherDatabase.exportPlaintext(atPath: path, key: key, to: export, compatibility: .v3, kdfIterations: fastIterations)
        #expect(try rowCount(DatabaseQueue(path: export)) == 300)
    }

    // MARK: - Findings 5 to 8

    /// A keyless attacker zeroes an overflow page: reads fail, and verify
    /// names the page.
    @Test func anAllZeroPageIsNotAuthentic() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let queue = try CipherDatabase.queue(atPath: path, key: key, kdfIterations: fastIterations)
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE b(big BLOB); INSERT INTO b VALUES (zeroblob(14000))")
        }
        try queue.close()
        let pages = try Data(contentsOf: URL(fileURLWithPath: path)).count / 4096
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seek(toOffset: UInt64((pages - 1) * 4096))
        try handle.write(contentsOf: Data(count: 4096))
        try handle.close()
        #expect(try CipherDatabase.verify(atPath: path, key: key, kdfIterations: fastIterations)?.contains("page \(pages) ") == true)
        let reopened = try CipherDatabase.queue(atPath: path, key: key, kdfIterations: fastIterations)
        #expect(throws: DatabaseError.self) { try reopened.read { db in try Data.fetchOne(db, sql: "SELECT big FROM b") } }
    }

    /// The new key used to be interpolated in SQL, and so in GRDB's error
    /// descriptions and traces.
    @Test func aFailedRekeyNeverShowsTheKey() throws {
        let directory = try TemporaryDirectory()
        let queue = try CipherDatabase.queue(atPath: directory.path("db.sqlite"), key: key, kdfIterations: fastIterations)
        try queue.write { db in try db.execute(sql: "CREATE TABLE t(x)") }
        let error = #expect(throws: CipherError.self) {
            try queue.inTransaction { db in
                try CipherDatabase.rekey(db, to: .passphrase("THE-NEW-SECRET"))
                return .commit
            }
        }
        #expect(error.map { "\($0)" }?.contains("inside a transaction") == true)
        #expect(error.map { "\($0)" }?.contains("THE-NEW-SECRET") == false)
    }

    /// cipher_plaintext_header_size checked against one geometry and used
    /// with another overflowed the heap (run the review's t10 under ASan).
    @Test func aPlaintextHeaderThatDoesNotFitTheNewVersionIsRefused() throws {
        let directory = try TemporaryDirectory()
        try CipherVFS.register()
        let queue = try DatabaseQueue(path: directory.path("db.sqlite"))
        try queue.inDatabase { db in
            try db.execute(sql: "PRAGMA key = \"x'\(String(repeating: "ab", count: 32))'\"")
            // Such a header is refused outright (at most 48 bytes, review
            // security-2 L3), so no geometry change can make it overflow.
            #expect(throws: DatabaseError.self) { try db.execute(sql: "PRAGMA cipher_plaintext_header_size = 2000") }
            #expect(throws: DatabaseError.self) { try db.execute(sql: "PRAGMA cipher_plaintext_header_size = 944") }
            try db.execute(sql: "CREATE TABLE t(x); INSERT INTO t VALUES (1)")
            #expect(try Int.fetchOne(db, sql: "SELECT x FROM t") == 1)
        }
    }

    /// Read-ahead workers read through the connection's file: no mapping
    /// of a keyed file can be remapped under them.
    @Test func memoryMappingIsOffForEncryptedDatabases() throws {
        let directory = try TemporaryDirectory()
        let queue = try CipherDatabase.queue(atPath: directory.path("db.sqlite"), key: key, kdfIterations: fastIterations)
        try queue.inDatabase { db in
            try db.execute(sql: "CREATE TABLE t(x)")
            #expect(try Int.fetchOne(db, sql: "PRAGMA mmap_size = 268435456") == 0)
        }
    }

    /// Temporary files (here a sort that spills, a temporary table and a
    /// statement journal, with temp_store = FILE) are written as AES-GCM
    /// blocks with a fresh nonce each: results are intact.
    @Test func temporaryFilesRoundTripThroughTheirEncryption() throws {
        let directory = try TemporaryDirectory()
        let queue = try CipherDatabase.queue(atPath: directory.path("db.sqlite"), key: key, kdfIterations: fastIterations)
        let (sorted, expected, temporary, afterSavepoint) = try queue.writeWithoutTransaction { db in
            try db.execute(sql: """
                PRAGMA temp_store = FILE;
                PRAGMA cache_size = 10;
                CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);
                WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 20000)
                INSERT INTO t SELECT i, printf('%08d-', (i * 7919) % 20000) || hex(randomblob(30)) FROM c;
                CREATE TEMP TABLE scratch AS SELECT * FROM t;
                """)
            let sorted = try String.fetchAll(db, sql: "SELECT v FROM t ORDER BY v DESC")
            let expected = try String.fetchAll(db, sql: "SELECT v FROM t").sorted(by: >)
            let temporary = try Int.fetchOne(db, sql: "SELECT count(*) FROM scratch WHERE v IN (SELECT v FROM t)")
            try db.execute(sql: "BEGIN; UPDATE t SET v = 'x' WHERE id > 10000; SAVEPOINT s; UPDATE t SET v = 'y'; ROLLBACK TO s; COMMIT")
            let afterSavepoint = try Int.fetchOne(db, sql: "SELECT count(*) FROM t WHERE v = 'x'")
            return (sorted, expected, temporary, afterSavepoint)
        }
        #expect(sorted == expected)
        #expect(sorted.count == 20000)
        #expect(temporary == 20000)
        #expect(afterSavepoint == 10000)
    }

    /// encrypt(atPath:) and rekey(atPath:) take an exclusive lock before
    /// the first read and keep it until the rename: a database that another
    /// connection is writing is not replaced (its commit would be lost).
    @Test func aDatabaseBeingWrittenElsewhereIsNotReplaced() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        try await sqlite3Database(path)
        var configuration = Configuration()
        configuration.allowsUnsafeTransactions = true   // a transaction left open on purpose
        let writer = try DatabaseQueue(path: path, configuration: configuration)
        try await writer.writeWithoutTransaction { db in
            try db.execute(sql: "BEGIN IMMEDIATE; INSERT INTO t(v) VALUES ('LATE_ROW')")
        }
        let before = try snapshot(directory)
        #expect(throws: DatabaseError.self) {
            try CipherDatabase.encrypt(atPath: path, with: key, kdfIterations: fastIterations)
        }
        #expect(try snapshot(directory).filter { !$0.key.hasSuffix("-journal") } == before.filter { !$0.key.hasSuffix("-journal") })
        try await writer.writeWithoutTransaction { db in try db.execute(sql: "COMMIT") }
        #expect(try rowCount(writer) == 301)
        #expect(CipherDatabase.isEncrypted(atPath: path) == false)
    }
}
