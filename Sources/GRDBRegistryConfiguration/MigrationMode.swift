/// What a daemon does with the migrations of its databases and tenants when
/// it opens them: the configuration's `migrationMode`. The same for named
/// databases and tenants.
///
/// ```swift
/// let mode = MigrationMode(rawValue: "verify")   // .verify
/// ```
public enum MigrationMode: String, Sendable, Equatable, CaseIterable {
    /// Apply pending migrations. An applied file that was edited since
    /// stops the opening, naming the file
    /// (``/GRDBMigrations/MigrationError/modifiedMigrations(path:identifiers:)``).
    case apply
    /// Apply nothing; refuse to open a database with pending or edited
    /// migrations: `registryctl migrate` runs them.
    case verify
    /// Neither apply nor check (the migrations are someone else's job).
    /// A repository that finds its own migrations pending still refuses to
    /// open: it can't work on a schema it does not know.
    case skip
}
