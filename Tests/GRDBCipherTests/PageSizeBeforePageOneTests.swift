import Foundation
import GRDB
@testable import GRDBCipher
import Testing

/// Until SQLite reads page 1, it reads pages of the size it chose when it
/// opened the file. When page 1 comes from the WAL, SQLite reads it with
/// that size, and the codec refuses any read that is not a whole page of
/// the key's format. So a connection that opens an encrypted database must
/// start from the key's page size: not from bytes of ciphertext, and not
/// from SQLite's 4096-byte default.
@Suite struct PageSizeBeforePageOneTests {
    let key = CipherKey.passphrase("page size before page one")

    private func configuration(pageSize: Int? = nil) throws -> Configuration {
        var configuration = Configuration()
        try configuration.encrypt(with: key, kdfIterations: fastIterations, pageSize: pageSize)
        return configuration
    }

    /// SQLite reads the first 100 bytes of a file when it opens it, before
    /// a key can be set, and keeps a valid page size at offset 16 as the
    /// file's. In an encrypted file those two bytes are ciphertext: 8
    /// values in 65,536 read as a page size (a page 1 rewritten in a loop
    /// read as 2048 after about 100,000 rewrites). Those below the codec's
    /// made every connection opened meanwhile fail with
    /// ``CipherError/pageGeometry(path:pageSize:reserve:foundPageSize:foundReserve:)``
    /// as long as page 1 was in the WAL: the fault matrix's intermittent
    /// "512- or 2048-byte pages".
    ///
    /// The test writes those bytes instead of waiting for them: page 1 of
    /// the main file is superseded by the WAL's, so nothing but SQLite's
    /// header read at open looks at them, and the checkpoint at the last
    /// close rewrites the page.
    @Test(arguments: [512, 1024, 2048])
    func aConnectionIgnoresCiphertextThatReadsAsAPageSize(_ ciphertextPageSize: Int) throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let writer = try DatabasePool(path: path, configuration: try configuration())
        try writer.write { db in
            try db.execute(sql: "CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
            try db.execute(sql: "INSERT INTO item(name) VALUES ('Arthur'), ('Barbara')")
        }
        try writer.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
        // Page 1 in the WAL: the writer stays open, so nothing checkpoints it.
        try writer.write { db in try db.execute(sql: "PRAGMA user_version = 7") }

        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        try handle.seek(toOffset: 16)
        try handle.write(contentsOf: [UInt8(ciphertextPageSize >> 8 & 0xFF), UInt8(ciphertextPageSize >> 16 & 0xFF)])
        try handle.close()

        let reader = try DatabaseQueue(path: path, configuration: try configuration())
        let (names, version) = try reader.read { db in
            (try String.fetchAll(db, sql: "SELECT name FROM item ORDER BY id"), try Int.fetchOne(db, sql: "PRAGMA user_version"))
        }
        #expect(names == ["Arthur", "Barbara"])
        #expect(version == 7)
        #expect(try reader.read { db in try Int.fetchOne(db, sql: "PRAGMA page_size") } == 4096)
        try reader.close()
        try writer.close()
        // The last close checkpointed page 1 over the bytes written above.
        #expect(try CipherDatabase.verify(atPath: path, key: key, kdfIterations: fastIterations) == nil)
    }

    /// A key whose pages are larger than SQLite's default: a pool's reader
    /// opened while page 1 was in the WAL read part of a frame, and failed.
    @Test(arguments: [8192, 16384, 65536])
    func aPoolOfLargePagesReadsWhilePageOneIsInTheWAL(_ pageSize: Int) throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let pool = try DatabasePool(path: path, configuration: try configuration(pageSize: pageSize))
        try pool.write { db in
            try db.execute(sql: "CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
            try db.execute(sql: "INSERT INTO item(name) VALUES ('Arthur')")
        }
        // The first read opens a reader connection; page 1 (the schema) is
        // only in the WAL.
        #expect(try pool.read { db in try String.fetchAll(db, sql: "SELECT name FROM item") } == ["Arthur"])
        // And a connection that opens the file anew.
        let queue = try DatabaseQueue(path: path, configuration: try configuration(pageSize: pageSize))
        #expect(try queue.read { db in try Int.fetchOne(db, sql: "PRAGMA page_size") } == pageSize)
        try queue.close()
        try pool.close()
        #expect(try CipherDatabase.verify(atPath: path, key: key, kdfIterations: fastIterations, pageSize: pageSize) == nil)
    }
}
