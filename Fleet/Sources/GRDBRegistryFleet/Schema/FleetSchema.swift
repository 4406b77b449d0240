import Logging
import PostgresNIO

/// The fleet's tables in PostgreSQL, version 3: nodes and their leases,
/// and each tenant's owner, epoch and encryption: what placement needs.
/// Version 2 adds each node's signature (``FleetSecret``); version 3 stops
/// keeping the application's part of a tenant (its name and token hash),
/// which the application keeps in tables of its own (``Fleet/withPostgres(_:_:)``).
///
/// Created in one transaction under an advisory lock when absent, so that
/// nodes starting together create it once; an earlier version is upgraded
/// the same way (``upgrades``). A schema of a later version is refused
/// before anything is written.
enum FleetSchema {
    static let version = 4

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
    ] + upgrades.sorted { $0.key < $1.key }.flatMap(\.value)

    /// The statements that bring version N to N + 1, by N.
    ///
    /// 1 → 2: the signature of each node's row (``FleetSecret``). The rows
    /// of version 1 have none, so every node refuses them until their node
    /// joins again with this build: upgrade every node together.
    ///
    /// 2 → 3: the fleet no longer writes a tenant's name or token hash.
    /// Nothing is lost: the columns stay, nullable and no longer indexed,
    /// with the values of the tenants created before, for the application
    /// to copy once into its own table (the sample server's catalog does,
    /// when it creates its table). A build of version 2 refuses this
    /// schema: upgrade every node together.
    static let upgrades: [Int: [String]] = [
        1: [
            "ALTER TABLE fleet_nodes ADD COLUMN signature text",
            "UPDATE fleet_schema SET version = 2",
        ],
        2: [
            "ALTER TABLE fleet_tenants ALTER COLUMN name DROP NOT NULL",
            "DROP INDEX fleet_tenants_token_hash",
            "COMMENT ON COLUMN fleet_tenants.name IS 'Unused since version 3: the name of a tenant created before, for its application to copy once'",
            "COMMENT ON COLUMN fleet_tenants.token_hash IS 'Unused since version 3: the token hash of a tenant created before, for its application to copy once'",
            "UPDATE fleet_schema SET version = 3",
        ],
        // The durable tail (FleetChangeLog): one row per durable write
        // transaction past its tenant's replica.
        3: [
            """
            CREATE TABLE fleet_tail (
                tenant_id      text NOT NULL REFERENCES fleet_tenants(tenant_id) ON DELETE CASCADE,
                sequence       bigint NOT NULL CHECK (sequence > 0),
                epoch          bigint NOT NULL CHECK (epoch >= 0),
                schema_version integer NOT NULL,
                change         bytea NOT NULL,
                PRIMARY KEY (tenant_id, sequence))
            """,
            "UPDATE fleet_schema SET version = 4",
        ],
    ]

    /// Creates the schema when the database has none; checks (and upgrades) the
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
                guard versions.count == 1, var found = versions.first, found <= version, upgrades[found] != nil || found == version else {
                    // Zero rows or several: not a schema this build wrote (reported as version 0).
                    throw FleetError.schemaVersion(found: versions.count == 1 ? versions[0] : 0, expected: version)
                }
                while found < version, let statements = upgrades[found] {
                    for statement in statements {
                        try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                    }
                    logger.notice("upgraded the fleet schema", metadata: ["from": "\(found)", "to": "\(found + 1)"])
                    found += 1
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
