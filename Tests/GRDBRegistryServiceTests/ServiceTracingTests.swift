import Foundation
import GRDBRegistry
import GRDBRegistryExamples
@testable import GRDBRegistryService
import InMemoryTracing
import Testing
import Tracing

/// The service hands its tracer to everything it opens: a tenant's lease,
/// its opening with the service's migration run inside, its writes, and
/// the replicator's syncs, all under the caller's span.
@Suite struct ServiceTracingTests {
    @Test func aServiceTracesTheLeaseOpeningMigrationWriteAndSyncOfATenant() async throws {
        let directory = try TemporaryDirectory()
        let tracer = InMemoryTracer()
        let daemon = try ReplicatedDaemon(configuration: try ReplicatedDaemon.configuration(in: directory), tracer: tracer)
        let tenants = daemon.tenants
        let acme = try TenantID("acme")

        try await daemon.run {
            try tenants.provision(acme)
            tracer.clearAll()
            try await tracer.withSpan("request") { _ in
                _ = try await tenants.withRepository(acme) { try await $0.add(name: "Arthur", score: 1) }
                try await daemon.replicator.sync(path: try tenants.path(of: acme))
            }
        }

        let spans = tracer.finishedSpans
        func one(_ name: String) throws -> FinishedInMemorySpan {
            let matching = spans.filter { $0.operationName == name }
            try #require(matching.count == 1, "one \(name) expected in \(spans.map(\.operationName))")
            return matching[0]
        }
        let request = try one("request")
        let lease = try one("sqlite.lease")
        let open = try one("sqlite.open")
        let transaction = try one("sqlite.transaction")
        let commit = try one("sqlite.commit")
        let sync = try one("litestream.sync")
        // The service's migration run, and the repository's check of its
        // own migrator, both inside the opening.
        let migrations = spans.filter { $0.operationName == "sqlite.migrate" }
        #expect(!migrations.isEmpty && migrations.allSatisfy { $0.parentSpanID == open.spanID })
        #expect(lease.parentSpanID == request.spanID)
        #expect(open.parentSpanID == lease.spanID)
        #expect(transaction.parentSpanID == request.spanID)
        #expect(commit.parentSpanID == transaction.spanID)
        #expect(sync.parentSpanID == request.spanID)
        for span in [lease, open, transaction, commit, sync] + migrations {
            #expect(span.attributes.get("db.namespace") == .string("tenants/acme"), "\(span.operationName)")
            #expect(span.attributes.get("db.system.name") == .string("sqlite"))
            #expect(span.status == nil, "\(span.operationName): \(span.errors)")
        }
        #expect(sync.attributes.get("db.operation.name") == .string("sync"))
    }

    @Test func aFailedSyncRecordsItsErrorOnItsSpan() async throws {
        let directory = try TemporaryDirectory()
        let tracer = InMemoryTracer()
        // Not run: no Litestream answers on the socket.
        let daemon = try ReplicatedDaemon(configuration: try ReplicatedDaemon.configuration(in: directory), tracer: tracer)
        let path = try daemon.tenants.path(of: TenantID("acme"))

        await #expect(throws: (any Error).self) { try await daemon.replicator.sync(path: path) }

        let sync = try #require(tracer.finishedSpans.first { $0.operationName == "litestream.sync" })
        #expect(sync.status?.code == .error)
        #expect(sync.errors.count == 1)
        #expect(sync.attributes.get("db.namespace") == .string("tenants/acme"))
    }
}
