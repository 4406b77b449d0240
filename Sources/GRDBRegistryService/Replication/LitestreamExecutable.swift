import Foundation

/// The `litestream` executable of a configuration, and how the library
/// starts it: the one launcher of `litestream replicate` (the replicator)
/// and `litestream restore` (``LitestreamRestore``).
///
/// `replication.litestream` is a path when it has a `/`, run as is, or a
/// name looked up in `PATH` by `/usr/bin/env`, as a shell would. The child
/// gets the daemon's environment without any variable that holds a key of
/// the configuration: Litestream needs the rest (cloud credentials), never
/// a key.
///
/// ```swift
/// let litestream = try LitestreamExecutable(configuration: configuration, environment: environment)
/// let process = try litestream.start(["version"])
/// process.waitUntilExit()
/// ```
///
/// ## Topics
///
/// ### Starting Litestream
///
/// - ``init(configuration:environment:)``
/// - ``start(_:configure:)``
package struct LitestreamExecutable: Sendable {
    /// `replication.litestream`: a path, or a name looked up in `PATH`.
    package let path: String
    /// The environment of the child, without the configuration's keys.
    package let environment: [String: String]

    /// The executable of `configuration`'s `replication` section.
    ///
    /// - throws: ``ReplicationError/notConfigured`` when the configuration
    ///   has no `replication` section.
    package init(configuration: RegistryConfiguration, environment: [String: String]) throws(ReplicationError) {
        guard let replication = configuration.replication else { throw .notConfigured }
        self.path = replication.litestream
        self.environment = configuration.childEnvironment(environment)
    }

    /// Starts `litestream <arguments>`. `configure` sets what else the
    /// process needs before it starts (its output pipes).
    ///
    /// - throws: ``ReplicationError/litestreamNotFound(path:reason:)`` when
    ///   the process can't be started.
    package func start(_ arguments: [String], configure: (Process) -> Void = { _ in }) throws(ReplicationError) -> Process {
        let process = Process()
        if path.contains("/") {
            process.executableURL = URL(fileURLWithPath: path)
            process.arguments = arguments
        } else {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [path] + arguments
        }
        process.environment = environment
        configure(process)
        do {
            try process.run()
        } catch {
            throw .litestreamNotFound(path: path, reason: "\(error)")
        }
        return process
    }
}
