/// A type whose database schema is a migration set: a repository that
/// ships its migrations with it.
///
/// The daemon migrates the tenants of such a repository with this set when
/// the configuration names no `tenants.migrations` folder, through the
/// same ``DatabaseMigrationRunner`` (checksums, migration mode) as a
/// folder's set. The schema then exists once, with the repository:
///
/// ```swift
/// struct NotesRepository: MigrationSetProviding {
///     static let migrationSet = try! MigrationSet(name: "notes", sqlFiles: [
///         SQLMigrationFile(identifier: "0001_create_note.sql", sql: "CREATE TABLE note(id INTEGER PRIMARY KEY, text TEXT NOT NULL);"),
///     ])
/// }
/// ```
public protocol MigrationSetProviding {
    /// The migrations of the type's database, in order.
    static var migrationSet: MigrationSet { get throws }
}
