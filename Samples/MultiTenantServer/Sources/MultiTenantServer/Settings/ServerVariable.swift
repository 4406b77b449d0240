/// The environment variables the server reads that no option overrides
/// (an option's variable is ``CommandLineOption/variable``). Their readers
/// name them through these cases; `--help` lists them (``ServerHelp``).
enum ServerVariable: String, CaseIterable, Sendable {
    case operatorToken = "MTS_OPERATOR_TOKEN"
    case masterKey = "MTS_MASTER_KEY"
    case idleTimeout = "MTS_IDLE_TIMEOUT"
    case heartbeat = "MTS_SSE_HEARTBEAT"
    case maxConnections = "MTS_MAX_CONNECTIONS"
    case maxStreams = "MTS_MAX_STREAMS"
    case maxStreamsPerTenant = "MTS_MAX_STREAMS_PER_TENANT"
    case maxPlayers = "MTS_MAX_PLAYERS"
    case freeSignInFailures = "MTS_FREE_SIGNIN_FAILURES"
    case maxOpenTenants = "MTS_MAX_OPEN_TENANTS"
    case otlpEndpoint = "OTEL_EXPORTER_OTLP_ENDPOINT"
    case otlpTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    case tracesExporter = "OTEL_TRACES_EXPORTER"
    case sdkDisabled = "OTEL_SDK_DISABLED"
    case postgresPassword = "PGPASSWORD"
    case fleetSecret = "MTS_FLEET_SECRET"
    case tailFaultPoint = "MTS_FAULT_KILL_BEFORE_TAIL_APPEND"

    /// The limit (``ServerLimits``) the variable sets, if it is one.
    var limit: WritableKeyPath<ServerLimits, Int>? {
        switch self {
        case .idleTimeout: \.idleTimeoutSeconds
        case .heartbeat: \.heartbeatSeconds
        case .maxConnections: \.maxConnections
        case .maxStreams: \.maxStreams
        case .maxStreamsPerTenant: \.maxStreamsPerTenant
        case .maxPlayers: \.maxPlayers
        case .freeSignInFailures: \.freeSignInFailures
        case .maxOpenTenants: \.maxOpenTenants
        default: nil
        }
    }

    var summary: String {
        switch self {
        case .operatorToken: "the operator token (32 characters or more), the same on every node of a fleet; default: the file operator.token of the data directory, made on first start"
        case .masterKey: "the master key of encrypted tenants (openssl rand -hex 32), named in registry.json at the first start; default: the file master.key made then. Required in fleet mode"
        case .idleTimeout: "seconds before an idle connection closes, a partial request included"
        case .heartbeat: "seconds between two comment lines on an idle event stream"
        case .maxConnections: "open connections (beyond: 429); lowered to fit the limit of open files"
        case .maxStreams: "event streams in total (beyond: 429)"
        case .maxStreamsPerTenant: "event streams of one tenant (beyond: 429)"
        case .maxPlayers: "players of one tenant (beyond: 409)"
        case .freeSignInFailures: "failed sign-ins of one address in a minute before each waits longer"
        case .maxOpenTenants: "tenants kept open at once, written into registry.json by the first start (its value is kept afterwards); lowered to fit the limit of open files"
        case .otlpEndpoint, .otlpTracesEndpoint: "export traces over OTLP/HTTP to this URL (swift-otel reads the other OTEL_* variables: OTEL_SERVICE_NAME, headers, sampler)"
        case .tracesExporter: "otlp turns traces on, none off"
        case .sdkDisabled: "true turns traces off"
        case .fleetSecret: "fleet mode: the fleet secret (32 bytes or more, the same on every node, unknown to PostgreSQL), when --fleet-secret-file gives none"
        case .postgresPassword: "fleet mode: the PostgreSQL password, when neither MTS_FLEET nor --fleet-password-file gives one"
        case .tailFaultPoint: "tests only: a file name (in the data directory) that, once the file exists, makes the next durable write recorded in the fleet's tail kill this process between its commit and its append (scripts/fleet-chaos appendkill)"
        }
    }
}

extension ServerVariable {
    /// The variables that hold a secret only the server knows of: the
    /// operator token, the fleet's PostgreSQL URL (which may carry its
    /// password), that password and the fleet secret. The master key is not here: the
    /// library reads it from the environment it is given (encrypted
    /// backups, restores), and strips it, with every key its
    /// configuration names, from what it hands a child.
    static let secrets: Set<String> = [
        operatorToken.rawValue, FleetOption.fleet.environmentVariable, postgresPassword.rawValue, fleetSecret.rawValue,
    ]

    /// `environment` without ``secrets``: what the library gets to start
    /// Litestream with (which needs none of them).
    static func childEnvironment(_ environment: [String: String]) -> [String: String] {
        environment.filter { !secrets.contains($0.key) }
    }
}
