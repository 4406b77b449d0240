import Foundation

extension KeySource {
    /// `environment` without the variables that hold keys: for a child
    /// process (Litestream, a hook) that needs the rest of it (paths,
    /// cloud credentials) but must never hold a database key.
    ///
    /// ```swift
    /// let process = Process()
    /// process.environment = KeySource.childEnvironment(
    ///     ProcessInfo.processInfo.environment, removingKeysOf: [.environment("PLAYERS_KEY")])
    /// ```
    ///
    /// Removed: the variable of every ``environment(_:)`` source given,
    /// and every variable whose name starts with `GRDBREGISTRY_` and
    /// contains `KEY` (any case), the prefix of this package's own
    /// variables.
    public static func childEnvironment(_ environment: [String: String], removingKeysOf sources: [KeySource]) -> [String: String] {
        let names = Set(sources.compactMap { source -> String? in
            if case .environment(let name) = source { return name }
            return nil
        })
        return environment.filter { name, _ in
            if names.contains(name) { return false }
            let upper = name.uppercased()
            return !(upper.hasPrefix("GRDBREGISTRY_") && upper.contains("KEY"))
        }
    }
}
