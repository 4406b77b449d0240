import Foundation
import GRDB
import GRDBRegistry
import Testing

/// The sequence row (ChangeSequence): its table, and the malformed tables
/// that recording and replaying refuse.
@Suite struct ChangeSequenceTests {
    @Test func prepareCreatesTheRowAtZeroAndKeepsAnExistingSequence() throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.path("db.sqlite"))
        #expect(try queue.read(ChangeSequence.current) == 0)
        try queue.write(ChangeSequence.prepare)
        #expect(try queue.read(ChangeSequence.current) == 0)
        try queue.write { db in try db.execute(sql: "UPDATE grdbregistry_sequence SET sequence = 41") }
        try queue.write(ChangeSequence.prepare)
        #expect(try queue.read(ChangeSequence.current) == 41)
        #expect(ChangeSequence.tableName == "grdbregistry_sequence")
        // The CHECK constraints refuse a second row and a negative sequence.
        #expect(throws: DatabaseError.self) {
            try queue.write { db in try db.execute(sql: "INSERT INTO grdbregistry_sequence VALUES (2, 0)") }
        }
        #expect(throws: DatabaseError.self) {
            try queue.write { db in try db.execute(sql: "UPDATE grdbregistry_sequence SET sequence = -1") }
        }
    }

    /// Litestream creates its tables when it starts replicating a file (a
    /// restored one included): that must not look like a migration, which
    /// would make the durable tail wait for a replica round.
    @Test func theSchemaVersionChangesWithTheSchemaButNotWithLitestreamsTables() throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.path("db.sqlite"))
        try queue.write { db in try db.execute(sql: "CREATE TABLE player (id INTEGER PRIMARY KEY, name TEXT)") }
        let initial = try queue.read(ChangeSequence.schemaVersion)
        let pragma = try queue.read { try $0.schemaVersion() }
        try queue.write { db in
            try db.execute(sql: """
                CREATE TABLE IF NOT EXISTS _litestream_seq (id INTEGER PRIMARY KEY, seq INTEGER);
                CREATE TABLE IF NOT EXISTS _litestream_lock (id INTEGER);
                """)
        }
        #expect(try queue.read { try $0.schemaVersion() } != pragma)
        #expect(try queue.read(ChangeSequence.schemaVersion) == initial)

        // Another file with the same schema has the same version.
        let other = try DatabaseQueue(path: directory.path("other.sqlite"))
        try other.write { db in try db.execute(sql: "CREATE TABLE player (id INTEGER PRIMARY KEY, name TEXT)") }
        #expect(try other.read(ChangeSequence.schemaVersion) == initial)

        try queue.write(ChangeSequence.prepare)
        let prepared = try queue.read(ChangeSequence.schemaVersion)
        #expect(prepared != initial)
        try queue.write { db in try db.execute(sql: "CREATE INDEX player_on_name ON player(name)") }
        let indexed = try queue.read(ChangeSequence.schemaVersion)
        #expect(indexed != prepared)
        try queue.write { db in try db.execute(sql: "ALTER TABLE player ADD COLUMN score INTEGER") }
        #expect(try queue.read(ChangeSequence.schemaVersion) != indexed)
    }

    /// The schema version is the FNV-1a digest of the schema's entries
    /// (type, name, table, SQL: their UTF-8 text, each followed by a zero),
    /// ordered by type and name: the one the tails of earlier releases
    /// carry. Computed here from the entries read as strings.
    @Test func theSchemaVersionIsTheDigestOfTheSchemasText() throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.path("db.sqlite"))
        try queue.write { db in
            try db.execute(sql: """
                CREATE TABLE "joueur é" (id INTEGER PRIMARY KEY, "nom ü" TEXT);
                CREATE INDEX "joueur é par nom" ON "joueur é"("nom ü");
                CREATE VIEW vue AS SELECT * FROM "joueur é";
                """)
            try ChangeSequence.prepare(db)
        }
        let expected = try queue.read { db -> Int32 in
            var hash: UInt32 = 2_166_136_261
            let rows = try Row.fetchAll(db, sql: """
                SELECT type, name, tbl_name, sql FROM sqlite_master
                WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_litestream\\_%' ESCAPE '\\'
                ORDER BY type, name
                """)
            #expect(rows.count == 4)
            for row in rows {
                for index in 0..<4 {
                    for byte in ((row[index] as String?) ?? "").utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
                    hash = (hash ^ 0) &* 16_777_619
                }
            }
            return Int32(bitPattern: hash)
        }
        #expect(try queue.read(ChangeSequence.schemaVersion) == expected)
        // Read again on the same connection after a change of schema.
        try queue.write { db in try db.execute(sql: "DROP VIEW vue") }
        #expect(try queue.read(ChangeSequence.schemaVersion) != expected)
    }

    /// The table is created with the text of every earlier release, the
    /// one its reads recognize without a column-by-column check; a table
    /// of the same shape written otherwise is read too, and one of another
    /// shape is refused.
    @Test func theTableKeepsTheDefinitionOfEarlierReleases() throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.path("db.sqlite"))
        try queue.write(ChangeSequence.prepare)
        let stored = try queue.read { db in
            try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE name = 'grdbregistry_sequence'")
        }
        #expect(stored == "CREATE TABLE grdbregistry_sequence (\n  id INTEGER PRIMARY KEY CHECK (id = 1),\n  sequence INTEGER NOT NULL CHECK (sequence >= 0))")

        let other = try DatabaseQueue(path: directory.path("other.sqlite"))
        try other.write { db in
            try db.execute(sql: """
                CREATE TABLE grdbregistry_sequence (id INTEGER PRIMARY KEY, sequence INTEGER NOT NULL);
                INSERT INTO grdbregistry_sequence VALUES (1, 5);
                """)
        }
        #expect(try other.read(ChangeSequence.current) == 5)
        try other.write { db in try db.execute(sql: "DROP TABLE grdbregistry_sequence; CREATE TABLE grdbregistry_sequence (id INTEGER, sequence INTEGER PRIMARY KEY); INSERT INTO grdbregistry_sequence VALUES (1, 5)") }
        #expect(throws: ChangeRecordingError.self) { try other.read(ChangeSequence.current) }
    }

    /// SQLite's names ignore case: a sequence table created under another
    /// case is the sequence table, not a missing one.
    @Test func theSequenceTableIsFoundWhateverTheCaseOfItsName() throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.path("db.sqlite"))
        try queue.write { db in
            try db.execute(sql: """
                CREATE TABLE GRDBRegistry_Sequence (id INTEGER PRIMARY KEY CHECK (id = 1), sequence INTEGER NOT NULL CHECK (sequence >= 0));
                INSERT INTO GRDBRegistry_Sequence VALUES (1, 7);
                """)
        }
        try queue.write(ChangeSequence.prepare)
        #expect(try queue.read(ChangeSequence.current) == 7)
    }

    @Test(arguments: [
        "CREATE TABLE grdbregistry_sequence (id INTEGER PRIMARY KEY, sequence INTEGER); INSERT INTO grdbregistry_sequence VALUES (1, 1), (2, 2)",
        "CREATE TABLE grdbregistry_sequence (id INTEGER PRIMARY KEY, sequence INTEGER); INSERT INTO grdbregistry_sequence VALUES (1, -3)",
        "CREATE TABLE grdbregistry_sequence (id INTEGER PRIMARY KEY, sequence INTEGER); INSERT INTO grdbregistry_sequence VALUES (1, 'seven')",
        "CREATE TABLE grdbregistry_sequence (id INTEGER PRIMARY KEY, sequence INTEGER)",
        "CREATE TABLE grdbregistry_sequence (id INTEGER PRIMARY KEY, sequence INTEGER); INSERT INTO grdbregistry_sequence VALUES (2, 0)",
        "CREATE TABLE grdbregistry_sequence (id INTEGER PRIMARY KEY, seq INTEGER); INSERT INTO grdbregistry_sequence VALUES (1, 0)",
        "CREATE TABLE grdbregistry_sequence (id INTEGER, sequence INTEGER); INSERT INTO grdbregistry_sequence VALUES (1, 0)",
    ])
    func aMalformedSequenceTableIsRefusedByReadingRecordingAndReplaying(_ sql: String) throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.path("db.sqlite"))
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE item (id INTEGER PRIMARY KEY)")
            try db.execute(sql: sql)
        }
        func expectMalformed(_ body: () throws -> Void) {
            let error = #expect(throws: ChangeRecordingError.self, performing: body)
            guard case .malformedSequence? = error else {
                Issue.record("expected malformedSequence, got \(String(describing: error))")
                return
            }
        }
        expectMalformed { _ = try queue.read(ChangeSequence.current) }
        expectMalformed { try queue.write(ChangeSequence.prepare) }
        expectMalformed { _ = try recordedWrite(queue) { db in try db.execute(sql: "INSERT INTO item VALUES (1)") } }
        expectMalformed { _ = try queue.write { db in try ChangeReplay.apply([], to: db) } }
        #expect(try queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM item") } == 0)
    }
}
