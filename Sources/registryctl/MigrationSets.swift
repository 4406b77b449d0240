import Foundation
import GRDBBackup
import GRDBMigrations

/// The migration sets of one command, loaded once per folder: a
/// configuration's databases and its tenants often share a folder, and
/// loading reads and hashes every file in it.
struct MigrationSets {
    private var loaded: [String: MigrationSet] = [:]

    /// The set in `folder`, loaded on first use.
    mutating func set(in folder: String) throws -> MigrationSet {
        if let set = loaded[folder] { return set }
        let set = try MigrationSet(directory: URL(fileURLWithPath: folder))
        loaded[folder] = set
        return set
    }

    /// A restore's checks of migrations: those of the set in `folder`, or
    /// none when there is no folder.
    mutating func checks(in folder: String?) throws -> DatabaseRestore.Checks {
        guard let folder else { return DatabaseRestore.Checks() }
        return DatabaseRestore.Checks(migrations: try set(in: folder))
    }
}
