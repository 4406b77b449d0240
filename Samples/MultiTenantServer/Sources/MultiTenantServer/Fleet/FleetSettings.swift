import Foundation
import GRDBRegistryFleet
import GRDBReplicaStore
import NIOSSL

/// The settings of fleet mode, from the command line and the environment
/// (arguments override): the server joins a fleet whose catalog,
/// placement and leases live in PostgreSQL. The options are
/// ``FleetOption``'s cases:
///
/// | Argument | Variable | Default | What |
/// |---|---|---|---|
/// | `--fleet URL` | `MTS_FLEET` | (single-server mode) | `postgres://user@host:port/database`; a password only in `MTS_FLEET` |
/// | `--fleet-password-file FILE` | `MTS_FLEET_PASSWORD_FILE` | `MTS_FLEET`'s, else `PGPASSWORD` | the PostgreSQL password, in a file of mode 0600 |
/// | `--fleet-secret-file FILE` | `MTS_FLEET_SECRET_FILE` | `MTS_FLEET_SECRET` | required: the fleet secret (32 bytes or more) every node holds and PostgreSQL does not |
/// | `--node-id ID` | `MTS_NODE_ID` | required | this node's id, `[a-z0-9-]{1,63}` |
/// | `--advertise URL` | `MTS_ADVERTISE` | `http(s)://<host>:<port>` | where the other nodes forward this node's tenants' requests; `http` only on loopback |
/// | `--fleet-ca-file FILE` | `MTS_FLEET_CA_FILE` | the system's trust store | the CA of the nodes' certificates, trusted alone when forwarding |
/// | `--replica-store DIR` | `MTS_REPLICA_STORE` | required | a folder every node shares: Litestream `file` replicas and encrypted backups |
/// | `--acknowledge async\|durable` | `MTS_ACKNOWLEDGE` | `async` | `durable`: a write is answered once its transaction is in the replica |
/// | `--lease-seconds S` | `MTS_LEASE_SECONDS` | 2 | the lease of a node on its tenants |
/// | `--restore eager\|on-first-request` | `MTS_RESTORE` | `eager` | when a claimed tenant is restored |
/// | `--encrypted-backup-seconds S` | `MTS_ENCRYPTED_BACKUP_SECONDS` | 5 | how often an encrypted tenant's encrypted backup runs: its loss window |
/// | `--litestream PATH` | `MTS_LITESTREAM` | `litestream` (on `PATH`) | the Litestream 0.5 executable each node runs |
///
/// A password in `--fleet` is refused: the command line is readable by
/// every local user (`ps`, `/proc/PID/cmdline`), the environment only by
/// the server's. The password then comes from `MTS_FLEET`'s URL, the
/// password file (checked like the server's other secret files:
/// ``SecretFiles``) or `PGPASSWORD`, and none of these reaches a child
/// process (``ServerVariable/childEnvironment(_:)``).
///
/// Forwarded requests carry the client's bearer token (a tenant's, or the
/// operator's), so they leave the machine over TLS only: an `http://`
/// advertised address must be a loopback one (the check of `--host`,
/// `FleetConfiguration.isLoopback`). A node that serves TLS
/// (`--tls-cert`, `--tls-key`) advertises `https://`; the others verify
/// its certificate, chain and name (or IP address), against the CA of
/// `--fleet-ca-file` alone when given, else against the system's trust
/// store (a public CA's certificate for the node's name). Verification is
/// never off. The PostgreSQL URL takes libpq's `sslmode` and
/// `sslrootcert` (`FleetConfiguration/postgres`).
///
/// The fleet secret makes a node a node: each signs its row in PostgreSQL
/// and the requests it forwards with it (`FleetSecret`), so that whoever
/// writes PostgreSQL can't pose as one. It comes from a file (checked like
/// the password file) or `MTS_FLEET_SECRET`, never the command line, and
/// reaches no child process.
///
/// Fleet mode also needs `MTS_OPERATOR_TOKEN` and `MTS_MASTER_KEY`, the
/// same on every node: a key file per node would make an encrypted
/// tenant unreadable anywhere else, and an operator token per node would
/// fail on whichever node a load balancer picks.
///
/// ```swift
/// var fleet = FleetSettings(environment: ["MTS_FLEET": "postgres://fleet@127.0.0.1:5432/fleet", "MTS_NODE_ID": "n1"])
/// _ = try fleet.parse("--replica-store", &iterator)
/// let settings = try fleet.validated(environment: environment, defaultAdvertise: "http://127.0.0.1:8080")
/// ```
struct FleetSettings: Sendable, Equatable {
    enum Acknowledgements: String, Sendable, Equatable {
        case asynchronous = "async"
        case durable
    }

    enum Restore: String, Sendable, Equatable {
        case eager
        case onFirstRequest = "on-first-request"
    }

    var postgres: String?
    var passwordFile: String?
    var secretFile: String?
    var nodeID: String?
    var advertise: String?
    var caFile: String?
    var replicaStore: String?
    var acknowledgements = Acknowledgements.asynchronous
    var leaseSeconds = 2.0
    var restore = Restore.eager
    var encryptedBackupSeconds = 5
    var litestream = "litestream"

    /// The fleet options given on the command line or in the environment,
    /// for the refusal of one given without `--fleet`.
    private var given: [String] = []

    init(environment: [String: String]) throws {
        func value(_ variable: String) -> String? {
            guard let value = environment[variable], !value.isEmpty else { return nil }
            return value
        }
        for option in FleetOption.allCases {
            guard let text = value(option.environmentVariable) else { continue }
            try set(option, to: text, from: option.environmentVariable)
        }
    }

    /// Takes `argument` (and its value from `iterator`) if it is a fleet
    /// option; false for any other argument.
    mutating func parse(_ argument: String, _ iterator: inout IndexingIterator<[String]>) throws -> Bool {
        guard let option = FleetOption(rawValue: argument) else { return false }
        guard let value = iterator.next() else { throw UsageError(message: "\(argument) needs a value") }
        try set(option, to: value, from: argument)
        return true
    }

    /// `option`'s value, from `source` (the option or its variable, for
    /// messages and for the refusal of a fleet option without `--fleet`).
    private mutating func set(_ option: FleetOption, to value: String, from source: String) throws {
        switch option {
        case .fleet:
            // The command line is every local user's to read: a password
            // there is refused, before it goes anywhere else.
            if source == option.rawValue, URLComponents(string: value)?.password != nil {
                throw UsageError(message: "--fleet must not carry a password: every local user can read a process's command line. Give the URL without it, and the password in \(FleetOption.fleetPasswordFile.rawValue) FILE (mode 0600), PGPASSWORD, or MTS_FLEET's URL")
            }
            postgres = value
        case .fleetPasswordFile: passwordFile = value; given.append(source)
        case .fleetSecretFile: secretFile = value; given.append(source)
        case .nodeID: nodeID = value; given.append(source)
        case .advertise: advertise = value; given.append(source)
        case .fleetCAFile: caFile = value; given.append(source)
        case .replicaStore: replicaStore = value; given.append(source)
        case .acknowledge: try setAcknowledgements(value, from: source)
        case .leaseSeconds: try setLease(value, from: source)
        case .restore: try setRestore(value, from: source)
        case .encryptedBackupSeconds: try setEncryptedBackup(value, from: source)
        case .litestream: litestream = value; given.append(source)
        }
    }

    private mutating func setAcknowledgements(_ text: String, from source: String) throws {
        guard let mode = Acknowledgements(rawValue: text) else {
            throw UsageError(message: "\(source) takes async or durable, not \(text)")
        }
        acknowledgements = mode
        given.append(source)
    }

    private mutating func setLease(_ text: String, from source: String) throws {
        // Below 0.5 s a renew every lease/4 would be faster than the
        // round trips of a loaded PostgreSQL; the fleet checks the
        // measured round trip against the lease at start as well.
        guard let seconds = Double(text), seconds.isFinite, (0.5...3600).contains(seconds) else {
            throw UsageError(message: "\(source) takes a number of seconds from 0.5 to 3600, not \(text)")
        }
        leaseSeconds = seconds
        given.append(source)
    }

    private mutating func setRestore(_ text: String, from source: String) throws {
        guard let restore = Restore(rawValue: text) else {
            throw UsageError(message: "\(source) takes eager or on-first-request, not \(text)")
        }
        self.restore = restore
        given.append(source)
    }

    private mutating func setEncryptedBackup(_ text: String, from source: String) throws {
        guard let seconds = Int(text), seconds >= 1 else {
            throw UsageError(message: "\(source) takes a whole number of seconds, 1 or more, not \(text)")
        }
        encryptedBackupSeconds = seconds
        given.append(source)
    }

    /// Fleet mode, checked: nil in single-server mode (no `--fleet`).
    ///
    /// - throws: ``UsageError`` naming what is missing or wrong: a fleet
    ///   option without `--fleet`, no node id or replica store, no shared
    ///   operator token or master key, an advertised address that is not
    ///   a bare `http(s)://host:port` or is `http://` off loopback, a CA
    ///   file that holds no PEM certificate.
    func validated(environment: [String: String], defaultAdvertise: String) throws -> FleetMode? {
        guard let postgres else {
            if let option = given.first {
                throw UsageError(message: "\(option) is a fleet option: give --fleet postgres://… (or MTS_FLEET) too, or leave it out for a single server")
            }
            return nil
        }
        guard postgres.hasPrefix("postgres://") || postgres.hasPrefix("postgresql://"), var url = URLComponents(string: postgres) else {
            throw UsageError(message: "--fleet takes a PostgreSQL URL, postgres://user@host:port/database, not \(Self.redacted(postgres))")
        }
        if let passwordFile {
            guard url.password == nil else {
                throw UsageError(message: "MTS_FLEET carries a password and \(FleetOption.fleetPasswordFile.rawValue) names another: give one of them")
            }
            let contents = try SecretFiles.read(at: URL(fileURLWithPath: passwordFile))
            let password = String(decoding: contents, as: UTF8.self).trimmingCharacters(in: .newlines)
            guard !password.isEmpty else {
                throw UsageError(message: "the password file \(passwordFile) is empty")
            }
            url.password = password
        } else if url.password == nil, let password = environment[ServerVariable.postgresPassword.rawValue], !password.isEmpty {
            url.password = password
        }
        guard let connection = url.string else {
            throw UsageError(message: "--fleet takes a PostgreSQL URL, postgres://user@host:port/database, not \(Self.redacted(postgres))")
        }
        guard let nodeID else {
            throw UsageError(message: "fleet mode needs --node-id (or MTS_NODE_ID): a name for this server, unique in the fleet, such as n1")
        }
        guard MoveRequest.isNodeID(nodeID) else {
            throw UsageError(message: "--node-id takes 1 to 63 of a-z, 0-9 and -, not \(nodeID)")
        }
        guard let replicaStore else {
            throw UsageError(message: "fleet mode needs --replica-store DIR or s3://BUCKET/PREFIX (or MTS_REPLICA_STORE): a folder or a bucket every node reaches, where tenants' replicas go so that another node can serve them")
        }
        let store = try Self.replicaStore(replicaStore, environment: environment)
        for variable in [SharedToken.variable, ServerVariable.masterKey.rawValue] where (environment[variable] ?? "").isEmpty {
            throw UsageError(message: "fleet mode needs \(variable) in the environment, the same on every node: \(variable == ServerVariable.masterKey.rawValue ? "a key file per node would make encrypted tenants unreadable on the others" : "a token file per node would fail on whichever node a load balancer picks")")
        }
        let secret = try Self.fleetSecret(file: secretFile, environment: environment)
        let advertise = advertise ?? defaultAdvertise
        guard let url = URL(string: advertise), ["http", "https"].contains(url.scheme ?? ""), url.host != nil, url.port != nil,
              url.path.isEmpty || url.path == "/", url.query == nil, url.user == nil else {
            throw UsageError(message: "--advertise takes the base URL the other nodes reach this one at, http(s)://host:port, not \(advertise)")
        }
        if url.scheme == "http", let host = url.host, !FleetConfiguration.isLoopback(host) {
            throw UsageError(message: "--advertise \(advertise) is plain HTTP to \(host), which is not a loopback address: the other nodes would forward tenants' and the operator's tokens in clear. Serve TLS (--tls-cert, --tls-key) and advertise https://, with --fleet-ca-file on every node for a private CA")
        }
        var fleetCA: [NIOSSLCertificate]?
        if let caFile {
            do {
                fleetCA = try NIOSSLCertificate.fromPEMFile(caFile)
            } catch {
                throw UsageError(message: "--fleet-ca-file \(caFile) cannot be read as PEM certificates: \(error)")
            }
            guard fleetCA?.isEmpty == false else { throw UsageError(message: "--fleet-ca-file \(caFile) holds no certificate") }
        }
        var base = advertise
        while base.hasSuffix("/") { base.removeLast() }
        return FleetMode(
            postgres: connection, nodeID: nodeID, advertise: base, secret: secret, replicaStore: store,
            acknowledgements: acknowledgements, lease: .milliseconds(Int64(leaseSeconds * 1000)), restore: restore,
            encryptedBackupInterval: .seconds(encryptedBackupSeconds), litestream: litestream, fleetCA: fleetCA)
    }
}

extension FleetSettings {
    /// The fleet secret, from `file` (a secret file: ``SecretFiles``; its
    /// final line break dropped) or `MTS_FLEET_SECRET`: one of them, 32
    /// bytes or more.
    static func fleetSecret(file: String?, environment: [String: String]) throws -> FleetSecret {
        let variable = ServerVariable.fleetSecret.rawValue
        let bytes: Data
        let source: String
        switch (file, environment[variable].flatMap { $0.isEmpty ? nil : $0 }) {
        case (.some, .some):
            throw UsageError(message: "\(FleetOption.fleetSecretFile.rawValue) and \(variable) both give the fleet secret: give one of them")
        case let (file?, nil):
            var contents = try SecretFiles.read(at: URL(fileURLWithPath: file))
            while let last = contents.last, last == UInt8(ascii: "\n") || last == UInt8(ascii: "\r") { contents.removeLast() }
            bytes = contents
            source = "the fleet secret file \(file)"
        case let (nil, value?):
            bytes = Data(value.utf8)
            source = variable
        case (nil, nil):
            throw UsageError(message: "fleet mode needs the fleet secret, the same on every node and unknown to PostgreSQL (nodes sign their rows and the requests they forward with it): \(FleetOption.fleetSecretFile.rawValue) FILE (mode 0600, made with `openssl rand -hex 32 > FILE`) or \(variable)")
        }
        guard bytes.count >= FleetSecret.minimumLength, let secret = try? FleetSecret(bytes) else {
            throw UsageError(message: "\(source) holds \(bytes.count) bytes: the fleet secret needs \(FleetSecret.minimumLength) or more (openssl rand -hex 32)")
        }
        return secret
    }

    /// The replica store of `--replica-store`, as ``FleetMode/replicaStore``
    /// keeps it: an absolute folder path, standardized, or an S3-compatible
    /// bucket, `s3://bucket/prefix` without trailing slashes, whose
    /// credentials, region and endpoint must be in `environment` (the
    /// standard `AWS_*` variables; the library's `ReplicaStore` reads
    /// them, and says what is missing).
    static func replicaStore(_ value: String, environment: [String: String]) throws -> String {
        if ReplicaStore.isS3(value) {
            do {
                return try ReplicaStore.s3(replica: value, environment: environment).location.description
            } catch {
                throw UsageError(message: "--replica-store \(value): \(error)")
            }
        }
        guard value.hasPrefix("/") else {
            throw UsageError(message: "--replica-store takes an absolute path (every node must name the same folder) or s3://BUCKET/PREFIX, not \(value)")
        }
        return URL(fileURLWithPath: value).standardizedFileURL.path
    }

    /// `url` without its password, for a message about it.
    static func redacted(_ url: String) -> String {
        guard var components = URLComponents(string: url) else { return "(a URL that does not parse)" }
        if components.password != nil { components.password = "***" }
        return components.string ?? "(a URL that does not parse)"
    }
}

/// Fleet mode's checked settings (``FleetSettings/validated(environment:defaultAdvertise:)``).
struct FleetMode: Sendable, Equatable {
    /// The PostgreSQL URL, with the password from wherever it came.
    var postgres: String
    var nodeID: String
    /// `http(s)://host:port`, without a trailing slash.
    var advertise: String
    /// Signs this node's row and the requests it forwards; checks the others'.
    var secret: FleetSecret
    /// An absolute, standardized path, or `s3://bucket/prefix`
    /// (``FleetSettings/replicaStore(_:environment:)``).
    var replicaStore: String
    var acknowledgements: FleetSettings.Acknowledgements
    var lease: Duration
    var restore: FleetSettings.Restore
    var encryptedBackupInterval: Duration
    /// The `litestream` executable: a path, or a name found on `PATH`.
    var litestream: String
    /// The certificates of `--fleet-ca-file`, the forwarder's only trust
    /// roots; nil for the system's trust store.
    var fleetCA: [NIOSSLCertificate]? = nil

    /// The registry configuration's `replica`: the store's URL, a
    /// `file://` one for a folder.
    var replica: String {
        ReplicaStore.isS3(replicaStore) ? replicaStore : "file://" + replicaStore
    }
}
