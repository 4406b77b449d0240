/// The options of fleet mode, each with the environment variable that
/// gives its default: ``FleetSettings`` reads them, `--help` lists them
/// (``ServerHelp``).
enum FleetOption: String, CommandLineOption {
    case fleet = "--fleet"
    case fleetPasswordFile = "--fleet-password-file"
    case fleetSecretFile = "--fleet-secret-file"
    case nodeID = "--node-id"
    case advertise = "--advertise"
    case fleetCAFile = "--fleet-ca-file"
    case replicaStore = "--replica-store"
    case acknowledge = "--acknowledge"
    case leaseSeconds = "--lease-seconds"
    case restore = "--restore"
    case encryptedBackupSeconds = "--encrypted-backup-seconds"
    case litestream = "--litestream"

    var valueName: String? {
        switch self {
        case .fleet: "postgres://USER@HOST:PORT/DATABASE"
        case .fleetPasswordFile, .fleetSecretFile: "FILE"
        case .nodeID: "ID"
        case .advertise: "URL"
        case .fleetCAFile: "FILE"
        case .replicaStore: "DIRECTORY|s3://BUCKET/PREFIX"
        case .acknowledge: "async|durable"
        case .leaseSeconds, .encryptedBackupSeconds: "SECONDS"
        case .restore: "eager|on-first-request"
        case .litestream: "PATH"
        }
    }

    /// Every fleet option has one.
    var variable: String? { environmentVariable }

    var environmentVariable: String {
        switch self {
        case .fleet: "MTS_FLEET"
        case .fleetPasswordFile: "MTS_FLEET_PASSWORD_FILE"
        case .fleetSecretFile: "MTS_FLEET_SECRET_FILE"
        case .nodeID: "MTS_NODE_ID"
        case .advertise: "MTS_ADVERTISE"
        case .fleetCAFile: "MTS_FLEET_CA_FILE"
        case .replicaStore: "MTS_REPLICA_STORE"
        case .acknowledge: "MTS_ACKNOWLEDGE"
        case .leaseSeconds: "MTS_LEASE_SECONDS"
        case .restore: "MTS_RESTORE"
        case .encryptedBackupSeconds: "MTS_ENCRYPTED_BACKUP_SECONDS"
        case .litestream: "MTS_LITESTREAM"
        }
    }

    var summary: String {
        switch self {
        case .fleet: "join the fleet whose catalog, placement and leases live in this PostgreSQL database (no password here: every local user sees the command line; MTS_FLEET may carry one). TLS: ?sslmode=verify-full&sslrootcert=CA.pem (libpq's sslmode; without it, plain text on loopback only, verify-full elsewhere)"
        case .fleetPasswordFile: "a file (mode 0600) holding the PostgreSQL password (default: the password of MTS_FLEET, else PGPASSWORD)"
        case .fleetSecretFile: "a file (mode 0600) holding the fleet secret, 32 bytes or more, the same on every node and unknown to PostgreSQL: nodes sign their rows and the requests they forward with it (default: MTS_FLEET_SECRET; one of them is required)"
        case .nodeID: "this node's id, unique in the fleet, [a-z0-9-]{1,63} (required)"
        case .advertise: "where the other nodes reach this one, http(s)://host:port (default: --host and --port); http only on loopback"
        case .fleetCAFile: "the PEM file of the CA that signed the nodes' certificates, the only one trusted when forwarding to an https node (default: the system's trust store)"
        case .replicaStore: "where every node finds the replicas and encrypted snapshots: an absolute path they all share, or an S3-compatible bucket, s3://BUCKET/PREFIX, reached with AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION and AWS_ENDPOINT_URL (path-style) (required)"
        case .acknowledge: "durable: answer a write once the replica has it (default async)"
        case .leaseSeconds: "this node's lease on its tenants, 0.5 to 3600 (default 2)"
        case .restore: "when a claimed tenant is restored (default eager)"
        case .encryptedBackupSeconds: "how often an encrypted tenant is backed up: its loss window (default 5)"
        case .litestream: "the Litestream 0.5 executable (default: litestream on PATH)"
        }
    }
}
