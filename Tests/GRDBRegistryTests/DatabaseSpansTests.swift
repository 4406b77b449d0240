import Foundation
import GRDB
@testable import GRDBRegistry
import InMemoryTracing
import Testing
import Tracing

/// A tenant repository of notes, whose texts must be short (an invariant).
private struct NotesTenant: TenantRepository {
    static let migrator: DatabaseMigrator = {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("createNote") { db in
            try db.execute(sql: "CREATE TABLE note (id INTEGER PRIMARY KEY, text TEXT NOT NULL)")
        }
        return migrator
    }()
    static let invariants: [DatabaseInvariant] = [.sql("short notes", "SELECT id, text FROM note WHERE length(text) > 20")]

    let database: RepositoryDatabase

    static func openTenant(_ opening: TenantOpening) throws -> NotesTenant {
        try NotesTenant(database: RepositoryDatabase(
            path: opening.path, name: opening.name, migrator: migrator, policy: opening.policy,
            invariants: invariants, configuration: opening.configuration, connections: opening.connections,
            checkpointOnClose: opening.checkpointOnClose, onEvent: opening.onEvent, tracer: opening.tracer))
    }

    var reader: any DatabaseReader { get throws { try database.reader } }
    var managedDatabase: ManagedDatabase { database.managed }
}

private func notes(_ tracer: InMemoryTracer) throws -> RepositoryDatabase {
    try RepositoryDatabase(
        writer: DatabaseQueue.inMemoryWithReadOnlyAccess(), name: "notes", migrator: NotesTenant.migrator,
        invariants: NotesTenant.invariants, tracer: tracer)
}

private extension FinishedInMemorySpan {
    func string(_ key: String) -> String? {
        if case let .string(value)? = attributes.get(key) { return value }
        return nil
    }

    /// Every attribute value, as text.
    var attributeTexts: [String] {
        var texts: [String] = []
        attributes.forEach { key, value in texts.append("\(key)=\(value)") }
        return texts
    }
}

private func only(_ name: DatabaseSpan.Name, in spans: [FinishedInMemorySpan]) throws -> FinishedInMemorySpan {
    let matching = spans.filter { $0.operationName == name.rawValue }
    try #require(matching.count == 1, "one \(name.rawValue) span expected, found \(matching.count) in \(spans.map(\.operationName))")
    return matching[0]
}

private struct NoteCount: ValueObservationQueryable {
    static var defaultValue: Int { 0 }
    var table: String
    func fetch(_ db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table)") ?? 0
    }
}

@Suite struct DatabaseSpansTests {
    @Test func aWriteIsATransactionSpanWithTheInvariantsAndTheCommitAsChildrenUnderTheCallersSpan() async throws {
        let tracer = InMemoryTracer()
        let repository = try notes(tracer)
        tracer.clearAll()

        try await tracer.withSpan("request") { _ in
            try await repository.write { db in
                try db.execute(sql: "INSERT INTO note (text) VALUES (?)", arguments: ["argument-value"])
            }
        }

        let spans = tracer.finishedSpans
        let request = try #require(spans.first { $0.operationName == "request" })
        let transaction = try only(.transaction, in: spans)
        let invariants = try only(.invariants, in: spans)
        let commit = try only(.commit, in: spans)
        #expect(transaction.parentSpanID == request.spanID)
        #expect(invariants.parentSpanID == transaction.spanID)
        #expect(commit.parentSpanID == transaction.spanID)
        #expect(Set(spans.map(\.traceID)) == [request.traceID])
        #expect(invariants.attributes.get(DatabaseSpan.Attribute.invariantCount) == .int64(1))
        for (span, operation) in [(transaction, "transaction"), (invariants, "check_invariants"), (commit, "commit")] {
            #expect(span.string("db.system.name") == "sqlite")
            #expect(span.string("db.namespace") == "notes")
            #expect(span.string("db.operation.name") == operation)
            #expect(span.status == nil && span.errors.isEmpty, "\(span.operationName) succeeded")
            // Neither SQL nor its arguments.
            #expect(!span.attributeTexts.contains { $0.contains("INSERT") || $0.contains("argument-value") })
        }
        // Children end before their parent; the commit ends at SQLite's commit.
        #expect(commit.endInstant.nanosecondsSinceEpoch <= transaction.endInstant.nanosecondsSinceEpoch)
    }

    @Test func aBrokenInvariantIsRecordedOnItsSpansWithoutTheOffendingRows() async throws {
        let tracer = InMemoryTracer()
        let repository = try notes(tracer)
        tracer.clearAll()

        await #expect(throws: (any Error).self) {
            try await repository.write { db in
                try db.execute(sql: "INSERT INTO note (text) VALUES ('secret-row-value-that-is-too-long')")
            }
        }

        let spans = tracer.finishedSpans
        let transaction = try only(.transaction, in: spans)
        let invariants = try only(.invariants, in: spans)
        #expect(!spans.contains { $0.operationName == DatabaseSpan.Name.commit.rawValue }, "no commit was attempted")
        for span in [transaction, invariants] {
            #expect(span.status?.code == .error)
            let error = try #require(span.errors.first?.error)
            let violation = try #require(error as? InvariantViolation)
            #expect(violation.invariant == "short notes")
            #expect(!"\(error)".contains("secret-row-value"), "the recorded error quotes no row: \(error)")
        }
        // The caller still gets the rows.
        await #expect {
            try await repository.write { db in try db.execute(sql: "INSERT INTO note (text) VALUES ('secret-row-value-that-is-too-long')") }
        } throws: { error in
            "\(error)".contains("secret-row-value")
        }
    }

    @Test func aCommitRefusedByTheWriteGateEndsTheCommitSpanAsRolledBack() async throws {
        let tracer = InMemoryTracer()
        let repository = try notes(tracer)
        await repository.managed.drain()
        tracer.clearAll()

        await #expect(throws: ManagedDatabaseError.notAcceptingWrites(database: "notes")) {
            try await repository.managed.write { db in try db.execute(sql: "INSERT INTO note (text) VALUES ('late')") }
        }

        let spans = tracer.finishedSpans
        let commit = try only(.commit, in: spans)
        let transaction = try only(.transaction, in: spans)
        #expect(commit.status?.code == .error)
        #expect(commit.status?.message == "rolled back")
        #expect(commit.parentSpanID == transaction.spanID)
        #expect(transaction.status?.code == .error)
        #expect(transaction.errors.first?.error as? ManagedDatabaseError == .notAcceptingWrites(database: "notes"))
    }

    @Test func aFirstLeaseOpensAndMigratesTheTenantInsideItsLeaseSpan() async throws {
        let directory = try TemporaryDirectory()
        let tracer = InMemoryTracer()
        let tenants = try TenantDirectory<NotesTenant>(root: directory.url, tracer: tracer)
        let acme = try TenantID("acme")
        // An empty database file: its first open applies the migrations.
        try DatabaseQueue(path: try tenants.path(of: acme)).close()

        let lease = try await tracer.withSpan("request") { _ in try await tenants.lease(acme) }
        let spans = tracer.popFinishedSpans()
        let request = try #require(spans.first { $0.operationName == "request" })
        let leaseSpan = try only(.lease, in: spans)
        let open = try only(.open, in: spans)
        let migrate = try only(.migrate, in: spans)
        #expect(leaseSpan.parentSpanID == request.spanID)
        #expect(open.parentSpanID == leaseSpan.spanID)
        #expect(migrate.parentSpanID == open.spanID)
        #expect(leaseSpan.attributes.get(DatabaseSpan.Attribute.leaseOpened) == .bool(true))
        #expect(migrate.attributes.get(DatabaseSpan.Attribute.migrationCount) == .int64(1))
        for span in [leaseSpan, open, migrate] {
            #expect(span.string("db.namespace") == "tenants/acme")
            #expect(span.string("db.system.name") == "sqlite")
        }

        // The tenant's writes go to the same tracer; a second lease opens nothing.
        try await tracer.withSpan("request") { _ in
            let again = try await tenants.lease(acme)
            try await again.repository.database.write { db in try db.execute(sql: "INSERT INTO note (text) VALUES ('hi')") }
        }
        let second = tracer.popFinishedSpans()
        #expect(Set(second.map(\.operationName)) == ["request", "sqlite.lease", "sqlite.transaction", "sqlite.invariants", "sqlite.commit"])
        #expect(try only(.transaction, in: second).string("db.namespace") == "tenants/acme")
        #expect(try only(.lease, in: second).attributes.get(DatabaseSpan.Attribute.leaseOpened) == nil)
        withExtendedLifetime(lease) { }
        await tenants.close()
    }

    @Test func aFailedLeaseRecordsItsErrorOnTheLeaseAndOpenSpans() async throws {
        let directory = try TemporaryDirectory()
        let tracer = InMemoryTracer()
        let tenants = try TenantDirectory<NotesTenant>(root: directory.url, tracer: tracer)
        let ghost = try TenantID("ghost")

        await #expect(throws: TenantError.unknownTenant(ghost)) {
            _ = try await tenants.lease(ghost)
        }
        let spans = tracer.finishedSpans
        for name in [DatabaseSpan.Name.lease, .open] {
            let span = try only(name, in: spans)
            #expect(span.status?.code == .error)
            #expect(span.errors.first?.error as? TenantError == .unknownTenant(ghost))
        }
        await tenants.close()
    }

    @Test func aLeaseThatWaitsForAnotherTasksOpeningSaysSo() async throws {
        let directory = try TemporaryDirectory()
        let tracer = InMemoryTracer()
        let opening = DispatchSemaphore(value: 0)
        let tenants = try TenantDirectory<NotesTenant>(root: directory.url, configuration: { _, _ in
            // Held open until the second lease waits.
            opening.wait()
            return Configuration()
        }, tracer: tracer)
        let acme = try TenantID("acme")
        try DatabaseQueue(path: try tenants.path(of: acme)).close()

        async let first = tenants.lease(acme)
        // Whatever happens below, the opening ends (before `first` is awaited).
        defer { opening.signal() }
        // The first lease opens, on the directory's queue.
        while !tracer.activeSpans.contains(where: { $0.operationName == DatabaseSpan.Name.open.rawValue }) {
            try await Task.sleep(for: .milliseconds(5))
        }
        async let second = tenants.lease(acme)
        while !tracer.activeSpans.contains(where: { $0.attributes.get(DatabaseSpan.Attribute.leaseWaited) == .bool(true) }) {
            try await Task.sleep(for: .milliseconds(5))
        }
        opening.signal()
        let leases = try await [first, second]

        let spans = tracer.finishedSpans.filter { $0.operationName == DatabaseSpan.Name.lease.rawValue }
        #expect(spans.count == 2)
        #expect(spans.filter { $0.attributes.get(DatabaseSpan.Attribute.leaseWaited) == .bool(true) }.count == 1)
        #expect(spans.filter { $0.attributes.get(DatabaseSpan.Attribute.leaseOpened) == .bool(true) }.count == 1)
        #expect(tracer.finishedSpans.filter { $0.operationName == DatabaseSpan.Name.open.rawValue }.count == 1)
        withExtendedLifetime(leases) { }
        await tenants.close()
    }

    @Test func aCheckpointIsASpanNamingItsMode() throws {
        let directory = try TemporaryDirectory()
        let tracer = InMemoryTracer()
        let database = try ManagedDatabase(path: directory.path("db.sqlite"), name: "db", connections: DatabaseConnections(), tracer: tracer)
        try database.write { db in try db.execute(sql: "CREATE TABLE t(a)") }
        // No invariants, no invariants span.
        #expect(tracer.popFinishedSpans().map(\.operationName).sorted() == ["sqlite.commit", "sqlite.transaction"])

        try database.checkpoint(.truncate)

        let checkpoint = try only(.checkpoint, in: tracer.finishedSpans)
        #expect(checkpoint.string("db.operation.name") == "checkpoint")
        #expect(checkpoint.string(DatabaseSpan.Attribute.checkpointMode) == "truncate")
        try database.close()
    }

    @Test func aQueryRefreshIsASpanNamingItsRequestTypeAndRecordingItsError() async throws {
        let tracer = InMemoryTracer()
        let repository = try notes(tracer)
        tracer.clearAll()

        let query = tracer.withSpan("screen") { _ in
            Query(NoteCount(table: "note"), context: repository.context, policy: QueryPolicy(tracer: tracer))
        }
        let spans = tracer.popFinishedSpans()
        let screen = try #require(spans.first { $0.operationName == "screen" })
        let refresh = try only(.queryRefresh, in: spans)
        #expect(refresh.parentSpanID == screen.spanID)
        #expect(refresh.string(DatabaseSpan.Attribute.queryRequest)?.hasSuffix("NoteCount") == true)
        #expect(refresh.string("db.operation.name") == "query_refresh")
        #expect(refresh.status == nil)
        #expect(query.value == 0)

        // A new request is a new refresh; one that fails records its error.
        query.request = NoteCount(table: "missing")
        let failed = try only(.queryRefresh, in: tracer.popFinishedSpans())
        #expect(failed.status?.code == .error)
        #expect(failed.errors.first?.error is DatabaseError)
        #expect(query.error is DatabaseError)
    }

    @Test func theNoOpTracerTurnsTracingOff() {
        #expect(DatabaseTracing(NoOpTracer()).tracer == nil)
        #expect(DatabaseTracing(InMemoryTracer()).tracer != nil)
        #expect(DatabaseTracing.off.startSpan(.transaction, database: "x") == nil)
    }
}
