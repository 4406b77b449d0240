import Foundation
import GRDB
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryExamples
@testable import GRDBRegistryService
import Testing

/// A configuration without `tenants.migrations`: the tenants of a
/// repository that ships its migrations migrate through the daemon's
/// runner with that one set (checksums, migration mode), not through a
/// second path.
@Suite struct TenantMigrationSetTests {
    private func service(_ directory: TemporaryDirectory, _ mode: MigrationMode) -> DatabaseService {
        DatabaseService(
            configuration: RegistryConfiguration(databases: [], tenants: .init(root: directory.path("tenants")), migrationMode: mode),
            environment: [:], logger: LogRecorder().logger())
    }

    /// A tenant an older version of the application created: the first
    /// players migration only.
    private func olderTenant(_ directory: TemporaryDirectory, firstSQL: String? = nil) throws -> TenantID {
        try FileManager.default.createDirectory(atPath: directory.path("tenants"), withIntermediateDirectories: true)
        let first = try #require(PlayerRepository.migrationFiles.first)
        let set = try MigrationSet(name: "players", sqlFiles: [SQLMigrationFile(identifier: first.identifier, sql: firstSQL ?? first.sql)])
        let queue = try DatabaseQueue(path: directory.path("tenants/acme.sqlite"))
        try set.makeMigrator().migrate(queue)
        try queue.close()
        return try TenantID("acme")
    }

    @Test func verifyRefusesATenantBehindTheRepositorysSetThroughTheServicesRunner() async throws {
        let directory = try TemporaryDirectory()
        let acme = try olderTenant(directory)
        let tenants = try service(directory, .verify).tenants(of: PlayerRepository.self)
        let refused = await #expect(throws: DatabaseServiceError.self) { try await tenants.lease(acme) }
        #expect(refused == .pendingMigrations(
            database: "tenants/acme", migrations: PlayerRepository.migrationFiles.dropFirst().map(\.identifier)))
    }

    @Test func applyBringsATenantToTheRepositorysSetWithItsChecksums() async throws {
        let directory = try TemporaryDirectory()
        let acme = try olderTenant(directory)
        let tenants = try service(directory, .apply).tenants(of: PlayerRepository.self)
        try await tenants.withRepository(acme) { _ in }
        tenants.closeIdleTenants()
        let status = try DatabaseMigrationRunner(set: PlayerRepository.migrationSet).status(ofDatabaseAt: directory.path("tenants/acme.sqlite"))
        #expect(status.pending.isEmpty)
        #expect(status.modified.isEmpty)
        #expect(status.applied == PlayerRepository.migrationFiles.map(\.identifier))
    }

    @Test func anAppliedMigrationEditedSinceIsRefusedAsTheRunnerRefusesIt() async throws {
        let directory = try TemporaryDirectory()
        let first = try #require(PlayerRepository.migrationFiles.first)
        let acme = try olderTenant(directory, firstSQL: first.sql + "\n-- edited since\n")
        let tenants = try service(directory, .apply).tenants(of: PlayerRepository.self)
        let refused = await #expect(throws: MigrationError.self) { try await tenants.lease(acme) }
        guard case let .modifiedMigrations(_, identifiers) = refused else {
            Issue.record("expected modifiedMigrations, got \(String(describing: refused))")
            return
        }
        #expect(identifiers == [first.identifier])
    }
}
