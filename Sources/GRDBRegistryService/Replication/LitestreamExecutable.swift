import Foundation
import GRDBReplicaStore
import Synchronization

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
/// The child ends with the daemon, however the daemon ends (a SIGKILL, a
/// crash): it is started through util-linux's `setpriv --pdeathsig TERM`,
/// so the kernel sends it SIGTERM when its parent dies, and Litestream
/// stops as it does at a graceful shutdown. No replicator outlives its
/// daemon to hold the socket, or to write into a replica that another
/// node owns by then. The kernel sends that signal when the *thread* that
/// started the child ends, not the process: each child is started by a
/// thread of its own, which lives until the child ends (pool threads end
/// when idle, and would take their children with them). Litestream, a Go
/// program, handles SIGTERM whatever signal mask it inherits (a child
/// started from a thread of Dispatch's inherits one that blocks it): a
/// program configured in its place must unblock it too. Without
/// `setpriv` (not a util-linux system), the child is started as it is,
/// and a daemon that dies leaves it running, until the next daemon on
/// the same socket replaces it.
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
        var child = configuration.childEnvironment(environment)
        if ReplicaStore.isS3(replication.replica) {
            // The settings this library's own S3 client uses, for
            // Litestream's too (its AWS SDK would otherwise look for the
            // instance metadata service, and fail on AWS_CA_BUNDLE): one
            // store, reached the same way by both. A store without usable
            // settings is refused here, before any upload fails quietly.
            do {
                let (location, settings) = try ReplicaStore.s3(replica: replication.replica, environment: replication.s3Environment(environment))
                child.merge(settings.litestreamReplica(location: location, keyPrefix: "").environment) { _, store in store }
            } catch {
                throw .litestreamRefused(reason: "\(error)")
            }
        }
        self.environment = child
    }

    /// Starts `litestream <arguments>`, a child that ends when this process
    /// dies. `configure` sets what else the process needs before it starts
    /// (its output pipes, a termination handler).
    ///
    /// The `Process` is Litestream's own: `setpriv` replaces itself with
    /// Litestream (same pid), so its pid, signals, exit status and pipes
    /// are Litestream's.
    ///
    /// - throws: ``ReplicationError/litestreamNotFound(path:reason:)`` when
    ///   the process can't be started, or the path is no executable file.
    package func start(_ arguments: [String], configure: (Process) -> Void = { _ in }) throws(ReplicationError) -> Process {
        var command = path.contains("/") ? [path] : ["/usr/bin/env", path]
        if path.contains("/") {
            // setpriv would start, then fail to run it: said here, as a
            // missing path always was.
            guard FileManager.default.isExecutableFile(atPath: path) else {
                throw .litestreamNotFound(path: path, reason: "no executable file at this path")
            }
        }
        if let setpriv = Self.setpriv {
            command = [setpriv, "--pdeathsig", "TERM", "--"] + command
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst()) + arguments
        process.environment = environment
        configure(process)
        do {
            try Self.runOnOwnThread(process)
        } catch {
            throw .litestreamNotFound(path: path, reason: "\(error)")
        }
        return process
    }

    /// util-linux's `setpriv`, if installed.
    static let setpriv: String? = ["/usr/bin/setpriv", "/bin/setpriv"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// Runs `process` from a new thread that lives until the process ends:
    /// the parent-death signal follows the thread that forked, so the
    /// caller's thread (of a pool, which ends when idle) must not be it.
    private static func runOnOwnThread(_ process: Process) throws {
        let launch = LaunchOutcome()
        let exited = DispatchSemaphore(value: 0)
        let handler = process.terminationHandler
        process.terminationHandler = { process in
            handler?(process)
            exited.signal()
        }
        let thread = Thread {
            do {
                try process.run()
            } catch {
                launch.finish(error)
                return
            }
            launch.finish(nil)
            exited.wait()
        }
        thread.name = "GRDBRegistryService.Litestream"
        thread.start()
        if let error = launch.wait() { throw error }
    }

    /// The outcome of `Process.run()` on the launching thread, handed to
    /// the caller waiting for it.
    private final class LaunchOutcome: Sendable {
        private let done = DispatchSemaphore(value: 0)
        private let error = Mutex<(any Error)?>(nil)

        func finish(_ failure: (any Error)?) {
            error.withLock { $0 = failure }
            done.signal()
        }

        func wait() -> (any Error)? {
            done.wait()
            return error.withLock { $0 }
        }
    }
}
