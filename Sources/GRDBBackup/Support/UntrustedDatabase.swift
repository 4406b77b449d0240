import Foundation
import GRDB
import GRDBRegistry
import GRDBMigrations

/// The rule for database files that did not come from this process
/// (backups, replicas, imports, restores): opened with SQLite's defensive
/// mode and `trusted_schema=OFF` (`Configuration.distrustSchema()` of
/// GRDBCipher), and refused when their schema holds an object that their
/// migrations do not create, before any migration or invariant runs on
/// them. `BackupRestore` and `LitestreamRestore` both apply it.
///
/// ```swift
/// var configuration = Configuration()
/// configuration.distrustSchema()
/// let queue = try DatabaseQueue(path: incoming, configuration: configuration)
/// try queue.read { db in
///     try UntrustedDatabase.refuseUnknownSchemaObjects(in: db, migrations: playersSet, database: "tenant acme")
/// }
/// ```
public enum UntrustedDatabase {
    /// A table, index, trigger or view of a schema.
    struct SchemaObject: Hashable, Comparable {
        var type: String
        var name: String
        /// The SQL of views and triggers, which run code: one of the same
        /// name with other SQL is unknown too.
        var sql: String?

        static func < (lhs: Self, rhs: Self) -> Bool {
            (lhs.type, lhs.name, lhs.sql ?? "") < (rhs.type, rhs.name, rhs.sql ?? "")
        }
    }

    /// Throws ``BackupError/unknownSchemaObjects(database:objects:)`` when
    /// `db` holds a table, index, trigger or view that the migrations of
    /// `migrations` it records as applied do not create (or a view or
    /// trigger of the same name with other SQL). The expected schema is
    /// the one those migrations give a new in-memory database; SQLite's
    /// own objects (`sqlite_*`), GRDB's `grdb_migrations` table and
    /// Litestream's tables (`_litestream_*`) are not compared.
    ///
    /// Only `sqlite_master` and the migration tables of `db` are read.
    /// With gaps (a set that allows them), the migrations up to the last
    /// applied one are run: objects of the skipped ones are accepted.
    public static func refuseUnknownSchemaObjects(in db: Database, migrations: MigrationSet, database name: String) throws {
        let applied = try appliedIdentifiers(db)
        let expected = try expectedSchema(of: migrations, upTo: migrations.identifiers.last(where: applied.contains))
        let unknown = try schema(of: db).subtracting(expected).sorted()
        if !unknown.isEmpty {
            throw BackupError.unknownSchemaObjects(database: name, objects: unknown.map { "\($0.type) \($0.name)" })
        }
    }

    private static func appliedIdentifiers(_ db: Database) throws -> Set<String> {
        guard try db.tableExists("grdb_migrations") else { return [] }
        return try Set(String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations"))
    }

    /// The schema the set's migrations up to `last` give a new database.
    private static func expectedSchema(of set: MigrationSet, upTo last: String?) throws -> Set<SchemaObject> {
        guard let last else { return [] }
        let scratch = try DatabaseQueue()
        try set.makeMigrator().migrate(scratch, upTo: last)
        return try scratch.read(schema(of:))
    }

    private static func schema(of db: Database) throws -> Set<SchemaObject> {
        let rows = try Row.fetchAll(db, sql: "SELECT type, name, sql FROM sqlite_master")
        var objects: Set<SchemaObject> = []
        for row in rows {
            let type: String = row["type"] ?? ""
            let name: String = row["name"] ?? ""
            let lowercased = name.lowercased()
            if lowercased.hasPrefix("sqlite_") { continue }
            // Bookkeeping, as tables only: a view or trigger of that name
            // is compared like any other. The sequence row of recorded
            // writes is checked where it is read (ChangeSequence refuses a
            // malformed one).
            if type == "table" && (lowercased.hasPrefix("_litestream_") || lowercased == "grdb_migrations"
                                   || lowercased == ChangeSequence.tableName) { continue }
            let sql: String? = (type == "view" || type == "trigger") ? row["sql"] : nil
            objects.insert(SchemaObject(type: type, name: name, sql: sql))
        }
        return objects
    }
}
