import ArgumentParser
import Foundation

/// The one meaning of `--database` in every command: a database file,
/// given on the command line without `--config`. A configured database is
/// `--name NAME`, with `--config`.
///
/// `backup` and `restore` took `--database NAME` for a configured database
/// before 0.1.0: that spelling is refused with the new one, so a script
/// written for it stops instead of backing up a file named after a database.
func validateFileOrConfiguration(
    config: String?, database: String?, key: CipherKeyOptions, selected: Bool, oldDatabaseSpelling: String
) throws {
    if config != nil {
        if let database {
            throw ValidationError(
                "--database is a database file, without --config. For the configured database \(String(reflecting: database)), "
                    + "use \(oldDatabaseSpelling) \(database).")
        }
        if key.isGiven {
            throw ValidationError("With --config, keys and formats come from the file: --key-env, --key-file, --compatibility and --page-size go with --database PATH.")
        }
        return
    }
    guard database != nil else {
        throw ValidationError("Choose the databases: --config FILE (with --name NAME or --tenant ID to narrow it), or --database PATH.")
    }
    if selected { throw ValidationError("--name and --tenant select databases of a --config file; --database PATH is one file.") }
}

/// The name under which `--database PATH` is backed up and restored: the
/// file name without its extension (`data/players.sqlite` is `players`).
func fileDatabaseName(_ path: String) -> String {
    URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent
}
