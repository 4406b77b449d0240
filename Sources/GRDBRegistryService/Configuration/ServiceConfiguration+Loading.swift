import Foundation

extension ServiceConfiguration {
    /// Loads and checks the configuration file at `url`, with overrides from
    /// `environment`.
    ///
    /// ```swift
    /// let configuration = try ServiceConfiguration.load(contentsOf: URL(fileURLWithPath: "registry.json"))
    /// ```
    ///
    /// - throws: ``ServiceConfigurationError``, listing every problem.
    public static func load(
        contentsOf url: URL,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> ServiceConfiguration {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw ServiceConfigurationError(file: url.path, problems: ["can't read the file: \(error.localizedDescription)"])
        }
        return try parse(data, baseDirectory: url.deletingLastPathComponent(), file: url.path, environment: environment)
    }

    /// Parses and checks a configuration; relative paths are resolved
    /// against `baseDirectory`.
    ///
    /// - throws: ``ServiceConfigurationError``, listing every problem.
    public static func parse(
        _ data: Data,
        baseDirectory: URL,
        file: String = "<configuration>",
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> ServiceConfiguration {
        var parser = ConfigurationParser(baseDirectory: baseDirectory, environment: environment)
        let configuration = parser.parse(data)
        guard parser.problems.isEmpty, let configuration else {
            throw ServiceConfigurationError(file: file, problems: parser.problems)
        }
        return configuration
    }

    /// Checks what must exist on this machine: migration folders, database
    /// directories, key sources.
    ///
    /// - returns: The problems found, empty when the configuration can run.
    public func problems(environment: [String: String] = ProcessInfo.processInfo.environment) -> [String] {
        var problems: [String] = []
        let fileManager = FileManager.default
        func checkDirectory(_ path: String, _ what: String) {
            var isDirectory: ObjCBool = false
            if !fileManager.fileExists(atPath: path, isDirectory: &isDirectory) || !isDirectory.boolValue {
                problems.append("\(what): directory \(path) does not exist")
            }
        }
        func checkKeySource(_ source: KeySource, _ what: String) {
            switch source {
            case let .environment(name):
                if (environment[name] ?? "").isEmpty {
                    problems.append("\(what): environment variable \(name) is not set")
                }
            case let .file(path):
                if !fileManager.isReadableFile(atPath: path) {
                    problems.append("\(what): key file \(path) is missing or unreadable")
                }
            }
        }
        for database in databases {
            let what = "databases.\(database.name)"
            checkDirectory(URL(fileURLWithPath: database.path).deletingLastPathComponent().path, "\(what).path")
            if let migrations = database.migrations {
                checkDirectory(migrations, "\(what).migrations")
            }
            if let keySource = database.keySource {
                checkKeySource(keySource, "\(what).encryption")
            }
        }
        if let tenants {
            if let migrations = tenants.migrations {
                checkDirectory(migrations, "tenants.migrations")
            }
            if let source = tenants.masterKeySource {
                checkKeySource(source, "tenants.encryption")
            }
        }
        return problems
    }
}

/// Reads the JSON by hand, so that every problem is reported, not only the first.
struct ConfigurationParser {
    let baseDirectory: URL
    let environment: [String: String]
    var problems: [String] = []
    var migrationSets: [String: String] = [:]

    mutating func parse(_ data: Data) -> ServiceConfiguration? {
        let json: Any
        do {
            json = try JSONSerialization.jsonObject(with: data)
        } catch {
            problems.append("not valid JSON: \(error.localizedDescription)")
            return nil
        }
        guard let root = json as? [String: Any] else {
            problems.append("the top level must be a JSON object")
            return nil
        }
        checkKeys(root, allowed: ["databases", "tenants", "migrationMode", "shutdownTimeoutSeconds", "migrationSets"], at: "")

        // registryctl's format names migration sets once, and databases
        // refer to them by name.
        if let value = root["migrationSets"] {
            if let object = value as? [String: Any] {
                for name in object.keys.sorted() {
                    if let folder = string(object[name], at: "migrationSets.\(name)", required: true) {
                        migrationSets[name] = resolve(folder)
                    }
                }
            } else {
                problems.append("migrationSets: must be an object of migration folders by name")
            }
        }

        var databases: [ServiceConfiguration.Database] = []
        if let value = root["databases"] {
            if let object = value as? [String: Any] {
                for name in object.keys.sorted() {
                    if let database = parseDatabase(name: name, object[name]) {
                        databases.append(database)
                    }
                }
            } else if let array = value as? [Any] {
                for (index, element) in array.enumerated() {
                    guard let object = element as? [String: Any], let name = object["name"] as? String else {
                        problems.append("databases[\(index)]: must be an object with a `name` and a `path`")
                        continue
                    }
                    var entry = object
                    entry["name"] = nil
                    if let database = parseDatabase(name: name, entry) {
                        databases.append(database)
                    }
                }
            } else {
                problems.append("databases: must be an object of databases by name, or an array of databases with a `name`")
            }
            let names = databases.map(\.name)
            for name in Set(names) where names.filter({ $0 == name }).count > 1 {
                problems.append("databases.\(name): the name is used twice")
            }
        }

        var tenants: ServiceConfiguration.Tenants?
        if let value = root["tenants"] {
            tenants = parseTenants(value)
        }

        var migrationMode = MigrationMode.apply
        if let override = environment["GRDBREGISTRY_MIGRATION_MODE"] {
            migrationMode = parseMigrationMode(override, at: "GRDBREGISTRY_MIGRATION_MODE") ?? migrationMode
        } else if let value = root["migrationMode"] {
            if let string = value as? String {
                migrationMode = parseMigrationMode(string, at: "migrationMode") ?? migrationMode
            } else {
                problems.append("migrationMode: must be a string (apply, verify or skip)")
            }
        }

        var shutdownTimeout = Duration.seconds(10)
        if let override = environment["GRDBREGISTRY_SHUTDOWN_TIMEOUT"] {
            if let seconds = Double(override), seconds > 0 {
                shutdownTimeout = .milliseconds(Int64(seconds * 1000))
            } else {
                problems.append("GRDBREGISTRY_SHUTDOWN_TIMEOUT: must be a positive number of seconds, not \(String(reflecting: override))")
            }
        } else if let value = root["shutdownTimeoutSeconds"] {
            if let seconds = (value as? NSNumber)?.doubleValue, !(value is Bool), seconds > 0 {
                shutdownTimeout = .milliseconds(Int64(seconds * 1000))
            } else {
                problems.append("shutdownTimeoutSeconds: must be a positive number")
            }
        }

        if databases.isEmpty && tenants == nil && problems.isEmpty {
            problems.append("no database: add a `databases` object or a `tenants` directory")
        }
        return ServiceConfiguration(databases: databases, tenants: tenants, migrationMode: migrationMode, shutdownTimeout: shutdownTimeout)
    }

    private mutating func parseDatabase(name: String, _ value: Any?) -> ServiceConfiguration.Database? {
        let at = "databases.\(name)"
        if name.isEmpty || name.contains("/") || name.contains(where: { $0.isWhitespace || $0.isNewline }) {
            problems.append("\(at): invalid database name (it must be non-empty, without '/' or spaces)")
        }
        guard let object = value as? [String: Any] else {
            problems.append("\(at): must be an object with at least a `path`")
            return nil
        }
        checkKeys(object, allowed: ["path", "migrations", "migrationSet", "encryption", "key", "connection"], at: at)
        let overrideName = "GRDBREGISTRY_\(name.uppercased())_PATH"
        var path: String?
        if let override = environment[overrideName], !override.isEmpty {
            path = resolve(override)
        } else {
            path = string(object["path"], at: "\(at).path", required: true).map(resolve)
        }
        let migrations = parseMigrations(object, at: at)
        let keySource = parseAnyKeySource(object, at: at, prefix: "key")
        var connection = ServiceConfiguration.ConnectionKind.pool
        if let value = string(object["connection"], at: "\(at).connection", required: false) {
            if let kind = ServiceConfiguration.ConnectionKind(rawValue: value) {
                connection = kind
            } else {
                problems.append("\(at).connection: must be pool or queue, not \(String(reflecting: value))")
            }
        }
        guard let path else { return nil }
        return ServiceConfiguration.Database(name: name, path: path, migrations: migrations, keySource: keySource, connection: connection)
    }

    private mutating func parseTenants(_ value: Any) -> ServiceConfiguration.Tenants? {
        guard let object = value as? [String: Any] else {
            problems.append("tenants: must be an object with at least a `root`")
            return nil
        }
        checkKeys(object, allowed: ["root", "migrations", "migrationSet", "maxOpen", "encryption", "key"], at: "tenants")
        var root: String?
        if let override = environment["GRDBREGISTRY_TENANTS_ROOT"], !override.isEmpty {
            root = resolve(override)
        } else {
            root = string(object["root"], at: "tenants.root", required: true).map(resolve)
        }
        let migrations = parseMigrations(object, at: "tenants")
        var maxOpen = 256
        if let value = object["maxOpen"] {
            if let number = value as? Int, !(value is Bool), number > 0 {
                maxOpen = number
            } else {
                problems.append("tenants.maxOpen: must be a positive integer")
            }
        }
        let masterKeySource = parseAnyKeySource(object, at: "tenants", prefix: "masterKey")
        guard let root else { return nil }
        return ServiceConfiguration.Tenants(root: root, migrations: migrations, maxOpen: maxOpen, masterKeySource: masterKeySource)
    }

    /// A migration folder (`migrations`) or a set of `migrationSets` (`migrationSet`).
    private mutating func parseMigrations(_ object: [String: Any], at: String) -> String? {
        let folder = string(object["migrations"], at: "\(at).migrations", required: false).map(resolve)
        let setName = string(object["migrationSet"], at: "\(at).migrationSet", required: false)
        switch (folder, setName) {
        case let (folder?, nil):
            return folder
        case let (nil, name?):
            guard let folder = migrationSets[name] else {
                problems.append("\(at).migrationSet: no migration set named \(String(reflecting: name)) in `migrationSets`")
                return nil
            }
            return folder
        case (_?, _?):
            problems.append("\(at): give `migrations` (a folder) or `migrationSet` (a name), not both")
            return nil
        case (nil, nil):
            return nil
        }
    }

    /// `encryption: {keyEnv | keyFile}`, or registryctl's `key: {environment | file}`.
    private mutating func parseAnyKeySource(_ object: [String: Any], at: String, prefix: String) -> ServiceConfiguration.KeySource? {
        switch (object["encryption"], object["key"]) {
        case let (encryption?, nil):
            return parseKeySource(encryption, at: "\(at).encryption", prefix: prefix)
        case let (nil, key?):
            guard let key = key as? [String: Any] else {
                problems.append("\(at).key: must be an object with `environment` or `file`")
                return nil
            }
            checkKeys(key, allowed: ["environment", "file"], at: "\(at).key")
            let env = string(key["environment"], at: "\(at).key.environment", required: false)
            let file = string(key["file"], at: "\(at).key.file", required: false).map(resolve)
            switch (env, file) {
            case let (env?, nil): return .environment(env)
            case let (nil, file?): return .file(file)
            default:
                problems.append("\(at).key: give exactly one of `environment` or `file`")
                return nil
            }
        case (_?, _?):
            problems.append("\(at): give `encryption` or `key`, not both")
            return nil
        case (nil, nil):
            return nil
        }
    }

    private mutating func parseKeySource(_ value: Any, at: String, prefix: String) -> ServiceConfiguration.KeySource? {
        let envKey = "\(prefix)Env"
        let fileKey = "\(prefix)File"
        guard let object = value as? [String: Any] else {
            problems.append("\(at): must be an object with `\(envKey)` or `\(fileKey)`")
            return nil
        }
        checkKeys(object, allowed: [envKey, fileKey], at: at)
        let env = string(object[envKey], at: "\(at).\(envKey)", required: false)
        let file = string(object[fileKey], at: "\(at).\(fileKey)", required: false).map(resolve)
        switch (env, file) {
        case let (env?, nil): return .environment(env)
        case let (nil, file?): return .file(file)
        case (nil, nil):
            problems.append("\(at): give the key source, `\(envKey)` (an environment variable) or `\(fileKey)` (a file); keys are never written in the configuration")
            return nil
        case (_?, _?):
            problems.append("\(at): give one key source, not both `\(envKey)` and `\(fileKey)`")
            return nil
        }
    }

    private mutating func parseMigrationMode(_ value: String, at: String) -> MigrationMode? {
        guard let mode = MigrationMode(rawValue: value) else {
            problems.append("\(at): must be apply, verify or skip, not \(String(reflecting: value))")
            return nil
        }
        return mode
    }

    private mutating func string(_ value: Any?, at: String, required: Bool) -> String? {
        guard let value else {
            if required { problems.append("\(at): missing") }
            return nil
        }
        guard let string = value as? String, !string.isEmpty else {
            problems.append("\(at): must be a non-empty string")
            return nil
        }
        return string
    }

    private mutating func checkKeys(_ object: [String: Any], allowed: [String], at: String) {
        for key in object.keys.sorted() where !allowed.contains(key) {
            let location = at.isEmpty ? key : "\(at).\(key)"
            problems.append("\(location): unknown key (allowed: \(allowed.joined(separator: ", ")))")
        }
    }

    private func resolve(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        return baseDirectory.appendingPathComponent(path).standardizedFileURL.path
    }
}

/// A configuration that can't run, with every problem found.
public struct ServiceConfigurationError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The configuration file.
    public var file: String
    /// One line a problem, each naming where it is (`databases.players.path: missing`).
    public var problems: [String]

    public var description: String {
        "Invalid configuration \(file):\n" + problems.map { "  - \($0)" }.joined(separator: "\n")
    }
}
