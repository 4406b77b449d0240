import Foundation
import GRDBRegistry
import GRDBRegistryFleet
import Logging
import Metrics
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// The catalog of fleet mode: each tenant's name and token hash in the
/// server's own PostgreSQL table, `mts_tenants`, beside the fleet's tables
/// and through the fleet's client (`Fleet.withPostgres`: one URL, one TLS
/// configuration, one pool). Whether a tenant is encrypted, and who owns
/// it, are the fleet's (`fleet_tenants`, which each row references: a
/// tenant whose creation failed loses its row with the fleet's).
///
/// PostgreSQL enforces the rules of the embedded catalog
/// (``CatalogRepository``): a token hash is unique and 64 lowercase hex
/// digits (SHA-256, never a token), a name is never NULL. Every row read is
/// checked again, since whoever owns the table can drop a constraint: a
/// row that fails (its id is no tenant id, its hash no SHA-256 hex, or its
/// hash is another tenant's too) signs nobody in; it is logged and counted
/// in `mts_invalid_catalog_rows_total`, at each read, never skipped
/// silently. (The embedded catalog refuses such a file at open; one row
/// here must not stop every node of a fleet.)
///
/// Reads come from memory, refreshed every renew interval of the fleet
/// (``run()``): a rotated token stops working on the other nodes within
/// one. A token that memory does not know is looked up in PostgreSQL
/// before it is refused (``tenantFromDatabase(forToken:)``, in batches:
/// ``TokenLookups``), so that a tenant's token works on every node from
/// the moment its creation is answered.
///
/// ```swift
/// let catalog = PostgresCatalog(fleet: fleet, logger: logger)
/// try await catalog.prepare()    // once the fleet joined
/// catalog.tenant(forToken: token)?.id
/// ```
final class PostgresCatalog: TenantCatalog, Service {
    let fleet: Fleet
    let logger: Logger
    private let memory = Mutex(Memory())
    private let prepared = Mutex(false)
    private let signIns = SignInCache()
    private let statements: Statements
    private let lookups: TokenLookups

    init(fleet: Fleet, logger: Logger) {
        self.fleet = fleet
        self.logger = logger
        let statements = Statements(fleet: fleet, logger: logger)
        self.statements = statements
        lookups = TokenLookups { hashes in try await statements.tenants(withTokenHashes: hashes) }
    }

    // MARK: Schema

    /// Creates the table when absent (once across nodes: in one
    /// transaction under an advisory lock), then reads every row. Must run
    /// after the fleet joined (its tables exist then).
    ///
    /// The table is created with the names and token hashes that version 2
    /// of the fleet's schema kept in `fleet_tenants` (its version 3 leaves
    /// them there for this copy): an installation upgraded keeps every
    /// tenant's name and token. A hash that breaks the rules is not copied
    /// (its tenant is listed without a token, and the log names it: rotate
    /// its token).
    func prepare() async throws {
        let logger = logger
        try await fleet.withPostgres("the creation of the catalog table") { client in
            do {
                try await client.withTransaction(logger: logger) { connection in
                    try await Self.createUnlessPresent(connection, logger: logger)
                }
            } catch let error as PostgresTransactionError {
                // Rolled back: report why, not the wrapper.
                throw error.closureError ?? error.beginError ?? error.commitError ?? error
            }
        }
        try await refresh()
        prepared.withLock { $0 = true }
    }

    /// Serialises the table's creation across nodes (an arbitrary constant: "MTScat01").
    static let advisoryLock: Int64 = 0x4D54_5363_6174_3031

    static let createTable = """
        CREATE TABLE mts_tenants (
            tenant_id   text PRIMARY KEY REFERENCES fleet_tenants (tenant_id) ON DELETE CASCADE,
            name        text NOT NULL,
            token_hash  text CONSTRAINT mts_tenants_token_hash_unique UNIQUE
                             CONSTRAINT mts_tenants_token_hash_sha256 CHECK (token_hash ~ '^[0-9a-f]{64}$'),
            created_at  timestamptz NOT NULL DEFAULT now())
        """

    private static func createUnlessPresent(_ connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query("SELECT pg_advisory_xact_lock(\(advisoryLock))", logger: logger)
        let exists = try await connection.query("SELECT to_regclass('mts_tenants') IS NOT NULL", logger: logger)
            .collect().first?.decode(Bool.self) ?? false
        if exists { return }
        try await connection.query(PostgresQuery(unsafeSQL: createTable), logger: logger)
        let legacyColumns = try await connection.query("""
            SELECT count(*) FROM information_schema.columns
            WHERE table_schema = current_schema() AND table_name = 'fleet_tenants' AND column_name IN ('name', 'token_hash')
            """, logger: logger).collect().first?.decode(Int.self) ?? 0
        guard legacyColumns == 2 else {
            logger.info("created the catalog table")
            return
        }
        // Hashes that break the rules, or that two tenants share, stay
        // behind: neither would sign anyone in.
        let copied = try await connection.query("""
            INSERT INTO mts_tenants (tenant_id, name, token_hash, created_at)
            SELECT f.tenant_id, f.name,
                   CASE WHEN f.token_hash ~ '^[0-9a-f]{64}$'
                         AND (SELECT count(*) FROM fleet_tenants g WHERE g.token_hash = f.token_hash) = 1
                        THEN f.token_hash END,
                   f.created_at
            FROM fleet_tenants f WHERE f.name IS NOT NULL
            RETURNING tenant_id
            """, logger: logger).collect().count
        let left = try await connection.query("""
            SELECT f.tenant_id FROM fleet_tenants f
            WHERE f.token_hash IS NOT NULL AND NOT EXISTS
                (SELECT 1 FROM mts_tenants c WHERE c.tenant_id = f.tenant_id AND c.token_hash = f.token_hash)
            ORDER BY f.tenant_id
            """, logger: logger).collect().map { try $0.decode(String.self) }
        logger.notice("created the catalog table with the names and token hashes of the fleet's earlier schema", metadata: ["tenants": "\(copied)"])
        if !left.isEmpty {
            logger.warning("tenants whose token hash broke the catalog's rules have no token: rotate theirs (POST /tenants/{id}/token)", metadata: [
                "tenants": "\(left.joined(separator: ", "))",
            ])
        }
    }

    // MARK: Refreshes

    /// Refreshes memory every renew interval of the fleet, until the
    /// service group shuts down. A failed refresh keeps the last one (and
    /// is logged): PostgreSQL down, the fleet fences its own writes.
    func run() async throws {
        let interval = fleet.configuration.renewInterval
        await cancelWhenGracefulShutdown {
            while true {
                do {
                    try await Task.sleep(for: interval)
                } catch {
                    return
                }
                guard self.prepared.withLock({ $0 }) else { continue }
                do {
                    try await self.refresh()
                } catch {
                    self.logger.warning("could not refresh the catalog", metadata: ["error": "\(error)"])
                }
            }
        }
    }

    /// Reads every row into memory.
    func refresh() async throws {
        let start = memory.withLock { $0.clock }
        let tenants = try await statements.allTenants()
        memory.withLock { $0.install(tenants, readStart: start) }
    }

    /// The catalog in memory, and the rows this node wrote or looked up
    /// itself, with the clock at the change: a refresh whose read began
    /// before a change applies it again over what it read, so that it
    /// never brings back a token this node rotated out, nor hides a
    /// tenant it just created.
    private struct Memory {
        var index = CatalogIndex()
        var edits: [String: (tenant: Tenant, at: UInt64)] = [:]
        var clock: UInt64 = 0

        mutating func edit(_ tenant: Tenant) {
            clock += 1
            index.update(tenant)
            edits[tenant.id] = (tenant, clock)
        }

        mutating func install(_ read: [Tenant], readStart: UInt64) {
            var index = CatalogIndex(read)
            for (id, edit) in edits {
                if edit.at > readStart { index.update(edit.tenant) } else { edits[id] = nil }
            }
            self.index = index
        }
    }

    // MARK: TenantCatalog

    func tenant(forToken token: String) -> Tenant? {
        let index = memory.withLock { $0.index }
        return signIns.tenant(
            forToken: token, tenantCount: index.tenants.count,
            byHash: { index.idsByTokenHash[$0].flatMap { index.tenants[$0] } },
            byID: { index.tenants[$0] })
    }

    func tenantFromDatabase(forToken token: String) async throws -> Tenant? {
        // Not shaped like a token: no hash could find it.
        guard Tokens.isWellFormed(token) else { return nil }
        guard let tenant = try await lookups.tenant(forHash: Tokens.hash(token)) else { return nil }
        memory.withLock { $0.edit(tenant) }
        return self.tenant(forToken: token)
    }

    /// The tenant of id `id`. One that the fleet lists but memory does not
    /// yet (created on another node since the last refresh, then handed
    /// here) is known by its id until the next refresh: what it is
    /// (encrypted or not) is the fleet's.
    func tenant(_ id: String) -> Tenant? {
        if let tenant = memory.withLock({ $0.index.tenants[id] }) { return tenant }
        guard let row = fleet.catalogTenant(id) else { return nil }
        return Tenant(id: id, name: id, encrypted: row.encrypted, createdAt: row.createdAt, tokenHash: nil)
    }

    func allTenants() -> [Tenant] {
        memory.withLock { $0.index.tenants.values }.sorted { $0.id < $1.id }
    }

    /// Creates the tenant in the fleet, and, while the fleet's row is this
    /// node's, its row here, then runs `provision`: when either fails, the
    /// fleet deletes its row, and this one with it.
    func create(_ tenant: Tenant, provision: @escaping @Sendable () async throws -> Void) async throws -> Tenant {
        guard let hash = tenant.tokenHash else {
            throw CatalogError.missingTokenHash(tenant.id)
        }
        let listed = Mutex<Tenant?>(nil)
        do {
            _ = try await fleet.createTenant(id: try TenantID(tenant.id), encrypted: tenant.encrypted) { [statements] in
                let createdAt = try await statements.insert(id: tenant.id, name: tenant.name, tokenHash: hash)
                try await provision()
                var created = tenant
                created.createdAt = createdAt
                listed.withLock { $0 = created }
            }
        } catch FleetError.tenantExists {
            throw CatalogError.tenantExists(tenant.id)
        }
        guard let created = listed.withLock({ $0 }) else {
            throw CatalogViewError(message: "the fleet created tenant \(tenant.id) without running its provision")
        }
        memory.withLock { $0.edit(created) }
        return created
    }

    func setTokenHash(_ hash: String, of id: String) async throws -> Tenant? {
        guard let tenant = try await statements.setTokenHash(hash, of: id) else { return nil }
        memory.withLock { $0.edit(tenant) }
        return tenant
    }
}

extension PostgresCatalog {
    /// The catalog's statements, each through the fleet's client, and the
    /// checks of the rows they read.
    struct Statements: Sendable {
        let fleet: Fleet
        let logger: Logger

        /// The columns every read returns, in ``tenants(from:)``'s order:
        /// the catalog's row (`c`) and the fleet's (`f`).
        private static let columns = "c.tenant_id, c.name, c.token_hash, c.created_at, f.encrypted"

        func allTenants() async throws -> [Tenant] {
            let rows = try await fleet.withPostgres("the catalog") { client in
                try await client.query(PostgresQuery(unsafeSQL: "SELECT \(Self.columns) FROM mts_tenants c JOIN fleet_tenants f USING (tenant_id)")).collect()
            }
            return tenants(from: rows)
        }

        /// The tenants of these token hashes, by hash.
        func tenants(withTokenHashes hashes: [String]) async throws -> [String: Tenant] {
            let rows = try await fleet.withPostgres("the lookup of \(hashes.count) token hashes") { client in
                var query = PostgresQuery(unsafeSQL: "SELECT \(Self.columns) FROM mts_tenants c JOIN fleet_tenants f USING (tenant_id) WHERE c.token_hash = ANY($1)")
                query.binds.append(hashes, context: .default)
                return try await client.query(query).collect()
            }
            return Dictionary(tenants(from: rows).compactMap { tenant in tenant.tokenHash.map { ($0, tenant) } }, uniquingKeysWith: { first, _ in first })
        }

        /// Lists tenant `id`, whose fleet row exists; returns when it was
        /// created (PostgreSQL's clock).
        func insert(id: String, name: String, tokenHash: String) async throws -> Date {
            let createdAt = try await fleet.withPostgres("the creation of tenant \(id) in the catalog") { client in
                try await client.query("""
                    INSERT INTO mts_tenants (tenant_id, name, token_hash) VALUES (\(id), \(name), \(tokenHash)) RETURNING created_at
                    """).collect().first?.decode(Date.self)
            }
            guard let createdAt else {
                throw CatalogViewError(message: "PostgreSQL returned no row for the creation of tenant \(id) in the catalog")
            }
            return createdAt
        }

        /// Replaces the token hash of tenant `id`; nil when the catalog
        /// does not list it.
        func setTokenHash(_ hash: String, of id: String) async throws -> Tenant? {
            let rows = try await fleet.withPostgres("the token update of tenant \(id)") { client in
                var query = PostgresQuery(unsafeSQL: """
                    UPDATE mts_tenants c SET token_hash = $1 FROM fleet_tenants f
                    WHERE c.tenant_id = $2 AND f.tenant_id = c.tenant_id
                    RETURNING \(Self.columns)
                    """)
                query.binds.append(hash, context: .default)
                query.binds.append(id, context: .default)
                return try await client.query(query).collect()
            }
            guard !rows.isEmpty else { return nil }
            guard let tenant = tenants(from: rows).first, tenant.tokenHash == hash else {
                throw CatalogViewError(message: "the catalog row of tenant \(id) breaks the catalog's rules after its token update (logged)")
            }
            return tenant
        }

        /// The rows that pass the catalog's rules, each one that does not
        /// logged and counted. Rows that share a token hash are listed
        /// without it: the token could be either tenant's.
        func tenants(from rows: [PostgresRow]) -> [Tenant] {
            var tenants: [Tenant] = []
            for row in rows {
                do {
                    tenants.append(try Self.tenant(from: row))
                } catch {
                    report(error)
                }
            }
            let shared = Dictionary(grouping: tenants.compactMap(\.tokenHash), by: { $0 }).filter { $0.value.count > 1 }
            guard !shared.isEmpty else { return tenants }
            return tenants.map { tenant in
                guard let hash = tenant.tokenHash, shared[hash] != nil else { return tenant }
                report(InvalidCatalogRow(id: tenant.id, reason: "its token hash is another tenant's too: neither signs in"))
                var untrusted = tenant
                untrusted.tokenHash = nil
                return untrusted
            }
        }

        private static func tenant(from row: PostgresRow) throws -> Tenant {
            let (id, name, tokenHash, createdAt, encrypted): (String, String?, String?, Date, Bool)
            do {
                (id, name, tokenHash, createdAt, encrypted) = try row.decode((String, String?, String?, Date, Bool).self)
            } catch {
                throw InvalidCatalogRow(id: (try? row.first?.decode(String.self)) ?? "?", reason: "its columns don't decode (\(String(reflecting: type(of: error))))")
            }
            guard (try? TenantID(id)) != nil else {
                throw InvalidCatalogRow(id: id, reason: "the tenant id is not a valid tenant id")
            }
            guard let name else {
                throw InvalidCatalogRow(id: id, reason: "it has no name")
            }
            if let tokenHash, !Self.isSHA256Hex(tokenHash) {
                throw InvalidCatalogRow(id: id, reason: "its token hash is not 64 lowercase hex digits")
            }
            return Tenant(id: id, name: name, encrypted: encrypted, createdAt: createdAt, tokenHash: tokenHash)
        }

        /// The rule of `tokenHashIsSHA256` (``CatalogRepository/invariants``).
        static func isSHA256Hex(_ hash: String) -> Bool {
            hash.utf8.count == 64 && hash.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
        }

        private func report(_ error: any Error) {
            logger.error("refused a catalog row read from PostgreSQL", metadata: ["table": "mts_tenants", "error": "\(error)"])
            Counter(label: "mts_invalid_catalog_rows_total").increment()
        }
    }
}

/// A row of the fleet's catalog table that breaks the catalog's rules.
struct InvalidCatalogRow: Error, CustomStringConvertible {
    var id: String
    var reason: String

    var description: String {
        "the catalog row of tenant \(id.debugDescription) is refused: \(reason)"
    }
}
