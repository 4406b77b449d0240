/// An error thrown by ``DatabaseService``.
public enum DatabaseServiceError: Error, CustomStringConvertible, Sendable, Equatable {
    /// No database of the service has this name.
    case unknownDatabase(String, knownNames: [String])

    /// The service is not running (not started yet, failed, or stopped).
    case notRunning(phase: String)

    /// `verify` mode, and the database has migrations to apply.
    case pendingMigrations(database: String, migrations: [String])

    /// The configuration can't run here; every problem is listed.
    case invalidConfiguration(problems: [String])

    /// Another component of the process opened the file before the service.
    case alreadyOpen(database: String, path: String)

    public var description: String {
        switch self {
        case let .unknownDatabase(name, knownNames):
            return "Unknown database \(String(reflecting: name)) (configured: \(knownNames.joined(separator: ", ")))."
        case let .notRunning(phase):
            return "The database service is not running (\(phase))."
        case let .pendingMigrations(database, migrations):
            return "Database \(database) has pending migrations (\(migrations.joined(separator: ", "))), and the migration mode is verify: run `registryctl migrate` first, or use the apply mode."
        case let .invalidConfiguration(problems):
            return "The configuration can't run:\n" + problems.map { "  - \($0)" }.joined(separator: "\n")
        case let .alreadyOpen(database, path):
            return "Database \(database) (\(path)) is already open in this process: the service must open its databases first, so that its write gate and metrics see every write."
        }
    }
}
