// Consistent backups of a configuration's databases, and checked restores.
// snippet.hide
import Foundation
import GRDB
import GRDBBackup
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryConfiguration
import GRDBRegistryExamples
import Logging

let logger = Logger(label: "backup")
let configuration = try RegistryConfiguration.load(
    contentsOf: URL(fileURLWithPath: "registry.json"))
let backups = URL(fileURLWithPath: "backups/2026-11-23")

// snippet.show
// snippet.backup
// A new, empty directory. Copies are taken while the daemon writes.
let backup = try BackupSet(creatingAt: backups, logger: logger)
try backup.add(.database, named: "catalog", databaseAt: "data/catalog.sqlite")
// The tenants' files and keys: built once, the master key read once.
let storage = try TenantStorage(configuration: configuration)
for id in try storage.selection(nil).tenants {
    try backup.addTenant(id, in: storage)
}
// The manifest is written last: restores refuse a backup without one.
let manifest = try backup.finish()
print("\(manifest.files.count) files")

// snippet.restore
// Every check passes before the file gets its name, and a database that
// a process has open is refused.
let restore = try BackupRestore(from: backups, logger: logger)
let players = try MigrationSet(
    directory: URL(fileURLWithPath: "Migrations/players"))
let report = try restore.restoreTenant(
    TenantID("acme"), into: storage,
    checks: .init(migrations: players, invariants: PlayerRepository.invariants))
print(report.destination, report.pendingMigrations)

// snippet.copy
// One copy, for code that schedules its own backups.
let pool = try DatabasePool(path: "data/catalog.sqlite")
let copy = try DatabaseBackup.backUp(
    pool, to: URL(fileURLWithPath: "backups/catalog-copy.sqlite"))
print(copy.size, copy.sha256)
// snippet.end
