import Logging
import PostgresNIO

/// The fleet's tables in PostgreSQL, version 1: nodes and their leases,
/// each tenant's owner and epoch, and the catalog (name, encryption, token
/// hash).
///
/// Created in one transaction under an advisory lock when absent, so that
/// nodes starting together create it once. A schema of another version is
/// refused before anything is written.
enum FleetSchema {
    static let version = 1

    /// Serialises schema creation across nodes (an arbitrary constant: "GRDBflt1").
    static let advisoryLock: Int64 = 0x4752_4442_666C_7431

    /// Version 1. `epoch` only grows: a trigger refuses an update that
    /// lowers it, whoever runs it (a node with a bug, an operator's psql).
    static let statements: [String] = [
        "CREATE TABLE fleet_schema (version integer NOT NULL)",
        """
        CREATE TABLE fleet_nodes (
            node_id     text PRIMARY KEY,
            session     uuid NOT NULL,
            address     text NOT NULL,
            state       text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'draining', 'left')),
            lease_until timestamptz NOT NULL,
            joined_at   timestamptz NOT NULL DEFAULT now())
        """,
        """
        CREATE TABLE fleet_tenants (
            tenant_id   text PRIMARY KEY,
            name        text NOT NULL,
            encrypted   boolean NOT NULL,
            token_hash  text,
            created_at  timestamptz NOT NULL DEFAULT now(),
            owner       text REFERENCES fleet_nodes(node_id),
            epoch       bigint NOT NULL DEFAULT 0 CHECK (epoch >= 0))
        """,
        "CREATE INDEX fleet_tenants_owner ON fleet_tenants (owner)",
        "CREATE INDEX fleet_tenants_token_hash ON fleet_tenants (token_hash)",
        """
        CREATE FUNCTION fleet_epoch_only_grows() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.epoch < OLD.epoch THEN
                RAISE EXCEPTION 'fleet_tenants.epoch of tenant % can only grow (from % to % refused)',
                    OLD.tenant_id, OLD.epoch, NEW.epoch;
            END IF;
            RETURN NEW;
        END
        $$
        """,
        """
        CREATE TRIGGER fleet_epoch_only_grows BEFORE UPDATE OF epoch ON fleet_tenants
            FOR EACH ROW EXECUTE FUNCTION fleet_epoch_only_grows()
        """,
        "INSERT INTO fleet_schema (version) VALUES (1)",
    ]

    /// Creates version 1 when the database has no fleet schema; checks the
    /// version otherwise.
    ///
    /// - returns: whether it created the schema.
    /// - throws: ``FleetError/schemaVersion(found:expected:)`` (nothing
    ///   written: the transaction rolls back).
    @discardableResult
    static func prepare(_ client: PostgresClient, logger: Logger) async throws -> Bool {
        do {
            return try await createOrCheck(client, logger: logger)
        } catch let error as PostgresTransactionError {
            // The transaction rolled back: report why, not the wrapper.
            throw error.closureError ?? error.beginError ?? error.commitError ?? error
        }
    }

    private static func createOrCheck(_ client: PostgresClient, logger: Logger) async throws -> Bool {
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(advisoryLock))", logger: logger)
            let exists = try await connection.query(
                "SELECT to_regclass('fleet_schema') IS NOT NULL", logger: logger
            ).collect().first?.decode(Bool.self) ?? false
            if exists {
                let versions = try await connection.query("SELECT version FROM fleet_schema", logger: logger)
                    .collect().map { try $0.decode(Int.self) }
                guard versions == [version] else {
                    // Zero rows or several: not a schema this build wrote (reported as version 0).
                    throw FleetError.schemaVersion(found: versions.count == 1 ? versions[0] : 0, expected: version)
                }
                return false
            }
            for statement in statements {
                try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
            }
            logger.info("created the fleet schema", metadata: ["version": "\(version)"])
            return true
        }
    }
}
