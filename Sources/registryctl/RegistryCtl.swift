import ArgumentParser
import Foundation
import GRDBRegistry

/// `registryctl`: migrations, checks, keys, backups and restores of one
/// database or thousands of tenants, with the daemon's configuration file.
///
/// ```
/// registryctl status  --database data/players.sqlite --migrations Migrations/players --json
/// registryctl migrate --tenants-root data/tenants --migrations Migrations/players --jobs 4
/// registryctl status  --config registry.json            # the daemon's file: databases, tenants, keys
/// registryctl migrate --config registry.json --name catalog --dry-run
/// registryctl migrate --tenants-root data/tenants --migrations Migrations/players --master-key-env TENANT_MASTER_KEY
/// registryctl encrypt --in plain.sqlite --out vault.sqlite --key-env VAULT_KEY
/// registryctl verify vault.sqlite --key-file vault.key
/// registryctl verify  --config registry.json --json       # every database and tenant: HMACs, integrity, key policy
/// registryctl rekey   --config registry.json --tenants --new-key-file new-master.key   # rotate the tenant master key
/// registryctl rekey   --config registry.json --name players --new-key-env NEW_PLAYERS_KEY
/// registryctl backup  --config registry.json --to backups/2026-11-23
/// registryctl restore --config registry.json --from backups/2026-11-23 --tenant acme
/// registryctl backup  --database vault.sqlite --key-env VAULT_KEY --to backups/vault   # no configuration file
/// registryctl --version
/// ```
///
/// Each flag means one thing in every command: `--database PATH` is a
/// database file, `--name NAME` a database of the `--config` file.
///
/// Exit status: 0 when every database succeeded, 1 when at least one failed
/// (the others were still processed), 2 for bad arguments or configuration
/// (nothing was touched), 3 when `status` found a modified or unknown
/// migration.
@main
struct RegistryCtl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "registryctl",
        abstract: "Migrate, verify, encrypt, re-key, back up and restore GRDBRegistry databases and tenants.",
        version: GRDBRegistryVersion.current,
        subcommands: [
            StatusCommand.self, MigrateCommand.self,
            EncryptCommand.self, DecryptCommand.self, RekeyCommand.self, VerifyCommand.self,
            BackupCommand.self, RestoreCommand.self,
        ])

    /// ArgumentParser's own `main()`, but for the exit status of a command
    /// line it can't parse: 2, as documented above, not its `EX_USAGE`
    /// (64), so that a script tells bad arguments from failed databases
    /// the same way whichever check refused them.
    static func main() {
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch {
            guard exitCode(for: error) == .validationFailure else { exit(withError: error) }
            FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
            exit(withError: ExitCode(2))
        }
    }
}
