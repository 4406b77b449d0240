import Configuration
import Foundation

extension RegistryConfiguration {
    /// Reads and checks a configuration from a swift-configuration
    /// `ConfigReader`: the keys of the configuration file, whatever the
    /// reader's providers are (environment variables, a JSON file, the
    /// command line, in the order the application chose).
    ///
    /// The keys are those of the file (see <doc:Configuration>), with dots:
    /// `databases.players.path`, `tenants.maxOpen`,
    /// `tenants.masterKey.env`, `replication.replica`… A reader can't list
    /// the databases a provider holds, so `databases` names them; each
    /// needs its `databases.<name>.path`. A section (`tenants`,
    /// `replication`, a `key`) is there when one of its keys is.
    ///
    /// ```swift
    /// import Configuration
    ///
    /// let config = ConfigReader(providers: [
    ///     // REGISTRY_TENANTS_MAX_OPEN=512 wins over the file's registry.tenants.maxOpen.
    ///     EnvironmentVariablesProvider(),
    ///     try await FileProvider<JSONSnapshot>(filePath: "/etc/myapp/config.json"),
    /// ])
    /// let configuration = try RegistryConfiguration(
    ///     reading: config.scoped(to: "registry"),
    ///     databases: ["catalog", "players"],
    ///     baseDirectory: URL(fileURLWithPath: "/etc/myapp"))
    /// ```
    ///
    /// Every problem is reported at once, each naming its key
    /// (`tenants.maxOpen: must be a positive integer`), as when a file is
    /// loaded; the first provider that has a key gives its value, and an
    /// invalid value there is a problem, not a fallback to the next.
    /// Unknown keys are not reported: a reader can't list its keys.
    ///
    /// - parameter reader: The reader, scoped to the registry's keys if
    ///   they are under a prefix.
    /// - parameter databases: The names of the named databases.
    /// - parameter baseDirectory: The directory relative paths resolve against.
    /// - parameter environment: Variables for the `GRDBREGISTRY_*`
    ///   overrides of the file format (none by default: a reader has its
    ///   own environment provider).
    /// - throws: ``RegistryConfigurationError``, listing every problem.
    public init(
        reading reader: ConfigReader,
        databases: [String] = [],
        baseDirectory: URL,
        environment: [String: String] = [:]
    ) throws {
        let log = ProblemLog()
        let section = ConfigReaderSection(reader: reader, path: [], log: log, databaseNames: databases)
        self = try Self.build(FileModel(section), log: log, baseDirectory: baseDirectory, file: reader.description, environment: environment)
    }
}

/// A section of the configuration in a `ConfigReader`: the keys under
/// `path`.
struct ConfigReaderSection: ConfigurationSection {
    let reader: ConfigReader
    let path: [String]
    let log: ProblemLog
    /// The names of `databases`, which a reader can't list.
    let databaseNames: [String]

    var location: String { path.joined(separator: ".") }

    func lookUp<Value: ConfigurationValue>(_ key: String) -> ConfigurationLookup<Value> {
        let configKey = ConfigKey(path + [key])
        if let value = try? Value.read(reader, configKey) { return .found(value) }
        return hasValue(configKey) ? .invalid : .missing
    }

    func lookUpSection(_ key: String, keys: KeyTable) -> ConfigurationLookup<ConfigReaderSection> {
        let section = ConfigReaderSection(reader: reader, path: path + [key], log: log, databaseNames: [])
        return section.contains(keys) ? .found(section) : .missing
    }

    func namedSections(_ key: String, keys: KeyTable, expected: String, entryExpected: String) -> [(name: String, section: ConfigReaderSection)] {
        guard path.isEmpty, key == "databases" else { return [] }
        return Set(databaseNames).sorted().map { name in
            (name, ConfigReaderSection(reader: reader, path: [key, name], log: log, databaseNames: []))
        }
    }

    func contains(_ keys: KeyTable) -> Bool {
        keys.names.contains { name in
            if let section = keys.sections[name] {
                return ConfigReaderSection(reader: reader, path: path + [name], log: log, databaseNames: []).contains(section)
            }
            return hasValue(ConfigKey(path + [name]))
        }
    }

    func checkKeys(_ keys: KeyTable) {}

    /// Whether some provider has a value for `key`, of any type: a value
    /// of the wrong type is a problem to report, not a missing key. Asked
    /// type by type through the reader's public getters (each is `nil`
    /// when no provider has a value of that type), since the error a
    /// `required…` getter throws for a missing key is not public.
    func hasValue(_ key: ConfigKey) -> Bool {
        reader.string(forKey: key) != nil
            || reader.int(forKey: key) != nil
            || reader.double(forKey: key) != nil
            || reader.bool(forKey: key) != nil
            || reader.stringArray(forKey: key) != nil
            || reader.intArray(forKey: key) != nil
            || reader.doubleArray(forKey: key) != nil
            || reader.boolArray(forKey: key) != nil
            || reader.bytes(forKey: key) != nil
    }
}
