import Foundation
import Logging
import GRDBRegistry
import GRDBRegistryFleet
import GRDBRegistryService
import PostgresNIO
import Testing

/// The durable tail in a real PostgreSQL: PostgreSQL itself refuses the
/// change of a node that no longer holds the tenant at its epoch.
@Suite(.serialized) struct ChangeLogTests {
    static func change(_ tenant: TenantID, epoch: UInt64, sequence: UInt64, _ bytes: String = "change") -> LoggedChange {
        LoggedChange(tenant: tenant, epoch: epoch, sequence: sequence, schemaVersion: 7, payload: Data("\(bytes) \(sequence)".utf8))
    }

    @Test func aChangeIsAppendedOnlyByTheOwnerAtItsEpoch() async throws {
        let url = try await TestPostgres.newDatabase()
        let n1 = try await TestNode.joined("n1", postgres: url)
        let n2 = try await TestNode.joined("n2", postgres: url)
        let acme = try TenantID("acme")
        try await n1.create("acme")
        let epoch = try #require(try await TestPostgres.rows(url, "SELECT epoch FROM fleet_tenants WHERE tenant_id = 'acme'").first?.first.flatMap(UInt64.init))
        let log1 = FleetChangeLog(fleet: n1.fleet)
        let log2 = FleetChangeLog(fleet: n2.fleet)

        #expect(try await log1.append([Self.change(acme, epoch: epoch, sequence: 1), Self.change(acme, epoch: epoch, sequence: 2)]) == [acme])
        // Another node, or another epoch: refused, nothing inserted.
        #expect(try await log2.append([Self.change(acme, epoch: epoch, sequence: 3)]).isEmpty)
        #expect(try await log1.append([Self.change(acme, epoch: epoch + 1, sequence: 3)]).isEmpty)
        #expect(try await log1.append([Self.change(acme, epoch: epoch - 1, sequence: 3)]).isEmpty)
        #expect(try await TestPostgres.rows(url, "SELECT sequence, epoch FROM fleet_tail ORDER BY sequence") == [["1", "\(epoch)"], ["2", "\(epoch)"]])

        // A retry of a round whose answer was lost counts; a different
        // change under a taken sequence number does not.
        #expect(try await log1.append([Self.change(acme, epoch: epoch, sequence: 2)]) == [acme])
        #expect(try await log1.append([Self.change(acme, epoch: epoch, sequence: 2, "other")]).isEmpty)

        // The claim of another node (epoch + 1): the old owner's next
        // change is refused in the same statement.
        try await TestPostgres.withClient(url) { client in
            _ = try await client.query("UPDATE fleet_tenants SET owner = 'n2', epoch = epoch + 1 WHERE tenant_id = 'acme'").collect()
        }
        #expect(try await log1.append([Self.change(acme, epoch: epoch, sequence: 3)]).isEmpty)
        #expect(try await log2.append([Self.change(acme, epoch: epoch + 1, sequence: 3)]) == [acme])

        // Read back in order, with each change's epoch.
        let read = try await log2.changes(of: acme, after: 1)
        #expect(read.map(\.sequence) == [2, 3])
        #expect(read.map(\.epoch) == [epoch, epoch + 1])
        #expect(read.first?.payload == Data("change 2".utf8))
        #expect(read.first?.schemaVersion == 7)

        // Only the holder cuts the tail.
        try await log1.truncate(acme, through: 3, epoch: epoch)
        #expect(try await log2.changes(of: acme, after: 0).count == 3)
        try await log2.truncate(acme, through: 2, epoch: epoch + 1)
        #expect(try await log2.changes(of: acme, after: 0).map(\.sequence) == [3])
        let kept = try await log2.keptChanges()
        #expect(kept.total == 1 && kept.largest == 1)
        try await n1.shutdown()
        try await n2.shutdown()
    }

    /// A claim under way (its transaction updated the tenant's row, not
    /// committed yet): the append waits for it, then finds the new epoch
    /// and is refused; it never commits a change the claimer can't see.
    @Test func anAppendDuringAClaimWaitsForItAndIsRefused() async throws {
        let url = try await TestPostgres.newDatabase()
        let n1 = try await TestNode.joined("n1", postgres: url)
        let acme = try TenantID("acme")
        try await n1.create("acme")
        let epoch = try #require(try await TestPostgres.rows(url, "SELECT epoch FROM fleet_tenants WHERE tenant_id = 'acme'").first?.first.flatMap(UInt64.init))
        let log = FleetChangeLog(fleet: n1.fleet)
        try await TestPostgres.withClient(url) { client in
            try await client.withConnection { connection in
                let logger = Logger(label: "claim")
                _ = try await connection.query(PostgresQuery(unsafeSQL: "BEGIN"), logger: logger).collect()
                _ = try await connection.query(PostgresQuery(unsafeSQL: "UPDATE fleet_tenants SET epoch = epoch + 1 WHERE tenant_id = 'acme'"), logger: logger).collect()
                let append = Task { try await log.append([Self.change(acme, epoch: epoch, sequence: 1)]) }
                try await Task.sleep(for: .milliseconds(500))
                #expect(try await TestPostgres.rows(url, "SELECT count(*) FROM pg_locks WHERE NOT granted") == [["1"]])
                _ = try await connection.query(PostgresQuery(unsafeSQL: "COMMIT"), logger: logger).collect()
                #expect(try await append.value.isEmpty)
            }
        }
        #expect(try await TestPostgres.rows(url, "SELECT count(*) FROM fleet_tail") == [["0"]])
        try await n1.shutdown()
    }

    @Test func oneRoundAppendsTheTenantsStillHeldAndRefusesTheOthers() async throws {
        let url = try await TestPostgres.newDatabase()
        let n1 = try await TestNode.joined("n1", postgres: url)
        let (acme, beta) = (try TenantID("acme"), try TenantID("beta"))
        try await n1.create("acme")
        try await n1.create("beta")
        let epochs = try await TestPostgres.rows(url, "SELECT tenant_id, epoch FROM fleet_tenants ORDER BY tenant_id")
        let (acmeEpoch, betaEpoch) = (try #require(UInt64(epochs[0][1])), try #require(UInt64(epochs[1][1])))
        try await TestPostgres.withClient(url) { client in
            _ = try await client.query("UPDATE fleet_tenants SET owner = NULL WHERE tenant_id = 'beta'").collect()
        }
        let log = FleetChangeLog(fleet: n1.fleet)
        let appended = try await log.append([
            Self.change(acme, epoch: acmeEpoch, sequence: 1), Self.change(beta, epoch: betaEpoch, sequence: 1),
            Self.change(acme, epoch: acmeEpoch, sequence: 2),
        ])
        #expect(appended == [acme])
        #expect(try await TestPostgres.rows(url, "SELECT tenant_id, sequence FROM fleet_tail ORDER BY tenant_id, sequence") == [["acme", "1"], ["acme", "2"]])
        try await n1.shutdown()
    }
}
