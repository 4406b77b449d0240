import Foundation
import GRDBBackup
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryService
import Logging

// The DocC examples of LitestreamRestore's restores from a replica,
// compiled with the tests so that they stay true to the API (every one of
// them is async: a bucket is listed and fetched through the replica
// store). Never called.

func documentationExampleOfLitestreamRestore(
    configuration: RegistryConfiguration, logger: Logger, catalogSet: MigrationSet
) async throws {
    let restore = LitestreamRestore(configuration: configuration, logger: logger)
    try await restore.restore(database: "catalog", checks: .init(migrations: catalogSet))
    for id in try await restore.replicatedTenants() { try await restore.restore(tenant: id) }
    // The state of acme one hour ago, or as it was when it was removed:
    try await restore.restore(tenant: TenantID("acme"), at: Date(timeIntervalSinceNow: -3600))
    try await restore.restoreRemoved(tenant: TenantID("acme"))
}

func documentationExampleOfATenantRestore(restore: LitestreamRestore, playersSet: MigrationSet) async throws {
    let id = try TenantID("acme")
    let report = try await restore.restore(tenant: id, checks: .init(migrations: playersSet))
    let earlier = Date(timeIntervalSinceNow: -3600)
    try await restore.restore(tenant: TenantID("initech"), at: earlier, checks: .init(migrations: playersSet))
    _ = report
}

func documentationExampleOfADatabaseRestore(restore: LitestreamRestore, catalogSet: MigrationSet) async throws {
    try await restore.restore(database: "catalog", checks: .init(migrations: catalogSet))
}

func documentationExampleOfAReplicaLayout(restore: LitestreamRestore, id: TenantID) async throws {
    switch try await restore.replicaLayout(of: id) {
    case .single: try await restore.restore(tenant: id)
    case .epochs: try await restore.restoreNewestEpoch(ofMissing: id)
    }
}
