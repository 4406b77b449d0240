import GRDB
import Tracing

/// The spans of GRDBRegistry: their names and attributes.
///
/// The library emits spans through the tracer its caller passes (like the
/// logger), never through a global: ``ManagedDatabase``,
/// ``RepositoryDatabase`` and ``TenantDirectory`` take a
/// `tracer: any Tracer`, and ``QueryPolicy`` has one, `NoOpTracer()` by
/// default (so do the backups, restores, the daemon's service and its
/// Litestream replicator, in the other modules).
///
/// ```swift
/// import InMemoryTracing
///
/// let tracer = InMemoryTracer()
/// let scratch = ManagedDatabase(name: "scratch", writer: try DatabaseQueue(), tracer: tracer)
/// try await scratch.write { db in try db.execute(sql: "CREATE TABLE t(a)") }
/// // tracer.finishedSpans: sqlite.commit, sqlite.transaction
/// ```
///
/// Attributes follow OpenTelemetry's database conventions:
/// `db.system.name` is `sqlite`, `db.namespace` the database's name
/// (``ManagedDatabase/name``: `catalog`, `tenants/<id>`), and
/// `db.operation.name` the operation. No span carries SQL, arguments, or
/// key material. A failed operation records its error on its span and sets
/// the error status.
public enum DatabaseSpan {
    /// The name of a span; its `db.operation.name` is ``DatabaseSpan/Name/operation``.
    public enum Name: String, Sendable, CaseIterable {
        /// A lease of a tenant (``TenantDirectory/lease(_:)``), including
        /// the wait for a tenant that another task opens or closes.
        case lease = "sqlite.lease"
        /// The opening of a database: a tenant on its first lease, a
        /// repository. Its children are the migration and restore.
        case open = "sqlite.open"
        /// Migrations applied while opening.
        case migrate = "sqlite.migrate"
        /// A restore (from a backup or a replica) while opening.
        case restore = "sqlite.restore"
        /// A checked write transaction (``ManagedDatabase/write(_:)-6ft3j``).
        case transaction = "sqlite.transaction"
        /// The invariant checks at the end of a write transaction (none
        /// for a database without invariants).
        case invariants = "sqlite.invariants"
        /// The commit of a write transaction, from the end of its checks
        /// to the end of SQLite's commit (rolled back: error status).
        case commit = "sqlite.commit"
        /// A WAL checkpoint.
        case checkpoint = "sqlite.checkpoint"
        /// A backup (an online copy of a database).
        case backup = "sqlite.backup"
        /// A Litestream sync of a replicated database.
        case sync = "litestream.sync"
        /// The start of a ``Query``'s observation (its creation, a new
        /// request, a resume, a retry), with the first fetch of the
        /// built-in queryables. A query does not know its database's
        /// name: the span has no `db.namespace`, and names the request's
        /// type instead (`grdbregistry.query.request`).
        case queryRefresh = "sqlite.query.refresh"

        /// The `db.operation.name` of the span.
        public var operation: String {
            switch self {
            case .lease: "lease"
            case .open: "open"
            case .migrate: "migrate"
            case .restore: "restore"
            case .transaction: "transaction"
            case .invariants: "check_invariants"
            case .commit: "commit"
            case .checkpoint: "checkpoint"
            case .backup: "backup"
            case .sync: "sync"
            case .queryRefresh: "query_refresh"
            }
        }
    }

    /// The attribute keys (OpenTelemetry semantic conventions, and a few
    /// of the library's own under `grdbregistry.`).
    public enum Attribute {
        /// Always `sqlite`.
        public static let system = "db.system.name"
        /// The database's name (``ManagedDatabase/name``).
        public static let namespace = "db.namespace"
        /// What the span does (``Name/operation``).
        public static let operation = "db.operation.name"
        /// The checkpoint mode (`passive`, `full`, `restart`, `truncate`).
        public static let checkpointMode = "grdbregistry.checkpoint.mode"
        /// On a lease span: whether the lease waited for another task's
        /// opening or closing of the tenant.
        public static let leaseWaited = "grdbregistry.lease.waited"
        /// On a lease span: whether this lease opened the tenant.
        public static let leaseOpened = "grdbregistry.lease.opened"
        /// On an invariants span: how many invariants were checked.
        public static let invariantCount = "grdbregistry.invariants.count"
        /// On a migrate span: how many migrations were applied.
        public static let migrationCount = "grdbregistry.migrations.applied"
        /// On a query refresh span: the type of the query's request.
        public static let queryRequest = "grdbregistry.query.request"
    }
}

/// The tracer of a database object, reduced to nil when it is a
/// `NoOpTracer`: with tracing off, an operation tests one optional and
/// allocates nothing for spans.
package struct DatabaseTracing: Sendable {
    package let tracer: (any Tracer)?

    package init(_ tracer: any Tracer) {
        self.tracer = tracer is NoOpTracer ? nil : tracer
    }

    package static let off = DatabaseTracing(NoOpTracer())

    /// The tracer to pass on to another object (a `NoOpTracer` when off).
    package var passedOn: any Tracer { tracer ?? NoOpTracer() }

    /// Starts a span named `name` on `database`, with the conventional
    /// attributes, or nil when tracing is off.
    package func startSpan(
        _ name: DatabaseSpan.Name, database: @autoclosure () -> String,
        context: @autoclosure () -> ServiceContext = ServiceContext.current ?? .topLevel
    ) -> (any Span)? {
        guard let tracer else { return nil }
        let span = tracer.startSpan(name.rawValue, context: context(), ofKind: .internal)
        span.attributes[DatabaseSpan.Attribute.system] = "sqlite"
        span.attributes[DatabaseSpan.Attribute.namespace] = database()
        span.attributes[DatabaseSpan.Attribute.operation] = name.operation
        return span
    }

    /// Runs `body` in a span (the task-local context is the span's inside
    /// it); records a thrown error on the span.
    package func withSpan<T>(
        _ name: DatabaseSpan.Name, database: @autoclosure () -> String,
        isolation: isolated (any Actor)? = #isolation,
        _ body: (_ span: (any Span)?) async throws -> T
    ) async throws -> T {
        guard let span = startSpan(name, database: database()) else { return try await body(nil) }
        defer { span.end() }
        do {
            return try await ServiceContext.$current.withValue(span.context) {
                try await body(span)
            }
        } catch {
            span.fail(error)
            throw error
        }
    }

    /// The synchronous version of `withSpan(_:database:isolation:_:)`,
    /// also for code that runs on a database queue, where `context`
    /// (captured on the task) is the parent.
    package func withSpan<T>(
        _ name: DatabaseSpan.Name, database: @autoclosure () -> String,
        context: @autoclosure () -> ServiceContext? = ServiceContext.current,
        _ body: (_ span: (any Span)?) throws -> T
    ) throws -> T {
        guard let span = startSpan(name, database: database(), context: context() ?? .topLevel) else { return try body(nil) }
        defer { span.end() }
        do {
            return try ServiceContext.$current.withValue(span.context) { try body(span) }
        } catch {
            span.fail(error)
            throw error
        }
    }

    /// Starts the span of a ``Query`` refresh, or nil when tracing is off.
    package func startQueryRefreshSpan<Request>(request: Request.Type) -> (any Span)? {
        guard let tracer else { return nil }
        let span = tracer.startSpan(DatabaseSpan.Name.queryRefresh.rawValue, context: ServiceContext.current ?? .topLevel, ofKind: .internal)
        span.attributes[DatabaseSpan.Attribute.system] = "sqlite"
        span.attributes[DatabaseSpan.Attribute.operation] = DatabaseSpan.Name.queryRefresh.operation
        span.attributes[DatabaseSpan.Attribute.queryRequest] = String(reflecting: request)
        return span
    }

    /// Runs `body` in a child span of `parent`, or without a span when
    /// `parent` is nil (tracing off, or nothing worth a span).
    package func withChildSpan<T>(
        _ name: DatabaseSpan.Name, database: @autoclosure () -> String, of parent: ServiceContext?,
        _ body: (_ span: (any Span)?) throws -> T
    ) throws -> T {
        guard let parent else { return try body(nil) }
        return try withSpan(name, database: database(), context: parent, body)
    }

    /// Starts the commit span at the end of a write transaction's checks,
    /// inside it: SQLite's commit or rollback ends it.
    package func traceCommit(_ db: Database, database: String, context: ServiceContext?) {
        guard let context, let span = startSpan(.commit, database: database, context: context) else { return }
        db.afterNextTransaction(
            onCommit: { _ in span.end() },
            onRollback: { _ in
                span.setStatus(SpanStatus(code: .error, message: "rolled back"))
                span.end()
            })
    }
}

extension Span {
    /// Records `error` (without the data it may carry) and sets the error
    /// status.
    package func fail(_ error: any Error) {
        recordError(DatabaseSpan.redacted(error))
        setStatus(SpanStatus(code: .error))
    }
}

extension DatabaseSpan {
    /// `error`, without the rows of the database it may quote: an
    /// exporter sends a recorded error's description to the collector,
    /// and the offending rows of a broken invariant are user data.
    package static func redacted(_ error: any Error) -> any Error {
        switch error {
        case var violation as InvariantViolation:
            violation.offendingRows = []
            return violation
        case let DatabaseRepositoryError.outOfBandWriteBrokeInvariant(violation):
            return DatabaseRepositoryError.outOfBandWriteBrokeInvariant(redacted(violation) as? InvariantViolation ?? violation)
        default:
            return error
        }
    }
}
