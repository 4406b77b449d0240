import Foundation
import GRDBReplicaStore
import GRDBCipher
import GRDBRegistry
import Synchronization

extension RegistryConfiguration {
    /// Loads and checks the configuration file at `url`, with overrides
    /// from `environment` (`GRDBREGISTRY_*` variables).
    ///
    /// ```swift
    /// let configuration = try RegistryConfiguration.load(contentsOf: URL(fileURLWithPath: "registry.json"))
    /// ```
    ///
    /// - throws: ``RegistryConfigurationError``, listing every problem.
    public static func load(
        contentsOf url: URL,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> RegistryConfiguration {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw RegistryConfigurationError(file: url.path, problems: ["can't read the file: \((error as NSError).localizedDescription)"])
        }
        return try parse(data, baseDirectory: url.deletingLastPathComponent(), file: url.path, environment: environment)
    }

    /// Parses and checks a configuration; relative paths resolve against
    /// `baseDirectory`.
    ///
    /// ```swift
    /// let configuration = try RegistryConfiguration.parse(
    ///     Data(#"{"databases": {"catalog": {"path": "catalog.sqlite"}}}"#.utf8),
    ///     baseDirectory: URL(fileURLWithPath: "/srv/app"))
    /// ```
    ///
    /// - throws: ``RegistryConfigurationError``, listing every problem.
    public static func parse(
        _ data: Data,
        baseDirectory: URL,
        file: String = "<configuration>",
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> RegistryConfiguration {
        let log = ProblemLog()
        let decoder = JSONDecoder()
        decoder.userInfo[.problemLog] = log
        var model: FileModel?
        do {
            model = try decoder.decode(FileModel.self, from: data)
        } catch DecodingError.dataCorrupted(let context) {
            let reason = (context.underlyingError as NSError?)?.localizedDescription ?? context.debugDescription
            log.add("", "not valid JSON: \(reason)")
        } catch {
            log.add("", "must be a JSON object (see the Configuration article for its keys)")
        }
        return try build(model, log: log, baseDirectory: baseDirectory, file: file, environment: environment)
    }

    /// The configuration of a model read from any source (a file, a
    /// `ConfigReader`), checked; throws every problem of `log` and of the checks.
    static func build(
        _ model: FileModel?, log: ProblemLog, baseDirectory: URL, file: String, environment: [String: String]
    ) throws -> RegistryConfiguration {
        var builder = Builder(baseDirectory: baseDirectory, environment: environment, log: log)
        let configuration = model.flatMap { builder.build($0) }
        let problems = log.problems.withLock { $0 }
        guard problems.isEmpty, let configuration else {
            throw RegistryConfigurationError(file: file, problems: problems)
        }
        return configuration
    }
}

/// A configuration that can't run, with every problem found.
///
/// ```swift
/// do { _ = try RegistryConfiguration.load(contentsOf: url) }
/// catch let error as RegistryConfigurationError { print(error) }
/// ```
public struct RegistryConfigurationError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The configuration file (or, for a configuration read from a
    /// `ConfigReader`, the reader and its providers).
    public var file: String
    /// One line a problem, each naming where it is (`databases.players.path: missing`).
    public var problems: [String]

    public init(file: String, problems: [String]) {
        self.file = file
        self.problems = problems
    }

    public var description: String {
        "Invalid configuration \(file):\n" + problems.map { "  - \($0)" }.joined(separator: "\n")
    }
}

// MARK: - Checks, paths and environment overrides

private struct Builder {
    let baseDirectory: URL
    let environment: [String: String]
    let log: ProblemLog

    mutating func build(_ model: FileModel) -> RegistryConfiguration? {
        let defaultBusyTimeout = busyTimeout(
            override: "GRDBREGISTRY_BUSY_TIMEOUT", model.busyTimeoutSeconds, at: "busyTimeoutSeconds",
            default: RegistryConfiguration.defaultBusyTimeout)

        var databases: [RegistryConfiguration.Database] = []
        var overrideNames: [String: String] = [:]
        for (name, database) in model.databases {
            let at = "databases.\(name)"
            if !Self.isValidDatabaseName(name) {
                log.add(at, "invalid database name: use letters, digits, '_' and '-' (it names an environment override)")
            }
            let overrideName = "GRDBREGISTRY_\(Self.environmentName(name))_PATH"
            if let other = overrideNames.updateValue(name, forKey: overrideName) {
                log.add(at, "databases \(other) and \(name) share the environment override \(overrideName): rename one")
            }
            var path = database.path.map(resolve)
            if let override = environment[overrideName], !override.isEmpty { path = resolve(override) }
            var connection = ManagedDatabase.Connection.pool
            if let value = database.connection {
                if let kind = ManagedDatabase.Connection(rawValue: value) {
                    connection = kind
                } else {
                    log.add("\(at).connection", "must be pool or queue, not \(String(reflecting: value))")
                }
            }
            let timeout = busyTimeout(override: nil, database.busyTimeoutSeconds, at: "\(at).busyTimeoutSeconds", default: defaultBusyTimeout)
            if database.cipher != nil && database.key == nil {
                log.add("\(at).cipher", "only means something with a \"key\" (a database without one is plain)")
            }
            guard let path else { continue }
            databases.append(RegistryConfiguration.Database(
                name: name, path: path, migrations: database.migrations.map(resolve),
                key: resolve(database.key?.source), cipher: database.cipher?.cipher ?? RegistryConfiguration.Cipher(),
                connection: connection, busyTimeout: timeout))
        }

        var tenants: RegistryConfiguration.Tenants?
        if let model = model.tenants {
            var root = model.root.map(resolve)
            if let override = environment["GRDBREGISTRY_TENANTS_ROOT"], !override.isEmpty { root = resolve(override) }
            if let maxOpen = model.maxOpen, maxOpen < 1 { log.add("tenants.maxOpen", "must be a positive integer") }
            let timeout = busyTimeout(override: nil, model.busyTimeoutSeconds, at: "tenants.busyTimeoutSeconds", default: defaultBusyTimeout)
            if model.allowPlaintextTenants == true && model.masterKey == nil {
                log.add("tenants.allowPlaintextTenants", "only means something with a tenants.masterKey (without one, every tenant is plain)")
            }
            if let root {
                tenants = RegistryConfiguration.Tenants(
                    root: root, migrations: model.migrations.map(resolve), maxOpen: max(1, model.maxOpen ?? RegistryConfiguration.Tenants.defaultMaxOpen),
                    masterKey: resolve(model.masterKey?.source),
                    allowPlaintextTenants: model.allowPlaintextTenants ?? false, busyTimeout: timeout)
            }
        }

        // Tools list every *.sqlite file of the tenants root as a tenant: a
        // named database there would be migrated with the tenants' set.
        if let tenants {
            for database in databases where URL(fileURLWithPath: database.path).deletingLastPathComponent().path == tenants.root {
                log.add("databases.\(database.name).path", "is in the tenants root \(tenants.root): move it out, tools would take it for a tenant")
            }
        }
        var paths: [String: String] = [:]
        for database in databases {
            if let other = paths.updateValue(database.name, forKey: database.path) {
                log.add("databases.\(database.name).path", "is also the path of database \(other)")
            }
        }

        var migrationMode = MigrationMode.apply
        if let override = environment["GRDBREGISTRY_MIGRATION_MODE"] {
            if let mode = MigrationMode(rawValue: override) {
                migrationMode = mode
            } else {
                log.add("GRDBREGISTRY_MIGRATION_MODE", "must be apply, verify or skip, not \(String(reflecting: override))")
            }
        } else if let value = model.migrationMode {
            if let mode = MigrationMode(rawValue: value) {
                migrationMode = mode
            } else {
                log.add("migrationMode", "must be apply, verify or skip, not \(String(reflecting: value))")
            }
        }

        var shutdownTimeout = RegistryConfiguration.defaultShutdownTimeout
        if let override = environment["GRDBREGISTRY_SHUTDOWN_TIMEOUT"] {
            if let seconds = Double(override), let duration = Self.duration(seconds: seconds, allowingZero: false) {
                shutdownTimeout = duration
            } else {
                log.add("GRDBREGISTRY_SHUTDOWN_TIMEOUT", "must be a positive number of seconds (at most \(Self.maximumSeconds)), not \(String(reflecting: override))")
            }
        } else if let seconds = model.shutdownTimeoutSeconds {
            if let duration = Self.duration(seconds: seconds, allowingZero: false) {
                shutdownTimeout = duration
            } else {
                log.add("shutdownTimeoutSeconds", "must be a positive number of seconds (at most \(Self.maximumSeconds))")
            }
        }

        if model.databases.isEmpty && model.tenants == nil {
            log.add("", "no database: add a \"databases\" object or a \"tenants\" directory")
        }
        var configuration = RegistryConfiguration(databases: databases, tenants: tenants, migrationMode: migrationMode, shutdownTimeout: shutdownTimeout)
        configuration.replication = model.replication.flatMap { replication($0, configuration) }
        return configuration
    }

    private func busyTimeout(override: String?, _ seconds: Double?, at: String, default: Duration) -> Duration {
        if let override, let text = environment[override] {
            guard let value = Double(text), let duration = Self.duration(seconds: value, allowingZero: true) else {
                log.add(override, "must be a number of seconds (0 to \(Self.maximumSeconds)), not \(String(reflecting: text))")
                return `default`
            }
            return duration
        }
        guard let seconds else { return `default` }
        guard let duration = Self.duration(seconds: seconds, allowingZero: true) else {
            log.add(at, "must be a number of seconds (0 to \(Self.maximumSeconds))")
            return `default`
        }
        return duration
    }

    /// The longest duration a setting takes: a century, far beyond any
    /// useful timeout, and far within `Duration`'s milliseconds in `Int64`
    /// (a larger number, or infinity, would trap when converted).
    static let maximumSeconds = 100 * 365 * 24 * 3600

    /// `seconds` as a duration, or nil when it is not a finite number from
    /// 0 (or above 0) to ``maximumSeconds``.
    static func duration(seconds: Double, allowingZero: Bool) -> Duration? {
        guard seconds.isFinite, seconds <= Double(maximumSeconds), allowingZero ? seconds >= 0 : seconds > 0 else { return nil }
        return .milliseconds(Int64(seconds * 1000))
    }

    /// The duration of the `seconds` read at `key`, or `fallback` without
    /// one; a value out of range is a problem logged at `key` (`rule`,
    /// and the bound), and `fallback` stands in.
    private func duration(_ seconds: Double?, at key: String, allowingZero: Bool, rule: String, fallback: Duration) -> Duration {
        guard let seconds else { return fallback }
        guard let duration = Self.duration(seconds: seconds, allowingZero: allowingZero) else {
            log.add(key, "\(rule) (at most \(Self.maximumSeconds))")
            return fallback
        }
        return duration
    }

    private func resolve(_ path: String) -> String {
        if path.hasPrefix("/") { return URL(fileURLWithPath: path).standardizedFileURL.path }
        return baseDirectory.appendingPathComponent(path).standardizedFileURL.path
    }

    private func resolve(_ source: KeySource?) -> KeySource? {
        if case .file(let path) = source { return .file(resolve(path)) }
        return source
    }

    static func isValidDatabaseName(_ name: String) -> Bool {
        !name.isEmpty && name.unicodeScalars.allSatisfy { scalar in
            scalar.isASCII && (CharacterSet.alphanumerics.contains(scalar) || scalar == "_" || scalar == "-")
        }
    }

    /// `players-eu` → `PLAYERS_EU`: a name a shell can export.
    static func environmentName(_ name: String) -> String {
        String(name.uppercased().map { $0 == "-" ? "_" : $0 })
    }
}

// MARK: - Replication

extension Builder {
    /// The replication section, checked against the rest: a replica
    /// Litestream can write, and somewhere for the encrypted databases
    /// Litestream can't read.
    fileprivate func replication(_ model: ReplicationModel, _ configuration: RegistryConfiguration) -> RegistryConfiguration.Replication? {
        guard var replica = model.replica else { return nil }
        if let override = environment["GRDBREGISTRY_REPLICA"], !override.isEmpty { replica = override }
        if let scheme = replica.range(of: "://").map({ String(replica[..<$0.lowerBound]) }) {
            if !RegistryConfiguration.Replication.schemes.contains(scheme) {
                log.add("replication.replica", "unknown scheme \(scheme): use one of \(RegistryConfiguration.Replication.schemes.joined(separator: ", "))")
            }
            if scheme == "file", !replica.hasPrefix("file:///") {
                log.add("replication.replica", "a file replica needs an absolute path (file:///dir), or write a plain directory path")
            }
        } else {
            // A plain path: a local directory, relative to the file.
            replica = "file://" + resolve(replica)
        }
        let litestream = model.litestream.map { $0.contains("/") ? resolve($0) : $0 } ?? "litestream"
        let startsReplicator = model.startReplicator ?? true
        var socket = model.socket.map(resolve)
        if socket == nil {
            if startsReplicator {
                socket = RegistryConfiguration.Replication.defaultSocket(in: baseDirectory)
            } else {
                log.add("replication.socket", "missing (the control socket of the running replicator, with \"startReplicator\": false)")
            }
        }
        if let path = socket, path.utf8.count > RegistryConfiguration.Replication.maximumSocketPathLength {
            log.add("replication.socket", "\(path) is longer than \(RegistryConfiguration.Replication.maximumSocketPathLength) bytes, too long for a Unix socket: give a shorter path")
        }
        let interval = duration(
            model.encryptedBackupIntervalSeconds, at: "replication.encryptedBackupIntervalSeconds", allowingZero: false,
            rule: "must be a positive number of seconds", fallback: RegistryConfiguration.Replication.defaultEncryptedBackupInterval)
        let retention = duration(
            model.removedTenantRetentionSeconds, at: "replication.removedTenantRetentionSeconds", allowingZero: true,
            rule: "must be zero (delete at removal) or a positive number of seconds",
            fallback: RegistryConfiguration.Replication.defaultRemovedTenantRetention)
        let stallTimeout = duration(
            model.uploadStallTimeoutSeconds, at: "replication.uploadStallTimeoutSeconds", allowingZero: false,
            rule: "must be a positive number of seconds", fallback: RegistryConfiguration.Replication.defaultUploadStallTimeout)
        let parkAfter = duration(
            model.parkIdleTenantsAfterSeconds, at: "replication.parkIdleTenantsAfterSeconds", allowingZero: true,
            rule: "must be zero (never park) or a positive number of seconds",
            fallback: RegistryConfiguration.Replication.defaultParkIdleTenantsAfter)
        var acknowledgements = RegistryConfiguration.Replication.Acknowledgements.asynchronous
        if let text = model.acknowledgements {
            if let value = RegistryConfiguration.Replication.Acknowledgements(rawValue: text) {
                acknowledgements = value
            } else {
                log.add("replication.acknowledgements", "unknown value \(String(reflecting: text)): use \"async\" (answer once committed here) or \"durable\" (answer once in the replica)")
            }
        }
        let backups = model.encryptedBackupDirectory.map(resolve)
        // Fail closed: an encrypted database is never handed to Litestream
        // (its SQLite can't read SQLCipher pages, and must never write into
        // them), so without a backup directory it would have no copy at all.
        if backups == nil {
            if configuration.tenants?.masterKey != nil {
                log.add("replication.encryptedBackupDirectory", "missing: tenants are encrypted (tenants.masterKey), Litestream can't replicate them, and they need scheduled encrypted backups")
            }
            for database in configuration.databases where database.key != nil {
                log.add("replication.encryptedBackupDirectory", "missing: database \(database.name) is encrypted, Litestream can't replicate it, and it needs scheduled encrypted backups")
            }
        }
        // An S3-compatible store: its region and endpoint from the
        // configuration, else the standard variables; Litestream's URLs
        // must carry them.
        var s3Region: String?
        var s3Endpoint: URL?
        var s3CredentialsFile: String?
        var s3Profile: String?
        if ReplicaStore.isS3(replica) {
            let settings = model.s3
            s3Region = settings?.region.flatMap { $0.isEmpty ? nil : $0 }
                ?? [environment["AWS_REGION"], environment["AWS_DEFAULT_REGION"]].compactMap { $0 }.first { !$0.isEmpty }
            if settings?.region?.isEmpty == true {
                log.add("replication.s3.region", "is empty: give the bucket's region, e.g. us-east-1")
            } else if s3Region == nil {
                log.add("replication.replica", "\(replica) is an S3-compatible store: set replication.s3.region or AWS_REGION (or AWS_DEFAULT_REGION), e.g. us-east-1")
            }
            let endpoint = settings?.endpoint.map { ($0, "replication.s3.endpoint") }
                ?? environment["AWS_ENDPOINT_URL"].flatMap { $0.isEmpty ? nil : ($0, "AWS_ENDPOINT_URL") }
            if let (text, source) = endpoint {
                do {
                    s3Endpoint = try S3Settings.parseEndpoint(text, source: source)
                } catch {
                    log.add(source == "AWS_ENDPOINT_URL" ? "replication.replica" : source, "\(error)")
                }
            }
            s3Profile = settings?.profile
            if let file = settings?.credentialsFile {
                let path = resolve(file)
                s3CredentialsFile = path
                // Checked now, as key files are: a file others can read
                // is refused before anything uses it.
                do {
                    _ = try S3Credentials.fromSharedFile(atPath: path, profile: s3Profile ?? "default")
                } catch {
                    log.add("replication.s3.credentialsFile", "\(error)")
                }
            }
            do {
                _ = try S3Location(parsing: replica)
            } catch {
                log.add("replication.replica", "\(error)")
            }
        } else if model.s3 != nil {
            log.add("replication.s3", "is for an s3:// replica, and \(replica) is not one: remove it or change the replica")
        }
        return RegistryConfiguration.Replication(
            replica: replica, litestream: litestream, socket: socket, startsReplicator: startsReplicator,
            encryptedBackupDirectory: backups, encryptedBackupInterval: interval, removedTenantRetention: retention,
            acknowledgements: acknowledgements, uploadStallTimeout: stallTimeout, parkIdleTenantsAfter: parkAfter, durableTail: model.durableTail ?? true, s3Region: s3Region, s3Endpoint: s3Endpoint,
            s3CredentialsFile: s3CredentialsFile, s3Profile: s3Profile)
    }
}
