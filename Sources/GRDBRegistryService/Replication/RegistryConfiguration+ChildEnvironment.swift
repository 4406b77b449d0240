import GRDBCipher
import GRDBMigrations

extension RegistryConfiguration {
    /// `environment` without the key variables this configuration names
    /// (every database key and the tenant master key): what a child
    /// process such as Litestream gets.
    func childEnvironment(_ environment: [String: String]) -> [String: String] {
        let sources = databases.compactMap(\.key) + [tenants?.masterKey].compactMap { $0 }
        return KeySource.childEnvironment(environment, removingKeysOf: sources)
    }
}
