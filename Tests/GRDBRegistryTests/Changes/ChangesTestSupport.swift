import Foundation
import GRDB
import GRDBRegistry

/// Tables of every kind a change must carry: a rowid table (with REAL, BLOB
/// and NULL values), a WITHOUT ROWID table and a composite primary key;
/// and the sequence table.
func createChangesSchema(_ db: Database) throws {
    try db.execute(sql: """
        CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT, price REAL, picture BLOB);
        CREATE TABLE tag (name TEXT PRIMARY KEY, weight REAL) WITHOUT ROWID;
        CREATE TABLE membership (groupId INTEGER, userId INTEGER, role TEXT, PRIMARY KEY (groupId, userId));
        INSERT INTO item VALUES (1, 'one', 1.5, x'0001'), (2, 'two', NULL, NULL), (3, 'three', 3.25, x'ff');
        INSERT INTO tag VALUES ('red', 0.5), ('blue', 2);
        INSERT INTO membership VALUES (1, 1, 'owner'), (1, 2, 'member'), (2, 1, NULL);
        """)
    try ChangeSequence.prepare(db)
}

/// A base database (rollback journal) with the changes schema, closed, at
/// `name` in `directory`.
func makeChangesBase(in directory: TemporaryDirectory, name: String = "base.sqlite") throws -> String {
    let path = directory.path(name)
    try DatabaseQueue(path: path).write(createChangesSchema)
    return path
}

/// Copies the closed database file at `path` to `name`, a replica at the
/// base's state.
func copyDatabase(_ path: String, to name: String, in directory: TemporaryDirectory) throws -> String {
    let copy = directory.path(name)
    try FileManager.default.copyItem(atPath: path, toPath: copy)
    return copy
}

/// Runs `updates` in one write transaction and records its change.
func recordedWrite(
    _ writer: some DatabaseWriter, _ updates: (Database) throws -> Void
) throws -> TransactionChange? {
    try writer.write { db in
        let recorder = try ChangeRecorder(db)
        try updates(db)
        return try recorder.finish(db)
    }
}

/// Insert, update and delete on every table of the changes schema, with
/// REAL, BLOB and NULL values.
func mixedUpdates(_ db: Database) throws {
    try db.execute(sql: """
        INSERT INTO item VALUES (4, NULL, -0.125, x'00ff00');
        UPDATE item SET name = 'uno', picture = NULL WHERE id = 1;
        UPDATE item SET price = 2.75, picture = zeroblob(3) WHERE id = 2;
        DELETE FROM item WHERE id = 3;
        INSERT INTO tag VALUES ('green', NULL);
        UPDATE tag SET weight = 9.5 WHERE name = 'red';
        DELETE FROM tag WHERE name = 'blue';
        INSERT INTO membership VALUES (2, 2, 'member');
        UPDATE membership SET role = 'admin' WHERE groupId = 1 AND userId = 2;
        DELETE FROM membership WHERE groupId = 2 AND userId = 1;
        """)
}

/// Every row of every table of `main`, sorted: two databases hold the same
/// data when their dumps are equal.
func dumpTables(_ db: Database) throws -> [String: [[DatabaseValue]]] {
    let tables = try String.fetchAll(
        db, sql: "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
    var dump: [String: [[DatabaseValue]]] = [:]
    for table in tables {
        let rows = try Row.fetchAll(db, sql: "SELECT * FROM main.\(table.quotedDatabaseIdentifier)")
        dump[table] = rows.map { Array($0.databaseValues) }.sorted { "\($0)" < "\($1)" }
    }
    return dump
}

/// A base (closed) with authors `authors` and a `book` table whose
/// `authorId` references them, at `base.sqlite` in `directory`.
func makeAuthorsAndBooksBase(in directory: TemporaryDirectory, authors: [Int]) throws -> String {
    let base = directory.path("base.sqlite")
    try DatabaseQueue(path: base).write { db in
        try db.execute(sql: """
            CREATE TABLE author (id INTEGER PRIMARY KEY);
            CREATE TABLE book (id INTEGER PRIMARY KEY, authorId INTEGER NOT NULL REFERENCES author(id));
            """)
        for author in authors { try db.execute(sql: "INSERT INTO author VALUES (?)", arguments: [author]) }
        try ChangeSequence.prepare(db)
    }
    return base
}
